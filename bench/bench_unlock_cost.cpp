// What one unlock costs a master: the unlock scripts' time per call in the
// master's own accounting (INFO commandstats, evalsha usec_per_call), beside
// the plain compare-and-delete, the floor. Nobody listening is the
// uncontended path; "marked" is a key some Client listens for (the unlock
// publishes, to nobody here, and at the gate looks at the queue).
//
//   bench_unlock_cost [--smoke]
//
// One JSON line per series and turn, then the medians with their ratio to the
// floor. The master runs on CPU 1 and this process on CPU 0.

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "placement.hpp"
#include "scripts.hpp"
#include "support/cluster.hpp"

namespace {

using Connection = std::unique_ptr<redisContext, decltype(&redisFree)>;
using ReplyPtr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

constexpr const char* floor_script =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end\nreturn 0\n";

// hiredis's view of a command: its arguments and their lengths.
struct Argv {
  explicit Argv(const std::vector<std::string>& argv) {
    for (const std::string& a : argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
  }
  int size() const { return static_cast<int>(args.size()); }
  std::vector<const char*> args;
  std::vector<std::size_t> lengths;
};

ReplyPtr call(redisContext* c, const std::vector<std::string>& argv) {
  Argv a(argv);
  auto* reply = static_cast<redisReply*>(redisCommandArgv(c, a.size(), a.args.data(), a.lengths.data()));
  if (reply == nullptr) throw std::runtime_error(std::string("redis: ") + c->errstr);
  return ReplyPtr(reply, &freeReplyObject);
}

void append(redisContext* c, const std::vector<std::string>& argv) {
  Argv a(argv);
  redisAppendCommandArgv(c, a.size(), a.args.data(), a.lengths.data());
}

struct Series {
  const char* name;
  std::string sha;
  bool gate;    // unlock_and_wake's arguments
  bool floor;   // the plain compare-and-delete's
  bool marked;  // a listener's marker beside the key
  std::string value = "0123456789abcdef0123456789abcdef:1795713709768:host:1234";
};

// Evalsha's usec_per_call over `n` unlocks of held keys.
double measure(redisContext* c, const Series& s, int n) {
  const std::string& value = s.value;
  call(c, {"CONFIG", "RESETSTAT"});
  int replies = 0;
  for (int i = 0; i < n; ++i) {
    std::string key = "{bench-" + std::to_string(i % 64) + "}";
    append(c, {"SET", key, value, "PX", "10000"});
    ++replies;
    if (s.marked) {
      append(c, {"SET", key + ":listening", "1", "PX", "10000"});
      ++replies;
    }
    if (s.floor)
      append(c, {"EVALSHA", s.sha, "1", key, value});
    else if (s.gate)
      append(c, {"EVALSHA", s.sha, "2", key, key + ":listening", value, "1000"});
    else
      append(c, {"EVALSHA", s.sha, "2", key, key + ":listening", value});
    ++replies;
  }
  for (int i = 0; i < replies; ++i) {
    void* reply = nullptr;
    if (redisGetReply(c, &reply) != REDIS_OK) throw std::runtime_error(std::string("redis: ") + c->errstr);
    freeReplyObject(reply);
  }
  ReplyPtr info = call(c, {"INFO", "commandstats"});
  std::string stats(info->str, info->len);
  const std::string label = "cmdstat_evalsha:";
  auto at = stats.find(label);
  auto per_call = stats.find("usec_per_call=", at);
  if (at == std::string::npos || per_call == std::string::npos) throw std::runtime_error("no evalsha stats");
  return std::stod(stats.substr(per_call + std::strlen("usec_per_call=")));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  try {
    redlock::test::Cluster cluster(1);
    bool pinned = !smoke && bench::pin_apart(cluster);
    Connection c(redisConnect("127.0.0.1", cluster[0].port()), &redisFree);
    if (!c || c->err != 0) throw std::runtime_error("cannot connect to the master");
    auto load = [&](std::string_view body) {
      ReplyPtr r = call(c.get(), {"SCRIPT", "LOAD", std::string(body)});
      return std::string(r->str, r->len);
    };
    namespace scripts = redlock::scripts;
    std::vector<Series> series = {
        {"floor", load(floor_script), false, true, false},
        {"floor_short_value", load(floor_script), false, true, false, "0123456789abcdef0123456789abcdef"},
        {"unlock", load(scripts::unlock.body), false, false, false},
        {"unlock_and_wake", load(scripts::unlock_and_wake.body), true, false, false},
        {"unlock_marked", load(scripts::unlock.body), false, false, true},
        {"unlock_and_wake_marked", load(scripts::unlock_and_wake.body), true, false, true},
    };
    const int n = smoke ? 500 : 50000;
    const int turns = smoke ? 1 : 7;
    std::vector<std::vector<double>> results(series.size());
    for (int turn = 0; turn < turns; ++turn) {
      for (std::size_t i = 0; i < series.size(); ++i) {
        double us = measure(c.get(), series[i], n);
        results[i].push_back(us);
        std::printf(
            "{\"bench\":\"unlock_cost\",\"script\":\"%s\",\"turn\":%d,\"unlocks\":%d,\"usec_per_call\":%.3f,"
            "\"pinned\":%s}\n",
            series[i].name, turn, n, us, pinned ? "true" : "false");
      }
    }
    double floor_us = median(results[0]);
    for (std::size_t i = 0; i < series.size(); ++i) {
      double us = median(results[i]);
      std::printf(
          "{\"bench\":\"unlock_cost\",\"script\":\"%s\",\"turn\":\"median\",\"usec_per_call\":%.3f,"
          "\"vs_floor\":%.3f}\n",
          series[i].name, us, us / floor_us);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_unlock_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
