#include "support/cluster.hpp"
#include "support/loop.hpp"
#include "support/redis_server.hpp"

#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

using namespace std::chrono_literals;
using redlock::test::Cluster;
using redlock::test::LoopFixture;
using redlock::test::RedisServer;
using redlock::test::ServerOptions;

namespace {

bool process_exists(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

// PING over a fresh connection, without AUTH; the reply as text.
std::string raw_ping(redisContext* c) {
  REQUIRE(c != nullptr);
  REQUIRE(c->err == 0);
  auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
  REQUIRE(reply != nullptr);
  std::string text(reply->str, reply->len);
  freeReplyObject(reply);
  redisFree(c);
  return text;
}

}  // namespace

TEST_CASE("a server answers set, get, pttl and raw commands", "[support]") {
  RedisServer server;
  REQUIRE(server.running());
  REQUIRE(server.pid() > 0);
  REQUIRE(server.port() > 0);
  CHECK(server.unix_socket().empty());
  CHECK(std::filesystem::is_directory(server.dir()));

  const redlock::Endpoint endpoint = server.endpoint();
  CHECK(endpoint.host == "127.0.0.1");
  CHECK(endpoint.port == server.port());

  server.set("plain", "v1");
  CHECK(server.get("plain") == "v1");
  CHECK(server.pttl("plain") == -1);
  CHECK(server.get("missing") == std::nullopt);
  CHECK(server.pttl("missing") == -2);

  server.set("expiring", "v2", 5000ms);
  const long long ttl = server.pttl("expiring");
  CHECK(ttl > 4000);
  CHECK(ttl <= 5000);

  CHECK(server.command({"PING"}) == "PONG");
  CHECK(server.command({"INCR", "counter"}) == "1");
  CHECK(server.command({"GET", "missing"}) == "(nil)");
  CHECK(server.command({"RPUSH", "list", "a", "b c"}) == "2");
  CHECK(server.command({"LRANGE", "list", "0", "-1"}) == "a b c");
  CHECK(server.command({"NO-SUCH-COMMAND"}).rfind("ERR", 0) == 0);
  CHECK(server.command({"CONFIG", "GET", "save"}) == "save ");
  CHECK(server.command({"CONFIG", "GET", "bind"}) == "bind 127.0.0.1");
}

TEST_CASE("the destructor kills the server and removes its directory", "[support]") {
  pid_t pid = -1;
  std::string dir;
  {
    RedisServer server;
    pid = server.pid();
    dir = server.dir();
    server.pause();  // must be killed even while stopped
  }
  CHECK_FALSE(process_exists(pid));
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("a paused server fails inspection within its timeout and answers after resume", "[support]") {
  RedisServer server;
  server.set("k", "v");
  server.pause();
  CHECK(server.running());
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(server.get("k"), std::runtime_error);
  CHECK(std::chrono::steady_clock::now() - start < redlock::test::scaled(3s));
  server.resume();
  CHECK(server.get("k") == "v");
}

TEST_CASE("kill9 stops the server and restart(false) brings it back empty on the same port", "[support]") {
  RedisServer server;
  const int port = server.port();
  const pid_t old_pid = server.pid();
  server.set("k", "v");

  server.kill9();
  CHECK_FALSE(server.running());
  CHECK(server.pid() == -1);
  CHECK_FALSE(process_exists(old_pid));
  CHECK_THROWS_AS(server.get("k"), std::runtime_error);
  server.kill9();  // idempotent

  server.restart(false);
  CHECK(server.running());
  CHECK(server.port() == port);
  CHECK(server.pid() != old_pid);
  CHECK(server.get("k") == std::nullopt);

  SECTION("restart also works on a running, paused server") {
    server.set("k", "v");
    server.pause();
    server.restart(false);
    CHECK(server.get("k") == std::nullopt);
    CHECK(server.port() == port);
  }
}

TEST_CASE("restart(true) with aof keeps the data", "[support]") {
  ServerOptions options;
  options.aof = true;
  RedisServer server(options);
  CHECK(server.command({"CONFIG", "GET", "appendonly"}) == "appendonly yes");
  server.set("kept", "value");
  server.set("kept-ttl", "value", 60000ms);

  server.kill9();
  server.restart(true);
  CHECK(server.get("kept") == "value");
  CHECK(server.pttl("kept-ttl") > 0);

  server.restart(false);
  CHECK(server.get("kept") == std::nullopt);
}

TEST_CASE("a server with unix_socket answers on its socket, also after restart", "[support]") {
  ServerOptions options;
  options.unix_socket = true;
  RedisServer server(options);
  REQUIRE_FALSE(server.unix_socket().empty());
  CHECK(std::filesystem::path(server.unix_socket()).parent_path() == server.dir());

  struct stat info {};
  REQUIRE(::stat(server.unix_socket().c_str(), &info) == 0);
  CHECK(S_ISSOCK(info.st_mode));
  CHECK((info.st_mode & 0777) == 0700);

  const timeval one_second{1, 0};
  CHECK(raw_ping(redisConnectUnixWithTimeout(server.unix_socket().c_str(), one_second)) == "PONG");
  server.restart(false);
  CHECK(raw_ping(redisConnectUnixWithTimeout(server.unix_socket().c_str(), one_second)) == "PONG");
}

TEST_CASE("a server with a password requires it and the inspection connection sends it", "[support]") {
  ServerOptions options;
  options.password = "s3cret";
  RedisServer server(options);
  CHECK(server.endpoint().password == "s3cret");
  server.set("k", "v");
  CHECK(server.get("k") == "v");
  const timeval one_second{1, 0};
  CHECK(raw_ping(redisConnectWithTimeout("127.0.0.1", server.port(), one_second)).rfind("NOAUTH", 0) == 0);
}

TEST_CASE("extra arguments reach the server", "[support]") {
  ServerOptions options;
  options.args = {"--maxmemory-policy", "noeviction", "--databases", "4"};
  RedisServer server(options);
  CHECK(server.command({"CONFIG", "GET", "maxmemory-policy"}) == "maxmemory-policy noeviction");
  CHECK(server.command({"SELECT", "4"}).rfind("ERR", 0) == 0);
}

TEST_CASE("a server that cannot start throws with its log", "[support]") {
  ServerOptions options;
  options.args = {"--no-such-option", "x"};
  CHECK_THROWS_WITH(RedisServer(options), Catch::Contains("no-such-option"));
}

TEST_CASE("restart throws when its port was taken meanwhile", "[support]") {
  RedisServer server;
  server.kill9();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  const int yes = 1;  // the old server's connections may linger in TIME_WAIT
  REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(server.port()));
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 1) == 0);
  CHECK_THROWS_WITH(server.restart(false), Catch::Contains("was taken"));
  CHECK_FALSE(server.running());
  ::close(fd);
  server.restart(false);
  CHECK(server.command({"PING"}) == "PONG");
}

TEST_CASE("a cluster starts distinct servers and describes them in its options", "[support]") {
  Cluster cluster(3);
  REQUIRE(cluster.size() == 3);
  const redlock::Options options = cluster.options();
  REQUIRE(options.masters.size() == 3);

  std::set<int> ports;
  std::set<pid_t> pids;
  std::set<std::string> dirs;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    CHECK(options.masters[i].host == "127.0.0.1");
    CHECK(options.masters[i].port == cluster[i].port());
    ports.insert(cluster[i].port());
    pids.insert(cluster[i].pid());
    dirs.insert(cluster[i].dir());
    cluster[i].set("who", std::to_string(i));
  }
  CHECK(ports.size() == 3);
  CHECK(pids.size() == 3);
  CHECK(dirs.size() == 3);
  for (std::size_t i = 0; i < cluster.size(); ++i) CHECK(cluster[i].get("who") == std::to_string(i));
  CHECK_THROWS_AS(cluster[3], std::out_of_range);
}

TEST_CASE("scaled multiplies by REDLOCK_TEST_TIMEOUT_MULTIPLIER", "[support]") {
  const char* old = std::getenv("REDLOCK_TEST_TIMEOUT_MULTIPLIER");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("REDLOCK_TEST_TIMEOUT_MULTIPLIER", "2.5", 1);
  CHECK(redlock::test::test_timeout_multiplier() == 2.5);
  CHECK(redlock::test::scaled(100ms) == 250ms);
  ::setenv("REDLOCK_TEST_TIMEOUT_MULTIPLIER", "nonsense", 1);
  CHECK(redlock::test::scaled(100ms) == 100ms);
  ::unsetenv("REDLOCK_TEST_TIMEOUT_MULTIPLIER");
  CHECK(redlock::test::scaled(100ms) == 100ms);
  if (old != nullptr) ::setenv("REDLOCK_TEST_TIMEOUT_MULTIPLIER", saved.c_str(), 1);
}

TEST_CASE("run_until stops when the predicate holds or the deadline passes", "[support]") {
  LoopFixture loop;
  uv_timer_t timer;
  bool fired = false;
  timer.data = &fired;
  uv_timer_init(loop.get(), &timer);
  uv_timer_start(
      &timer, [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; }, 20, 0);
  CHECK(loop.run_until([&] { return fired; }, 2s));

  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(loop.run_until([] { return false; }, 30ms));
  CHECK(std::chrono::steady_clock::now() - start >= 30ms);

  uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
  REQUIRE(loop.close());
  CHECK(loop.close());
}

TEST_CASE("close waits for pending timers and fails on a handle left open", "[support]") {
  uv_timer_t left_open;  // declared first: it must outlive the fixture, which closes it
  LoopFixture loop;

  SECTION("a one-shot timer still pending is run, then the loop closes") {
    uv_timer_t timer;
    bool fired = false;
    timer.data = &fired;
    uv_timer_init(loop.get(), &timer);
    uv_timer_start(
        &timer,
        [](uv_timer_t* t) {
          *static_cast<bool*>(t->data) = true;
          uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
        },
        50, 0);
    CHECK(loop.close());
    CHECK(fired);
  }
  SECTION("an active repeating timer keeps it open") {
    uv_timer_init(loop.get(), &left_open);
    uv_timer_start(
        &left_open, [](uv_timer_t*) {}, 10, 10);
    CHECK_FALSE(loop.close(50ms));
  }
}
