#include "redis_server.hpp"

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "spawn.hpp"

#ifndef REDLOCK_TEST_REDIS_SERVER
#define REDLOCK_TEST_REDIS_SERVER "redis-server"
#endif

namespace redlock::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto poll_interval = 2ms;
constexpr auto start_timeout = 5s;
constexpr auto probe_timeout = 200ms;
constexpr auto inspection_timeout = 1s;
constexpr int port_attempts = 5;
constexpr const char* log_name = "redis.log";
constexpr const char* out_name = "redis.out";  // stdout and stderr: errors before the log opens

timeval to_timeval(std::chrono::microseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1'000'000);
  tv.tv_usec = static_cast<suseconds_t>(d.count() % 1'000'000);
  return tv;
}

std::string errno_message(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

std::string find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const std::string candidate = (d.empty() ? "." : d) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error("redis-server not found in PATH: " + name);
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(errno_message("socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string message = errno_message("bind 127.0.0.1:0");
    ::close(fd);
    throw std::runtime_error(message);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// SIGKILL and reap; false if the process did not go away in time.
bool kill_and_reap(pid_t pid, bool paused) noexcept {
  if (paused) ::kill(pid, SIGCONT);
  ::kill(pid, SIGKILL);
  const auto deadline = Clock::now() + scaled(start_timeout);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll_interval);
  }
}

// hiredis 0.14 writes with write(2), so a dead peer raises SIGPIPE, which would
// kill the whole test binary. Block it on this thread for the duration of one
// call and swallow any SIGPIPE the call raised.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pipe_only;
      sigemptyset(&pipe_only);
      sigaddset(&pipe_only, SIGPIPE);
      const timespec zero{};
      while (sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_{};
  bool was_pending_ = false;
};

std::size_t file_size(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<std::size_t>(size);
}

std::string read_from(const std::string& path, std::size_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string last_lines(const std::string& text, std::size_t count) {
  std::deque<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(std::move(line));
    if (lines.size() > count) lines.pop_front();
  }
  std::string tail;
  for (const auto& line : lines) tail += "  " + line + "\n";
  return tail;
}

// Connects, AUTHs and checks that the server on `port` is the process `pid`
// and has finished loading; nullptr when it is not (yet).
redisContext* probe(int port, pid_t pid, const std::string& password) {
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, to_timeval(probe_timeout));
  if (c == nullptr) return nullptr;
  auto ok = [&] {
    if (c->err != 0) return false;
    redisSetTimeout(c, to_timeval(probe_timeout));
    auto run = [&](std::vector<const char*> argv) {
      return static_cast<redisReply*>(
          redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), nullptr));
    };
    if (!password.empty()) {
      redisReply* r = run({"AUTH", password.c_str()});
      const bool authed = r != nullptr && r->type == REDIS_REPLY_STATUS;
      if (r != nullptr) freeReplyObject(r);
      if (!authed) return false;
    }
    // Another process may have taken the port we picked: only our pid counts.
    redisReply* info = run({"INFO", "server"});
    if (info == nullptr) return false;
    const std::string text = info->type == REDIS_REPLY_STRING ? render(*info) : "";
    freeReplyObject(info);
    const std::string expected = "process_id:" + std::to_string(pid) + "\r\n";
    if (text.find(expected) == std::string::npos) return false;
    redisReply* pong = run({"PING"});  // LOADING while it reads its AOF
    const bool ready = pong != nullptr && pong->type == REDIS_REPLY_STATUS && render(*pong) == "PONG";
    if (pong != nullptr) freeReplyObject(pong);
    return ready;
  }();
  if (!ok) {
    redisFree(c);
    return nullptr;
  }
  return c;
}

}  // namespace

std::string render(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(reply.str, reply.len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(reply.integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    case REDIS_REPLY_ARRAY: {
      std::string text;
      for (std::size_t i = 0; i < reply.elements; ++i) {
        if (i != 0) text += ' ';
        text += render(*reply.element[i]);
      }
      return text;
    }
    default:
      return "(unknown reply type " + std::to_string(reply.type) + ")";
  }
}

void RedisServer::ContextDeleter::operator()(redisContext* c) const {
  redisFree(c);
}
void RedisServer::ReplyDeleter::operator()(redisReply* r) const {
  freeReplyObject(r);
}

// The delegated-to constructor has finished, so a throw here runs ~RedisServer.
RedisServer::RedisServer(ServerOptions options) : RedisServer(std::move(options), Deferred{}) {
  wait_until_started();
}

RedisServer::RedisServer(ServerOptions options, Deferred) : options_(std::move(options)) {
  try {
    executable_ = find_executable(REDLOCK_TEST_REDIS_SERVER);
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/redlock-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error(errno_message(("mkdtemp " + pattern).c_str()));
    }
    dir_ = pattern;
    if (options_.unix_socket) {
      unix_socket_ = dir_ + "/redis.sock";
      if (unix_socket_.size() >= sizeof(sockaddr_un{}.sun_path)) {
        throw std::runtime_error("unix socket path too long (set a shorter TMPDIR): " + unix_socket_);
      }
    }
    pick_ports();
    spawn();
  } catch (...) {
    stop();
    throw;
  }
}

RedisServer::~RedisServer() {
  stop();
}

void RedisServer::stop() noexcept {
  context_.reset();
  if (pid_ > 0 && !kill_and_reap(pid_, paused_)) {
    std::fprintf(stderr, "warning: redis-server pid %d did not exit after SIGKILL\n", static_cast<int>(pid_));
  }
  pid_ = -1;
  paused_ = false;
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::vector<std::string> RedisServer::argv() const {
  std::vector<std::string> args = {
      executable_, "--port",       std::to_string(port_),       "--bind",           "127.0.0.1", "--save",
      "",          "--appendonly", options_.aof ? "yes" : "no", "--daemonize",      "no",        "--dir",
      dir_,        "--logfile",    dir_ + "/" + log_name,       "--protected-mode", "no",
  };
  if (options_.aof) args.insert(args.end(), {"--appendfsync", "always"});
  if (options_.unix_socket) {
    args.insert(args.end(), {"--unixsocket", unix_socket_, "--unixsocketperm", "700"});
  }
  bool has_requirepass = false;
  for (const auto& a : options_.args) has_requirepass = has_requirepass || a == "--requirepass";
  if (!options_.password.empty() && !has_requirepass) {
    args.insert(args.end(), {"--requirepass", options_.password});
  }
  if (options_.tls) {
    args.insert(args.end(),
                {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", options_.tls->cert_file,
                 "--tls-key-file", options_.tls->key_file, "--tls-ca-cert-file", options_.tls->ca_file,
                 "--tls-auth-clients", options_.tls->auth_clients ? "yes" : "no"});
  }
  args.insert(args.end(), options_.args.begin(), options_.args.end());
  return args;
}

std::vector<std::string> RedisServer::environment() const {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (std::string extra : options_.env) {
    for (auto at = extra.find("{dir}"); at != std::string::npos; at = extra.find("{dir}", at + dir_.size()))
      extra.replace(at, 5, dir_);
    env.push_back(std::move(extra));
  }
  return env;
}

void RedisServer::spawn() {
  // Everything the child needs is prepared before fork: between fork and exec
  // only async-signal-safe calls are allowed (the test may have other threads).
  const std::vector<std::string> args = argv();
  std::vector<char*> c_args;
  for (const auto& a : args) c_args.push_back(const_cast<char*>(a.c_str()));
  c_args.push_back(nullptr);
  log_offset_ = file_size(dir_ + "/" + log_name);
  const std::string out_path = dir_ + "/" + out_name;
  const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) throw std::runtime_error(errno_message(("open " + out_path).c_str()));
  const int null_in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_in < 0) {
    ::close(out);
    throw std::runtime_error(errno_message("open /dev/null"));
  }
  std::vector<std::string> env_storage = environment();
  std::vector<char*> env;
  for (auto& e : env_storage) env.push_back(e.data());
  env.push_back(nullptr);
  const pid_t child = spawn_child(c_args.data(), env.data(), {null_in, out, out}, false);
  const int fork_errno = errno;
  ::close(out);
  ::close(null_in);
  if (child < 0) {
    errno = fork_errno;
    throw std::runtime_error(errno_message("fork"));
  }
  pid_ = child;
  paused_ = false;
}

RedisServer::Ready RedisServer::wait_ready() {
  const auto deadline = Clock::now() + scaled(start_timeout);
  for (;;) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      const std::string log =
          read_from(dir_ + "/" + log_name, log_offset_) + read_from(dir_ + "/" + out_name, 0);
      if (log.find("Address already in use") != std::string::npos) return Ready::port_taken;
      throw std::runtime_error("redis-server on port " + std::to_string(port_) + " exited (status " +
                               std::to_string(status) + ") before answering PING:\n" + log_tail());
    }
    {
      SigpipeGuard guard;
      if (redisContext* c = probe(port_, pid_, options_.password)) {
        redisSetTimeout(c, to_timeval(inspection_timeout));
        context_.reset(c);
        return Ready::ok;
      }
    }
    if (Clock::now() > deadline) {
      throw std::runtime_error("redis-server on port " + std::to_string(port_) +
                               " did not answer PING within " +
                               std::to_string(scaled(start_timeout).count()) + " ms:\n" + log_tail());
    }
    std::this_thread::sleep_for(poll_interval);
  }
}

void RedisServer::wait_until_started() {
  for (int attempt = 1;; ++attempt) {
    if (wait_ready() == Ready::ok) return;
    if (attempt == port_attempts) {
      throw std::runtime_error("no free port after " + std::to_string(port_attempts) + " attempts:\n" +
                               log_tail());
    }
    pick_ports();
    spawn();
  }
}

void RedisServer::pick_ports() {
  port_ = pick_free_port();
  tls_port_ = options_.tls ? pick_free_port() : 0;
}

std::string RedisServer::log_tail() const {
  return "--- " + dir_ + "/" + log_name + " (tail)\n" +
         last_lines(read_from(dir_ + "/" + log_name, log_offset_), 20) + "--- " + dir_ + "/" + out_name +
         " (tail)\n" + last_lines(read_from(dir_ + "/" + out_name, 0), 20);
}

bool RedisServer::running() const {
  if (pid_ <= 0) return false;
  // WNOWAIT leaves an exited child unreaped, so its pid cannot be reused
  // before kill9() or the destructor reaps it.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info.si_pid == 0;
}

redlock::Endpoint RedisServer::tls_endpoint() const {
  redlock::Endpoint e = endpoint();
  e.port = tls_port_;
  e.tls = true;
  return e;
}

redlock::Endpoint RedisServer::endpoint() const {
  redlock::Endpoint e;
  e.host = "127.0.0.1";
  e.port = port_;
  e.password = options_.password;
  return e;
}

void RedisServer::kill9() {
  context_.reset();
  if (pid_ <= 0) return;
  if (!kill_and_reap(pid_, paused_)) {
    std::fprintf(stderr, "warning: redis-server pid %d did not exit after SIGKILL\n", static_cast<int>(pid_));
  }
  pid_ = -1;
  paused_ = false;
}

void RedisServer::pause() {
  if (!running()) throw std::logic_error("pause(): redis-server is not running");
  if (paused_) return;
  ::kill(pid_, SIGSTOP);
  const auto deadline = Clock::now() + scaled(start_timeout);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (r == pid_ && WIFSTOPPED(status)) break;
    if (r == pid_) {
      pid_ = -1;
      throw std::runtime_error("pause(): redis-server exited:\n" + log_tail());
    }
    if (Clock::now() > deadline) throw std::runtime_error("pause(): SIGSTOP not delivered");
    std::this_thread::sleep_for(poll_interval);
  }
  paused_ = true;
}

void RedisServer::resume() {
  if (!paused_ || pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  const auto deadline = Clock::now() + scaled(start_timeout);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WCONTINUED | WNOHANG);
    if (r == pid_ && WIFCONTINUED(status)) break;
    if (r == pid_) {
      pid_ = -1;
      paused_ = false;
      throw std::runtime_error("resume(): redis-server exited:\n" + log_tail());
    }
    if (Clock::now() > deadline) throw std::runtime_error("resume(): SIGCONT not delivered");
    std::this_thread::sleep_for(poll_interval);
  }
  paused_ = false;
}

void RedisServer::restart(bool keep_data) {
  kill9();
  if (!keep_data) {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const auto name = entry.path().filename();
      if (name != log_name && name != out_name) fs::remove_all(entry.path());
    }
  }
  spawn();
  if (wait_ready() == Ready::port_taken) {
    throw std::runtime_error("restart(): port " + std::to_string(port_) +
                             " was taken while the server was down");
  }
}

redisContext& RedisServer::inspection() {
  if (context_) return *context_;
  if (pid_ <= 0) throw std::runtime_error("redis-server is not running");
  SigpipeGuard guard;
  ContextPtr c(redisConnectWithTimeout("127.0.0.1", port_, to_timeval(inspection_timeout)));
  if (!c) throw std::runtime_error("cannot allocate a hiredis context");
  if (c->err != 0) {
    throw std::runtime_error("connect 127.0.0.1:" + std::to_string(port_) + ": " + c->errstr);
  }
  redisSetTimeout(c.get(), to_timeval(inspection_timeout));
  if (!options_.password.empty()) {
    const char* argv[] = {"AUTH", options_.password.c_str()};
    ReplyPtr r(static_cast<redisReply*>(redisCommandArgv(c.get(), 2, argv, nullptr)));
    if (!r) throw std::runtime_error(std::string("AUTH: ") + c->errstr);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("AUTH: " + render(*r));
  }
  context_ = std::move(c);
  return *context_;
}

RedisServer::ReplyPtr RedisServer::call(const std::vector<std::string>& argv) {
  redisContext& c = inspection();
  std::vector<const char*> args;
  std::vector<std::size_t> lengths;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  SigpipeGuard guard;
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(&c, static_cast<int>(args.size()), args.data(), lengths.data())));
  if (!reply) {
    // The context is unusable after an I/O error or timeout; the next call reconnects.
    const std::string message = c.errstr;
    context_.reset();
    throw std::runtime_error("127.0.0.1:" + std::to_string(port_) + " " + (argv.empty() ? "" : argv[0]) +
                             ": " + message);
  }
  return reply;
}

std::optional<std::string> RedisServer::get(const std::string& key) {
  const ReplyPtr r = call({"GET", key});
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type == REDIS_REPLY_STRING) return std::string(r->str, r->len);
  throw std::runtime_error("GET " + key + ": " + render(*r));
}

long long RedisServer::pttl(const std::string& key) {
  const ReplyPtr r = call({"PTTL", key});
  if (r->type != REDIS_REPLY_INTEGER) throw std::runtime_error("PTTL " + key + ": " + render(*r));
  return r->integer;
}

void RedisServer::set(const std::string& key, const std::string& value, std::chrono::milliseconds ttl) {
  std::vector<std::string> argv = {"SET", key, value};
  if (ttl.count() > 0) argv.insert(argv.end(), {"PX", std::to_string(ttl.count())});
  const ReplyPtr r = call(argv);
  if (r->type != REDIS_REPLY_STATUS || render(*r) != "OK") {
    throw std::runtime_error("SET " + key + ": " + render(*r));
  }
}

std::string RedisServer::command(const std::vector<std::string>& argv) {
  return render(*call(argv));
}

}  // namespace redlock::test
