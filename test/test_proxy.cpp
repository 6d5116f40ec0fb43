#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <hiredis/hiredis.h>

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/redis_server.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr const char* loading = "-LOADING Redis is loading the dataset in memory";

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

// hiredis writes with write(2), so writing to a connection the proxy reset
// raises SIGPIPE, which would end the test binary. Keep it blocked for one
// call and discard it afterwards.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlocked() {
    const timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
};

struct Reply {
  int type = 0;      // REDIS_REPLY_*
  std::string text;  // string, status or error (without the '-'); integer in decimal
};

// A plain blocking hiredis connection to 127.0.0.1:port. Connecting and every
// reply wait at most `timeout` (scaled), so a swallowed command fails the call
// instead of hanging the test. After a failed call the connection is dead.
class SyncClient {
 public:
  SyncClient(int port, std::chrono::milliseconds timeout)
      : context_(redisConnectWithTimeout("127.0.0.1", port, to_timeval(scaled(timeout)))) {
    if (context_ == nullptr) throw std::runtime_error("redisConnectWithTimeout: out of memory");
    if (context_->err == 0) redisSetTimeout(context_, to_timeval(scaled(timeout)));
  }
  ~SyncClient() { redisFree(context_); }
  SyncClient(const SyncClient&) = delete;
  SyncClient& operator=(const SyncClient&) = delete;

  /// One command and its reply; std::nullopt when no reply came (see error()).
  std::optional<Reply> command(const std::vector<std::string>& argv) {
    append(argv);
    return reply();
  }

  /// Queues a command without waiting: pipelined until reply() is called.
  void append(const std::vector<std::string>& argv) {
    std::vector<const char*> args;
    std::vector<std::size_t> lengths;
    for (const auto& a : argv) {
      args.push_back(a.data());
      lengths.push_back(a.size());
    }
    redisAppendCommandArgv(context_, static_cast<int>(args.size()), args.data(), lengths.data());
  }

  /// Writes what is queued and reads the next reply.
  std::optional<Reply> reply() {
    if (context_->err != 0) return std::nullopt;
    SigpipeBlocked guard;
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return std::nullopt;
    auto* r = static_cast<redisReply*>(raw);
    Reply out;
    out.type = r->type;
    if (r->type == REDIS_REPLY_INTEGER) {
      out.text = std::to_string(r->integer);
    } else if (r->str != nullptr) {
      out.text.assign(r->str, r->len);
    }
    freeReplyObject(r);
    return out;
  }

  /// Sends raw bytes on the socket, bypassing hiredis's output buffer.
  void send_raw(const std::string& bytes) {
    SigpipeBlocked guard;
    REQUIRE(::send(context_->fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }

  /// hiredis's description of the failure; empty while the connection is fine.
  std::string error() const { return context_->err != 0 ? context_->errstr : ""; }

 private:
  redisContext* context_;
};

bool is_status(const std::optional<Reply>& r, const std::string& text) {
  return r && r->type == REDIS_REPLY_STATUS && r->text == text;
}

bool is_loading_error(const std::optional<Reply>& r) {
  return r && r->type == REDIS_REPLY_ERROR && r->text == std::string(loading + 1);
}

std::chrono::milliseconds since(steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - t0);
}

}  // namespace

TEST_CASE("pass forwards commands and replies unchanged", "[proxy]") {
  RedisServer server;
  FaultProxy proxy(server.port());
  CHECK(proxy.endpoint().port == proxy.port());
  {
    SyncClient client(proxy.port(), 1s);
    CHECK(is_status(client.command({"SET", "{greeting}", "hello"}), "OK"));
    std::optional<Reply> got = client.command({"GET", "{greeting}"});
    REQUIRE(got);
    CHECK(got->text == "hello");
    CHECK(server.get("{greeting}") == "hello");
    CHECK(proxy.connections() == 1);
    CHECK(proxy.requests_seen() == 2);
  }
  CHECK(eventually([&] { return proxy.connections() == 0; }));
}

TEST_CASE("delay holds back every chunk in both directions and keeps their order", "[proxy]") {
  RedisServer server;
  FaultProxy proxy(server.port());
  SyncClient client(proxy.port(), 2s);
  REQUIRE(is_status(client.command({"PING"}), "PONG"));
  proxy.delay(100ms);

  auto t0 = steady::now();
  CHECK(is_status(client.command({"PING"}), "PONG"));
  const auto round_trip = since(t0);
  // 100 ms on the way to the server and 100 ms on the way back.
  CHECK(round_trip >= 200ms);
  CHECK(round_trip < scaled(1s));

  for (int i = 0; i < 5; ++i) client.append({"INCR", "counter"});
  for (int i = 1; i <= 5; ++i) {
    std::optional<Reply> r = client.reply();
    REQUIRE(r);
    CHECK(r->text == std::to_string(i));
  }

  proxy.pass();
  t0 = steady::now();
  CHECK(is_status(client.command({"PING"}), "PONG"));
  CHECK(since(t0) < scaled(100ms));
}

TEST_CASE("blackhole swallows commands: the client times out, the server sees nothing", "[proxy]") {
  RedisServer server;
  FaultProxy proxy(server.port());
  SyncClient client(proxy.port(), 300ms);
  REQUIRE(is_status(client.command({"PING"}), "PONG"));
  proxy.blackhole();

  const auto t0 = steady::now();
  CHECK_FALSE(client.command({"SET", "{swallowed}", "1"}));
  const auto waited = since(t0);
  CHECK(waited >= 250ms);
  CHECK(waited < scaled(2s));
  CHECK(proxy.requests_seen() == 2);
  CHECK(proxy.connections() == 1);  // left open, as a hung server would
  CHECK(server.get("{swallowed}") == std::nullopt);

  SyncClient fresh(proxy.port(), 300ms);
  CHECK_FALSE(fresh.command({"PING"}));
  CHECK(proxy.connections() == 2);
}

TEST_CASE("drop_replies runs the command on the server but the client gets no reply", "[proxy]") {
  RedisServer server;
  FaultProxy proxy(server.port());
  proxy.drop_replies();
  SyncClient client(proxy.port(), 300ms);
  CHECK_FALSE(client.command({"SET", "{applied}", "yes"}));
  CHECK(eventually([&] { return server.get("{applied}") == std::optional<std::string>("yes"); }));
}

TEST_CASE("error_reply answers each request with the error and forwards nothing", "[proxy]") {
  RedisServer server;
  FaultProxy proxy(server.port());
  proxy.error_reply(loading);
  SyncClient client(proxy.port(), 1s);

  CHECK(is_loading_error(client.command({"SET", "{refused}", "1"})));

  SECTION("one error per pipelined request") {
    for (int i = 0; i < 3; ++i) client.append({"SET", "{refused}", std::to_string(i)});
    for (int i = 0; i < 3; ++i) CHECK(is_loading_error(client.reply()));
    CHECK(proxy.requests_seen() == 4);
  }
  SECTION("one error for a request split across writes") {
    client.send_raw("*3\r\n$3\r\nSET\r\n$7\r\nref");
    std::this_thread::sleep_for(20ms);  // so the rest arrives as a read of its own
    client.send_raw("used\r\n$1\r\n2\r\n");
    CHECK(is_loading_error(client.reply()));
    // A PING behind it gets the next error, so exactly one answered the split request.
    CHECK(is_loading_error(client.command({"PING"})));
    CHECK(proxy.requests_seen() == 3);
  }
  CHECK(server.get("{refused}") == std::nullopt);
  CHECK_THROWS_AS(proxy.error_reply("LOADING no dash"), std::invalid_argument);
  CHECK_THROWS_AS(proxy.error_reply("-ERR two\r\nlines"), std::invalid_argument);
}

TEST_CASE("reset closes open connections with RST and resets new ones", "[proxy]") {
  RedisServer server;
  FaultProxy proxy(server.port());
  SyncClient client(proxy.port(), 1s);
  REQUIRE(is_status(client.command({"PING"}), "PONG"));
  REQUIRE(proxy.connections() == 1);

  proxy.reset();
  CHECK(proxy.connections() == 0);
  CHECK_FALSE(client.command({"PING"}));
  // An RST, not an orderly close (which hiredis reports as "Server closed the connection").
  CHECK_THAT(client.error(), Catch::Contains("reset"));

  SyncClient fresh(proxy.port(), 1s);
  CHECK_FALSE(fresh.command({"PING"}));
  CHECK(proxy.connections() == 0);

  proxy.pass();
  SyncClient after(proxy.port(), 1s);
  CHECK(is_status(after.command({"PING"}), "PONG"));
}

TEST_CASE("try_lock succeeds on two masters while the third answers LOADING", "[proxy]") {
  Cluster masters(3);
  FaultProxy proxy(masters[2].port());
  proxy.error_reply(loading);
  Options options = masters.options();
  options.masters[2] = proxy.endpoint();
  options.command_timeout = 100ms;
  Redlock redlock(options);

  Result<Lock> lock = redlock.try_lock("report", 10s);
  REQUIRE(lock);
  CHECK(masters[0].get("{report}") == lock->value);
  CHECK(masters[1].get("{report}") == lock->value);
  CHECK(masters[2].get("{report}") == std::nullopt);
  // The round decided on the first two answers; the third master's handshake
  // may still be on its way to the proxy.
  CHECK(eventually([&] { return proxy.requests_seen() > 0; }));
  CHECK_FALSE(redlock.unlock(*lock));
}

TEST_CASE("try_lock gives unavailable within a bound when two of three masters are blackholed", "[proxy]") {
  Cluster masters(3);
  FaultProxy first(masters[1].port());
  FaultProxy second(masters[2].port());
  Options options = masters.options();
  options.masters[1] = first.endpoint();
  options.masters[2] = second.endpoint();
  options.command_timeout = 100ms;
  // Every master the round waits for gives up after command_timeout.
  const auto bound = scaled(options.command_timeout + 200ms);

  SECTION("on connections made before the blackhole") {
    Redlock redlock(options);
    REQUIRE(redlock.try_lock("warmup", 10s));
    first.blackhole();
    second.blackhole();
    const auto t0 = steady::now();
    Result<Lock> lock = redlock.try_lock("report", 10s);
    const auto took = since(t0);
    CHECK(lock.error() == errc::unavailable);
    CHECK(took < bound);
  }
  SECTION("on connections whose handshake is swallowed") {
    first.blackhole();
    second.blackhole();
    Redlock redlock(options);
    const auto t0 = steady::now();
    Result<Lock> lock = redlock.try_lock("report", 10s);
    const auto took = since(t0);
    CHECK(lock.error() == errc::unavailable);
    CHECK(took < bound);
  }
  CHECK(masters[1].get("{report}") == std::nullopt);
  CHECK(masters[2].get("{report}") == std::nullopt);
}
