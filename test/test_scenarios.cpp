// Fault scenarios, each with the outcome the algorithm promises: a paused
// client, slow masters, lost replies, error replies, split votes, teardown
// with work in flight.

#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// Three masters, each behind its own proxy.
struct Proxied {
  Cluster masters{3};
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  Options options;

  Proxied() {
    options.masters = proxy_each(masters, proxies);
    options.retry_count = 0;
  }
};

}  // namespace

TEST_CASE("a client paused while its replies arrive gets no lock, and nothing of it is left", "[scenario]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    // The client's view of time: steady_clock plus a pause that the test
    // injects right after the attempt started (a long GC pause, a SIGSTOP of
    // this process while the masters answered).
    auto paused_for = std::make_shared<std::chrono::milliseconds>(0);
    Options options = masters.options();
    options.retry_count = 0;
    options.clock = [paused_for] { return steady::now() + *paused_for; };
    Client client(loop.get(), options);
    REQUIRE_FALSE(test::try_lock(loop, client, "warm", 1s).error);
    Answer a = await_answer(loop, [&](Client::LockCallback cb) {
      client.try_lock("paused", 100ms, std::move(cb));
      *paused_for = 150ms;
    });
    CHECK(a.error == errc::unavailable);
    CHECK(held_nowhere(masters, "{paused}"));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a client paused past its validity cannot extend, and its unlock spares the next holder",
          "[scenario]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_count = 0;
    Client sleeper(loop.get(), options);
    Client next(loop.get(), options);
    Answer first = test::try_lock(loop, sleeper, "job", 200ms);
    REQUIRE_FALSE(first.error);
    // The pause: until the first lock's keys expired on every master.
    auto keys_gone = first.lock.valid_until + 50ms;
    REQUIRE(loop.run_until([&] { return steady::now() > keys_gone; }, 2s));
    Answer second;
    REQUIRE(eventually([&] { return !(second = test::try_lock(loop, next, "job", 10s)).error; }, 2s));
    CHECK(extend(loop, sleeper, first.lock, 10s).error == errc::not_held);
    CHECK(test::unlock(loop, sleeper, first.lock) == errc::not_held);
    for (std::size_t i = 0; i < masters.size(); ++i) {
      CHECK(eventually([&] { return masters[i].get("{job}") == second.lock.value; }));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("slow masters: at half the ttl the lock is valid for what is left; past the ttl it is refused",
          "[scenario]") {
  Proxied world;
  LoopFixture loop;
  {
    world.options.command_timeout = 2s;
    auto ttl = 800ms;
    Client client(loop.get(), world.options);
    REQUIRE_FALSE(test::try_lock(loop, client, "warm", 5s).error);
    SECTION("a round trip of 0.5 x ttl") {
      for (auto& p : world.proxies) p->delay(200ms);  // each way
      Answer a = test::try_lock(loop, client, "slow", ttl);
      REQUIRE_FALSE(a.error);
      // The round trip came out of the validity: at most ttl - 400 ms remain.
      CHECK(a.lock.validity() <= ttl - 400ms);
      CHECK(a.lock.valid());
    }
    SECTION("a round trip of 1.1 x ttl") {
      for (auto& p : world.proxies) p->delay(440ms);
      Answer a = test::try_lock(loop, client, "slow", ttl);
      CHECK(a.error == errc::unavailable);
      for (auto& p : world.proxies) p->pass();
      CHECK(held_nowhere(world.masters, "slow"));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("replies lost after the write leave no orphan key", "[scenario]") {
  Proxied world;
  LoopFixture loop;
  {
    world.options.command_timeout = 100ms;
    Client client(loop.get(), world.options);
    REQUIRE_FALSE(test::try_lock(loop, client, "warm", 5s).error);
    SECTION("one master's replies lost: acquired on the others; unlock still clears it there") {
      world.proxies[0]->drop_replies();
      Answer a = test::try_lock(loop, client, "lost", 10s);
      REQUIRE_FALSE(a.error);
      REQUIRE(eventually([&] { return world.masters[0].get("{lost}") == a.lock.value; }));
      CHECK_FALSE(test::unlock(loop, client, a.lock));
      CHECK(held_nowhere(world.masters, "lost"));
    }
    SECTION("two masters' replies lost: not acquired, and released where the SET ran") {
      world.proxies[0]->drop_replies();
      world.proxies[1]->drop_replies();
      Answer a = test::try_lock(loop, client, "lost", 10s);
      CHECK(a.error == errc::unavailable);
      CHECK(held_nowhere(world.masters, "lost"));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("error replies are failed votes: the others still form the quorum", "[scenario]") {
  Proxied world;
  LoopFixture loop;
  {
    world.options.command_timeout = 500ms;
    Client client(loop.get(), world.options);
    REQUIRE_FALSE(test::try_lock(loop, client, "warm", 5s).error);
    std::string error =
        GENERATE(as<std::string>{}, "-LOADING Redis is loading the dataset in memory",
                 "-MISCONF Redis is configured to save RDB snapshots, but it's currently unable");
    INFO(error);
    world.proxies[2]->error_reply(error);
    Answer a = test::try_lock(loop, client, "r", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(world.masters[2].get("{r}") == std::nullopt);
    CHECK_FALSE(test::unlock(loop, client, a.lock));
    SECTION("with a second master erroring, too few answer: unavailable") {
      world.proxies[1]->error_reply(error);
      CHECK(test::try_lock(loop, client, "r2", 5s).error == errc::unavailable);
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("READONLY from a real replica and OOM from a full master are failed votes", "[scenario]") {
  RedisServer primary;
  ServerOptions replica_options;
  replica_options.args = {"--replicaof", "127.0.0.1", std::to_string(primary.port())};
  RedisServer replica(replica_options);
  ServerOptions full_options;
  full_options.args = {"--maxmemory", "1", "--maxmemory-policy", "noeviction"};
  RedisServer full(full_options);
  Cluster healthy(3);
  LoopFixture loop;
  {
    REQUIRE_THAT(full.command({"SET", "{probe}", "x"}), Catch::StartsWith("OOM"));
    REQUIRE_THAT(replica.command({"SET", "{probe}", "x"}), Catch::StartsWith("READONLY"));
    Options options;
    options.masters = {healthy[0].endpoint(), healthy[1].endpoint(), healthy[2].endpoint(),
                       replica.endpoint(), full.endpoint()};
    options.retry_count = 0;
    Client client(loop.get(), options);
    Answer a = test::try_lock(loop, client, "r", 5s);
    REQUIRE_FALSE(a.error);  // three healthy masters of five
    CHECK_FALSE(full.get("{r}"));
    CHECK_FALSE(replica.get("{r}"));
    healthy[0].kill9();
    // Two healthy masters are not a majority of five: the errors did not count.
    CHECK(test::try_lock(loop, client, "r2", 5s).error == errc::unavailable);
  }
  REQUIRE(loop.close());
}

TEST_CASE("split votes among simultaneous contenders resolve to one holder within the retries",
          "[scenario]") {
  Cluster masters(5);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_count = 20;
    options.retry_delay = 5ms;
    options.retry_jitter = 30ms;
    constexpr int contenders = 6;
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < contenders; ++i) clients.push_back(std::make_unique<Client>(loop.get(), options));
    for (auto& c : clients)
      REQUIRE_FALSE(test::try_lock(loop, *c, "warm" + std::to_string(&c - &clients[0]), 5s).error);
    std::vector<std::error_code> answers;
    int acquired = 0;
    for (auto& c : clients) {
      c->lock("contended", 30s, [&](std::error_code e, Lock) {
        answers.push_back(e);
        acquired += e ? 0 : 1;
      });
    }
    REQUIRE(loop.run_until([&] { return answers.size() == contenders; }, 10s));
    CHECK(acquired == 1);
    for (auto e : answers) CHECK((!e || e == errc::not_acquired));
  }
  REQUIRE(loop.close());
}

TEST_CASE("teardown with operations in flight, in every phase, is clean", "[scenario]") {
  Cluster masters(3);
  LoopFixture loop;
  auto phase = GENERATE(0, 1, 2, 3);
  std::vector<std::error_code> answers;
  {
    Options options = masters.options();
    options.retry_delay = 500ms;
    auto client = std::make_unique<Client>(loop.get(), options);
    if (phase == 1) masters[1].pause();  // a master that never answers
    if (phase == 2)
      masters[0].set("{busy}", "other", 10s), masters[1].set("{busy}", "other", 10s);  // retry timer
    for (int i = 0; i < 4; ++i) {
      client->lock(phase == 2 ? "busy" : "r" + std::to_string(i), 5s,
                   [&](std::error_code e, Lock) { answers.push_back(e); });
    }
    if (phase >= 1) loop.run_until([] { return false; }, 30ms);  // phase 0: still connecting
    if (phase == 3) {
      client->close(nullptr);  // close, then destroy at once
    }
    client.reset();
    if (phase == 1) masters[1].resume();
  }
  REQUIRE(loop.run_until([&] { return answers.size() == 4; }, 5s));
  for (auto e : answers) CHECK((!e || e == errc::closed));
  REQUIRE(loop.close());
}
