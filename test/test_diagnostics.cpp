#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/fake_master.hpp"
#include "support/loop.hpp"
#include "support/timeouts.hpp"

// Options::diagnostics names the master and the cause the moment something
// goes wrong, once per change, and Client::master_errors() says which masters
// failed and why after an errc::unavailable. (A name that does not resolve is
// in test_dns.cpp, whose resolver answers without leaving the machine.)

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Argv = FakeMaster::Argv;

namespace {

// What Options::diagnostics said, in order. Thread-safe: the blocking facade
// calls it on its loop thread.
struct Said {
  mutable std::mutex mutex;
  std::vector<std::string> lines;

  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(line);
    };
  }
  std::size_t count() const {
    std::lock_guard<std::mutex> lock(mutex);
    return lines.size();
  }
  std::size_t mentioning(std::string_view text) const {
    std::lock_guard<std::mutex> lock(mutex);
    return static_cast<std::size_t>(std::count_if(
        lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; }));
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mutex);
    std::string out = std::to_string(lines.size()) + " diagnostic(s):";
    for (const auto& l : lines) out += "\n  " + l;
    return out;
  }
};

std::string name_of(const RedisServer& server) {
  return "127.0.0.1:" + std::to_string(server.port());
}

// Lets the Client reconnect on its own for a while: the backoff starts at
// 20 ms, so this spans several attempts.
void run_for(LoopFixture& loop, std::chrono::milliseconds how_long) {
  static_cast<void>(loop.run_until([] { return false; }, how_long));
}

}  // namespace

TEST_CASE("a master nobody listens on is named once as connection refused, and again when it is back",
          "[diagnostics]") {
  RedisServer server;
  std::string name = name_of(server);
  server.kill9();
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {server.endpoint()};
    options.retry_count = 0;
    // Generous: a busy machine must not add a timeout to what is said.
    options.connect_timeout = scaled(2s);
    options.command_timeout = scaled(1s);
    options.diagnostics = said.sink();
    Client client(loop.get(), options);
    CHECK(try_lock(loop, client, "r", 5s).error == errc::unavailable);
    run_for(loop, 600ms);
    INFO(said.all());
    REQUIRE(said.count() == 1);
    CHECK(said.mentioning(name) == 1);
    CHECK(said.mentioning("cannot connect: connection refused") == 1);
    auto errors = client.master_errors();
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].endpoint == server.endpoint().to_string());
    CHECK(errors[0].cause == "cannot connect: connection refused");

    server.restart(false);
    CHECK(loop.run_until([&] { return said.count() >= 2; }, 5s));
    CHECK(said.mentioning("connected and answering again") == 1);
    CHECK_FALSE(try_lock(loop, client, "r", 1s).error);
    CHECK(client.master_errors().empty());
    CHECK(said.count() == 2);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master that accepts and never answers is named once as a connect timeout", "[diagnostics]") {
  FakeMaster fake([](const Argv&) -> std::optional<std::string> { return std::nullopt; });
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {fake.endpoint()};
    options.connect_timeout = scaled(100ms);
    options.diagnostics = said.sink();
    Client client(loop.get(), options);
    CHECK(loop.run_until([&] { return fake.connections_accepted() >= 4; }, 10s));
    {
      INFO(said.all());
      REQUIRE(said.count() == 1);
      CHECK(said.mentioning("127.0.0.1:" + std::to_string(fake.port())) == 1);
      CHECK(said.mentioning(
                "connected, but no answer to AUTH/SELECT/SCRIPT LOAD/INFO within connect_timeout (" +
                std::to_string(options.connect_timeout.count()) + " ms)") == 1);
    }
    // It starts answering: said once more. (The switch may fall in the middle
    // of a handshake, whose first commands then go unanswered and the rest are
    // answered out of step: a protocol error, said too, and a reconnect. A
    // real Redis never does that; the handshake is a dozen commands.)
    fake.set_script({});
    CHECK(loop.run_until([&] { return said.mentioning("connected and answering again") == 1; }, 5s));
    INFO(said.all());
    CHECK(said.count() - said.mentioning("protocol error") == 2);
    CHECK(client.master_errors().empty());
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master that stops answering commands is named once, however often it is retried",
          "[diagnostics]") {
  // The handshake is answered, no command after it is: each attempt drops the
  // connection at command_timeout and reconnects.
  FakeMaster fake;
  fake.set_script([&fake](const Argv& argv) { return fake.handshake(argv); });
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {fake.endpoint()};
    options.retry_count = 0;
    options.command_timeout = 30ms;
    options.connect_timeout = scaled(2s);  // only the commands go unanswered
    options.diagnostics = said.sink();
    Client client(loop.get(), options);
    for (int i = 0; i < 4; ++i) {
      CHECK(try_lock(loop, client, "r" + std::to_string(i), 1s).error == errc::unavailable);
      REQUIRE(
          loop.run_until([&] { return fake.connections_accepted() >= static_cast<std::size_t>(i + 2); }, 5s));
    }
    INFO(said.all());
    CHECK(said.count() == 1);
    CHECK(said.mentioning("stopped answering: no reply within command_timeout (30 ms)") == 1);
    auto errors = client.master_errors();
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].cause.find("stopped answering") == 0);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a refused handshake names WRONGPASS, NOAUTH and NOPERM, once each, without the password",
          "[diagnostics]") {
  const std::string password = "pa55-word-xyz";
  RedisServer server({{}, false, false, password, std::nullopt, {}});
  std::string code;
  Endpoint endpoint = server.endpoint();
  SECTION("a wrong password") {
    endpoint.password = "not-" + password;
    code = "WRONGPASS";
  }
  SECTION("no password") {
    endpoint.password.clear();
    code = "NOAUTH";
  }
  SECTION("an ACL user without the permissions it needs") {
    server.command({"ACL", "SETUSER", "reader", "on", ">reader-" + password, "~*", "+get", "+auth"});
    endpoint.username = "reader";
    endpoint.password = "reader-" + password;
    code = "NOPERM";
  }
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {endpoint};
    // Generous: a connect that a busy machine delays is not what this tests.
    options.connect_timeout = 2s;
    options.diagnostics = said.sink();
    Client client(loop.get(), options);
    auto connections = [&] {
      const std::string field = "total_connections_received:";
      std::string info = server.command({"INFO", "stats"});
      return std::stoll(info.substr(info.find(field) + field.size()));
    };
    long long before = connections();
    CHECK(loop.run_until([&] { return connections() >= before + 3; }, 10s));
    INFO(said.all());
    REQUIRE(said.count() == 1);
    CHECK(said.mentioning(code) == 1);
    CHECK(said.mentioning(name_of(server)) == 1);
    CHECK(said.mentioning("it does not vote") == 1);
    CHECK(said.mentioning(password) == 0);
    auto errors = client.master_errors();
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].cause.find(code) != std::string::npos);
    CHECK(errors[0].endpoint.find(password) == std::string::npos);
  }
  REQUIRE(loop.close());
}

TEST_CASE("after unavailable, master_errors names each master that failed and why", "[diagnostics]") {
  Cluster masters{3};
  masters[1].kill9();
  masters[2].kill9();
  Options options = masters.options();
  options.retry_count = 0;
  // The live master must not miss a deadline on a busy machine: only the two
  // down ones may fail.
  options.command_timeout = scaled(2s);
  const std::vector<std::string> down = {masters[1].endpoint().to_string(),
                                         masters[2].endpoint().to_string()};

  SECTION("the async Client") {
    LoopFixture loop;
    {
      Client client(loop.get(), options);
      CHECK(try_lock(loop, client, "r", 1s).error == errc::unavailable);
      // Both refusals were seen before the votes failed.
      auto errors = client.master_errors();
      REQUIRE(errors.size() == 2);
      CHECK(errors[0].endpoint == down[0]);
      CHECK(errors[1].endpoint == down[1]);
      CHECK(errors[0].cause == "cannot connect: connection refused");
      CHECK(errors[1].cause == "cannot connect: connection refused");
    }
    REQUIRE(loop.close());
  }
  SECTION("the blocking Redlock, from another thread") {
    Redlock redlock(options);
    CHECK(redlock.try_lock("r", 1s).error() == errc::unavailable);
    auto errors = redlock.master_errors();
    REQUIRE(errors.size() == 2);
    CHECK(errors[0].endpoint == down[0]);
    CHECK(errors[1].cause == "cannot connect: connection refused");
  }
}

TEST_CASE("a bad argument says which one was wrong", "[diagnostics]") {
  Cluster masters{1};
  Options options = masters.options();
  Said said;
  options.diagnostics = said.sink();
  LoopFixture loop;
  {
    Client client(loop.get(), options);
    std::string expected;
    Answer answer;
    SECTION("an empty resource") {
      answer = try_lock(loop, client, "", 1s);
      expected = "invalid argument to lock: the resource is empty";
    }
    SECTION("a ttl of 0") {
      answer = try_lock(loop, client, "r", 0ms);
      expected = "invalid argument to lock: ttl 0 ms is not in 1..2147483647 ms";
    }
    SECTION("a ttl the drift allowance eats") {
      answer = try_lock(loop, client, "r", 2ms);
      expected = "invalid argument to lock: ttl 2 ms is eaten whole by the drift allowance";
    }
    SECTION("a Lock that did not come from a lock call") {
      answer = extend(loop, client, Lock{"r", ""}, 1s);
      expected = "invalid argument to extend: the Lock has no value";
    }
    CHECK(answer.error == errc::invalid_argument);
    INFO(said.all());
    CHECK(said.count() == 1);
    CHECK(said.mentioning(expected) == 1);
  }
  REQUIRE(loop.close());
}

// Hardening 2, item 6.
TEST_CASE("an ACL user without channel rights: unlock still answers ok, and connect says PUBLISH refused",
          "[diagnostics][acl]") {
  RedisServer server;
  // Redis 7 gives a new user no channels (acl-pubsub-default resetchannels).
  server.command({"ACL", "SETUSER", "locker", "on", ">lockpw", "~*", "+@all", "resetchannels"});
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {server.endpoint()};
    options.masters[0].username = "locker";
    options.masters[0].password = "lockpw";
    options.retry_delay = 50ms;
    options.retry_jitter = 0ms;
    options.diagnostics = said.sink();
    Client holder(loop.get(), options);
    Client waiter(loop.get(), options);
    Answer a = try_lock(loop, holder, "restricted", 10s);
    REQUIRE_FALSE(a.error);
    // A waiter cannot be woken by a message: it falls back to retry_delay.
    auto waited = std::make_shared<Answer>();
    waiter.lock("restricted", 10s, 5s, [waited](std::error_code e, Lock l) {
      ++waited->calls;
      waited->error = e;
      waited->lock = std::move(l);
    });
    loop.run_until([] { return false; }, 100ms);
    CHECK_FALSE(unlock(loop, holder, a.lock));  // not unavailable: the DEL ran, the PUBLISH alone failed
    REQUIRE(loop.run_until([&] { return waited->calls > 0; }, 5s));
    CHECK_FALSE(waited->error);
    CHECK(server.get("{restricted}") == waited->lock.value);
    CHECK_FALSE(unlock(loop, waiter, waited->lock));
    CHECK_FALSE(server.get("{restricted}"));
    INFO(said.all());
    CHECK(said.mentioning("PUBLISH refused") >= 1);
    CHECK(said.mentioning("&<key_prefix>*") >= 1);
  }
  REQUIRE(loop.close());
}

// Reasoned in hardening 2: the scripts call TIME before writing, which Redis
// refuses before 5.0. Debian ships no such Redis: a FakeMaster says the version.
TEST_CASE("a master older than Redis 5.0 is refused at connect, and says why", "[diagnostics]") {
  FakeMaster fake;
  fake.set_info_field("redis_version", "4.0.14");
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {fake.endpoint()};
    options.connect_timeout = 2s;
    options.diagnostics = said.sink();
    Client client(loop.get(), options);
    CHECK(try_lock(loop, client, "old", 5s).error == errc::unavailable);
    INFO(said.all());
    CHECK(said.mentioning("redis_version is 4.0.14, older than 5.0") >= 1);
  }
  REQUIRE(loop.close());
}
