#include "monitor.hpp"

#include <hiredis/hiredis.h>

#include <strings.h>
#include <sys/time.h>

#include <stdexcept>

namespace redlock::test {
namespace {

constexpr int max_lines = 1000000;  // a bound on one call's reading, far above any test's traffic

timeval one_second() {
  timeval t{};
  t.tv_sec = 1;
  return t;
}

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

}  // namespace

void Monitor::ContextDeleter::operator()(redisContext* c) const {
  redisFree(c);
}

Monitor::Monitor(RedisServer& server) : server_(server) {
  context_.reset(redisConnectWithTimeout("127.0.0.1", server.port(), one_second()));
  if (!context_ || context_->err != 0)
    throw std::runtime_error("MONITOR: cannot connect to port " + std::to_string(server.port()));
  redisSetTimeout(context_.get(), one_second());
  ReplyPtr ok(static_cast<redisReply*>(redisCommand(context_.get(), "MONITOR")));
  if (!ok || render(*ok) != "OK")
    throw std::runtime_error("MONITOR: " + (ok ? render(*ok) : std::string(context_->errstr)));
}

Monitor::~Monitor() = default;

const std::vector<std::string>& Monitor::requests() {
  std::string mark = "monitor-mark-" + std::to_string(++marks_);
  server_.command({"ECHO", mark});
  for (int i = 0; i < max_lines; ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr)
      throw std::runtime_error(std::string("MONITOR: no marker: ") + context_->errstr);
    ReplyPtr reply(static_cast<redisReply*>(raw));
    std::string line = render(*reply);
    if (line.find(mark) != std::string::npos) return requests_;
    if (line.find(" lua] ") == std::string::npos) requests_.push_back(std::move(line));
  }
  throw std::runtime_error("MONITOR: no marker within " + std::to_string(max_lines) + " lines");
}

// A line is `<time> [<db> <client>] "<command>" "<argument>"...`.
std::size_t count_command(const std::vector<std::string>& requests, const std::string& name) {
  std::size_t n = 0;
  for (const auto& line : requests) {
    auto open = line.find("] \"");
    if (open == std::string::npos) continue;
    auto start = open + 3;
    auto end = line.find('"', start);
    if (end == std::string::npos) continue;
    std::string command = line.substr(start, end - start);
    if (command.size() == name.size() && strncasecmp(command.c_str(), name.c_str(), name.size()) == 0) ++n;
  }
  return n;
}

std::vector<std::size_t> positions(const std::vector<std::string>& requests, std::string_view text) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].find(text) != std::string::npos) at.push_back(i);
  }
  return at;
}

std::string joined(const std::vector<std::string>& requests) {
  std::string text;
  for (const auto& r : requests) text += r + "\n";
  return text;
}

}  // namespace redlock::test
