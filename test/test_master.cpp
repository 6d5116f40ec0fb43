#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "master.hpp"
#include "scripts.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// Collects what a Master answers.
struct Collector final : ReplyHandler {
  std::vector<Reply> replies;
  std::vector<Failure> failures;
  void on_reply(const Master&, const Reply& r) override { replies.push_back(r); }
  void on_failure(const Master&, Failure f) override { failures.push_back(f); }
  std::size_t answers() const { return replies.size() + failures.size(); }
};

std::shared_ptr<const Command> command(std::vector<std::string> argv, const Script* script = nullptr) {
  return script ? Command::script(*script, argv) : Command::plain(argv);
}

MasterConfig config_for(const RedisServer& server) {
  MasterConfig config;
  config.endpoint = server.endpoint();
  config.command_timeout = 1s;
  config.connect_timeout = 1s;
  return config;
}

long long stat(RedisServer& server, const std::string& name) {
  std::string info = server.command({"INFO", "stats"});
  auto at = info.find(name + ":");
  REQUIRE(at != std::string::npos);
  return std::stoll(info.substr(at + name.size() + 1));
}

}  // namespace

TEST_CASE("the scripts' SHA-1s are what Redis computes", "[master]") {
  RedisServer server;
  for (const Script* s : scripts::all) {
    INFO(s->name);
    CHECK(server.command({"SCRIPT", "LOAD", std::string(s->body)}) == s->sha1);
  }
}

TEST_CASE("the fencing scripts take the counter key after the lock's and answer {result, counter}",
          "[master]") {
  auto command =
      Command::script(scripts::acquire_fenced, {"k", "k:fencing", "k:writer-waiting", "v", "1000", "0"});
  CHECK(command->encoded().find("$1\r\n3\r\n$1\r\nk\r\n$9\r\nk:fencing\r\n") != std::string_view::npos);
  auto integer = [](long long i) {
    Reply r;
    r.type = Reply::Type::integer;
    r.integer = i;
    return r;
  };
  auto pair = [&](Reply a, Reply b) {
    Reply r;
    r.type = Reply::Type::array;
    r.elements = {std::move(a), std::move(b)};
    return r;
  };
  CHECK(command->expects(pair(integer(1), integer(1795000000000000))));
  CHECK(command->expects(pair(integer(-20), integer(0))));
  CHECK_FALSE(command->expects(integer(1)));                            // the plain acquire's shape
  CHECK_FALSE(command->expects(pair(integer(2), integer(5))));          // result out of range
  CHECK_FALSE(command->expects(pair(integer(1), integer(-1))));         // a negative counter
  CHECK_FALSE(command->expects(pair(integer(1), integer(1LL << 53))));  // beyond Lua's exact integers
  Reply text;
  text.type = Reply::Type::string;
  text.str = "7";
  CHECK_FALSE(command->expects(pair(integer(1), text)));

  RedisServer server;
  CHECK(server
            .command({"EVAL", std::string(scripts::acquire_fenced.body), "3", "k", "k:fencing",
                      "k:writer-waiting", "v", "1000", "0"})
            .find("1 ") == 0);
  CHECK(server.command(
            {"EVAL", std::string(scripts::fence.body), "2", "k", "k:fencing", "v", "42", "86400000"}) == "1");
  CHECK(server.get("k:fencing") == "42");
  CHECK(server.command(
            {"EVAL", std::string(scripts::fence.body), "2", "k", "k:fencing", "v", "41", "86400000"}) == "1");
  CHECK(server.get("k:fencing") == "42");                 // never lowered
  CHECK(server.pttl("k:fencing") > 86'400'000 - 60'000);  // it forgets, a day later
  CHECK(server.command({"EVAL", std::string(scripts::fence.body), "2", "k", "k:fencing", "other", "99",
                        "86400000"}) == "0");
  CHECK(server.get("k:fencing") == "42");  // not ours: untouched
}

TEST_CASE("commands issued in one loop turn leave in one write", "[master]") {
  RedisServer server;
  LoopFixture loop;
  {
    Master master(loop.get(), config_for(server), 1);
    auto collector = std::make_shared<Collector>();
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 1; }, 5s));
    REQUIRE(master.state() == Master::State::ready);

    long long before = stat(server, "total_reads_processed");
    for (int i = 0; i < 20; ++i) master.send(command({"SET", "k" + std::to_string(i), "v"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 21; }, 5s));
    long long after = stat(server, "total_reads_processed");
    // One read for our twenty commands, one for the INFO that measures it.
    CHECK(after - before <= 3);
    CHECK(collector->failures.empty());
    for (const Reply& r : collector->replies) CHECK((r.is_status("OK") || r.is_status("PONG")));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a script runs again with EVAL after SCRIPT FLUSH when nothing was sent after it", "[master]") {
  RedisServer server;
  LoopFixture loop;
  {
    Master master(loop.get(), config_for(server), 1);
    auto collector = std::make_shared<Collector>();
    master.send(command({"SET", "k", "v"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 1; }, 5s));
    server.command({"SCRIPT", "FLUSH"});
    CHECK(server.command({"SCRIPT", "EXISTS", std::string(scripts::unlock.sha1)}) == "0");

    master.send(command({"k", "k:listening", "v"}, &scripts::unlock), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 2; }, 5s));
    REQUIRE(collector->failures.empty());
    CHECK(collector->replies[1].integer == 1);  // deleted despite the flush
    CHECK_FALSE(server.get("k"));
    CHECK(server.command({"SCRIPT", "EXISTS", std::string(scripts::unlock.sha1)}) == "1");
  }
  REQUIRE(loop.close());
}

TEST_CASE("a NOSCRIPT re-run never overtakes the commands sent after it", "[master]") {
  RedisServer server;
  LoopFixture loop;
  {
    Master master(loop.get(), config_for(server), 1);
    auto collector = std::make_shared<Collector>();
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 1; }, 5s));
    server.command({"SCRIPT", "FLUSH"});

    // A failed attempt's release, then the retry's SET with the same value,
    // in one write: the release must not run after the SET.
    master.send(command({"k", "k:listening", "v"}, &scripts::unlock), collector);
    master.send(Command::set_nx({"SET", "k", "v", "NX", "PX", "10000"}), collector);
    master.send(command({"k", "v"}, &scripts::extend), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 4; }, 5s));
    REQUIRE(collector->failures.size() == 2);  // both scripts: NOSCRIPT, not re-run
    CHECK(collector->failures[0] == Failure::unusable);
    CHECK(collector->failures[1] == Failure::unusable);
    REQUIRE(collector->replies.size() == 2);
    CHECK(collector->replies[1].is_status("OK"));
    CHECK(server.get("k") == "v");  // the SET stands
    // SCRIPT LOAD restored the cache for what follows.
    master.send(command({"k", "v", "10000"}, &scripts::extend), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 5; }, 5s));
    CHECK(collector->replies.back().integer == 1);
    CHECK(master.connections() == 1);  // and the connection stayed
  }
  REQUIRE(loop.close());
}

TEST_CASE("AUTH with a password, and with an ACL user", "[master]") {
  RedisServer server({{"--requirepass", "s3cret"}, false, false, "s3cret", std::nullopt, {}});
  server.command({"ACL", "SETUSER", "locker", "on", ">lockpw", "~*", "+@all"});
  LoopFixture loop;
  {
    Options options;
    options.masters = {server.endpoint()};
    SECTION("password") {
      options.masters[0].password = "s3cret";
    }
    SECTION("ACL user") {
      options.masters[0].username = "locker";
      options.masters[0].password = "lockpw";
    }
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "guarded", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(server.get("{guarded}") == a.lock.value);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a user with an empty password authenticates as that user", "[master]") {
  RedisServer server;
  server.command({"ACL", "SETUSER", "tokenless", "on", "nopass", "~*", "+@all"});
  LoopFixture loop;
  {
    Options options;
    options.masters = {Endpoint::parse("redis://tokenless:@127.0.0.1:" + std::to_string(server.port()))};
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "as-user", 5s);
    REQUIRE_FALSE(a.error);
    // Without AUTH it would have run as the default user.
    CHECK(server.command({"CLIENT", "LIST"}).find("user=tokenless") != std::string::npos);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a wrong password means no vote, not a crash", "[master]") {
  RedisServer server({{"--requirepass", "s3cret"}, false, false, "s3cret", std::nullopt, {}});
  LoopFixture loop;
  {
    Options options;
    options.masters = {server.endpoint()};
    options.masters[0].password = "wrong";
    options.retry_count = 0;
    std::vector<std::string> said;
    options.diagnostics = [&](std::string_view line) { said.emplace_back(line); };
    Client client(loop.get(), options);
    CHECK(try_lock(loop, client, "guarded", 5s).error == errc::unavailable);
    CHECK_FALSE(server.get("{guarded}"));
    // It keeps reconnecting (with backoff), and says why once, not each time.
    long long connections = stat(server, "total_connections_received");
    REQUIRE(
        loop.run_until([&] { return stat(server, "total_connections_received") >= connections + 3; }, 5s));
    REQUIRE(said.size() == 1);
    CHECK(said[0].find("WRONGPASS") != std::string::npos);
  }
  REQUIRE(loop.close());
}

TEST_CASE("SELECT puts the lock in the configured database", "[master]") {
  RedisServer server;
  LoopFixture loop;
  {
    Options options;
    options.masters = {server.endpoint()};
    options.masters[0].database = 3;
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "in-db3", 5s);
    REQUIRE_FALSE(a.error);
    CHECK_FALSE(server.get("{in-db3}"));
    server.command({"SELECT", "3"});
    CHECK(server.get("{in-db3}") == a.lock.value);
    server.command({"SELECT", "0"});
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master on a Unix socket", "[master]") {
  ServerOptions unix_only;
  unix_only.unix_socket = true;
  RedisServer server(unix_only);
  LoopFixture loop;
  {
    Options options;
    Endpoint e;
    e.unix_socket = server.unix_socket();
    options.masters = {e};
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "via-socket", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(server.get("{via-socket}") == a.lock.value);
    CHECK_FALSE(unlock(loop, client, a.lock));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a host name is resolved without blocking", "[master]") {
  RedisServer server;
  LoopFixture loop;
  {
    Options options;
    options.masters = {server.endpoint()};
    options.masters[0].host = "localhost";
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "by-name", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(server.get("{by-name}") == a.lock.value);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a missed deadline fails the command and drops the connection", "[master]") {
  RedisServer server;
  LoopFixture loop;
  {
    MasterConfig config = config_for(server);
    config.command_timeout = 100ms;
    Master master(loop.get(), config, 1);
    auto collector = std::make_shared<Collector>();
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 1; }, 5s));
    auto connections = master.connections();
    server.pause();
    auto started = std::chrono::steady_clock::now();
    master.send(command({"PING"}), collector);
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 3; }, 5s));
    auto took = std::chrono::steady_clock::now() - started;
    server.resume();
    REQUIRE(collector->failures.size() == 2);
    CHECK(collector->failures[0] == Failure::timeout);
    CHECK(collector->failures[1] == Failure::disconnected);
    CHECK(took >= 90ms);
    CHECK(took < 100ms + scaled(200ms));
    // And it comes back by itself.
    REQUIRE(loop.run_until([&] { return master.connections() > connections; }, 10s));
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 4; }, 5s));
    CHECK(collector->replies.back().is_status("PONG"));
  }
  REQUIRE(loop.close());
}

TEST_CASE("two endpoints that reach one server vote once", "[master]") {
  ServerOptions both;
  both.unix_socket = true;
  RedisServer server(both);
  RedisServer other;
  LoopFixture loop;
  {
    Endpoint tcp = server.endpoint();
    Endpoint socket;
    socket.unix_socket = server.unix_socket();
    Options options;
    options.masters = {tcp, socket, other.endpoint()};
    options.retry_count = 0;
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "dup", 5s);
    REQUIRE_FALSE(a.error);  // the server once, the other master once
    // Gone from the other master, our value remains on one server only. Its
    // two endpoints both answer yes to extend, but that is one vote of three.
    other.command({"DEL", "{dup}"});
    Answer e = extend(loop, client, a.lock, 5s);
    CHECK(e.error == errc::not_held);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master that accepts but never answers costs connect_timeout, never a hang", "[master]") {
  RedisServer server;
  server.pause();  // the kernel still completes the TCP handshake
  LoopFixture loop;
  {
    MasterConfig config = config_for(server);
    config.connect_timeout = 150ms;
    config.command_timeout = 10s;
    Master master(loop.get(), config, 1);
    auto collector = std::make_shared<Collector>();
    auto started = std::chrono::steady_clock::now();
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 1; }, 5s));
    auto took = std::chrono::steady_clock::now() - started;
    REQUIRE(collector->failures.size() == 1);
    CHECK(collector->failures[0] == Failure::timeout);
    CHECK(took >= 140ms);
    CHECK(took < 150ms + scaled(200ms));
    CHECK(master.state() != Master::State::ready);
  }
  server.resume();
  REQUIRE(loop.close());
}

TEST_CASE("a command sent after one expired in the handshake still gets its own deadline", "[master]") {
  RedisServer server;
  server.pause();  // TCP connects (the kernel accepts), nothing answers
  LoopFixture loop;
  {
    MasterConfig config = config_for(server);
    config.connect_timeout = 2s;
    config.command_timeout = 100ms;
    Master master(loop.get(), config, 1);
    auto collector = std::make_shared<Collector>();
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 1; }, 5s));
    REQUIRE(master.state() == Master::State::handshaking);  // the expiry kept the connection
    auto sent = std::chrono::steady_clock::now();
    master.send(command({"PING"}), collector);
    REQUIRE(loop.run_until([&] { return collector->answers() == 2; }, 5s));
    auto took = std::chrono::steady_clock::now() - sent;
    CHECK(collector->failures.at(1) == Failure::timeout);
    CHECK(took < 100ms + scaled(300ms));  // not the 2 s connect_timeout
  }
  server.resume();
  REQUIRE(loop.close());
}
