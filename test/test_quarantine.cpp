#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// N = 3 and a holder on exactly two masters (0 and 1: its key is deleted
// from master 2 once the lock settled). Then master 0 restarts without its
// data: only master 1 still knows of the holder.
struct HolderOnTwo {
  Cluster masters{3};
  LoopFixture loop;
  steady::time_point started = steady::now();
  std::string value;
  steady::time_point valid_until;

  // Freshly started masters are in quarantine themselves: let them age first.
  void age_past(std::chrono::milliseconds quarantine) {
    auto old_enough = started + quarantine + 1100ms;
    REQUIRE(loop.run_until([&] { return steady::now() >= old_enough; }, quarantine + 5s));
  }

  void lock_and_restart_first(const Options& options, std::chrono::milliseconds ttl) {
    Client holder(loop.get(), options);
    Answer a = try_lock(loop, holder, "leader", ttl);
    REQUIRE_FALSE(a.error);
    value = a.lock.value;
    valid_until = a.lock.valid_until;
    // The round decided at two: wait for the third SET as well.
    REQUIRE(held_everywhere(masters, "{leader}", value));
    masters[2].command({"DEL", "{leader}"});
    masters[0].restart(false);
    REQUIRE_FALSE(masters[0].get("{leader}"));
  }
};

}  // namespace

TEST_CASE("with restart quarantine, a master restarted empty does not vote until it has been up long enough",
          "[quarantine]") {
  HolderOnTwo world;
  Options options = world.masters.options();
  options.restart_quarantine = 2000ms;
  options.retry_count = 0;
  std::vector<std::string> diagnostics;
  options.diagnostics = [&](std::string_view line) { diagnostics.emplace_back(line); };
  auto ttl = 1500ms;
  world.age_past(options.restart_quarantine);
  world.lock_and_restart_first(options, ttl);
  auto restarted = steady::now();
  {
    Client contender(world.loop.get(), options);
    // Master 0 is quarantined, master 1 says no: one yes of three at most.
    Answer refused = try_lock(world.loop, contender, "leader", ttl);
    CHECK(refused.error);
    CHECK(world.masters[1].get("{leader}") == world.value);
    bool quarantine_reported = false;
    for (const auto& d : diagnostics)
      quarantine_reported |= d.find("restart quarantine") != std::string::npos;
    CHECK(quarantine_reported);

    SECTION("no one gets in while the holder's lock is valid") {
      bool acquired = false;
      bool early = false;
      for (int i = 0; i < 400 && !acquired && steady::now() - restarted < scaled(10s); ++i) {
        Answer a = try_lock(world.loop, contender, "leader", ttl);
        acquired = !a.error;
        early |= acquired && a.lock.valid_until - ttl < world.valid_until;
        if (!acquired) world.loop.run_until([] { return false; }, 20ms);
      }
      CHECK(acquired);
      CHECK_FALSE(early);
    }
    SECTION("when the restarted master's vote is needed, no one gets in before the quarantine passed") {
      world.masters[1].kill9();  // now masters 0 and 2 must both say yes
      bool acquired = false;
      std::chrono::milliseconds waited{0};
      for (int i = 0; i < 400 && !acquired && steady::now() - restarted < scaled(10s); ++i) {
        acquired = !try_lock(world.loop, contender, "leader", ttl).error;
        waited = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - restarted);
        if (!acquired) world.loop.run_until([] { return false; }, 20ms);
      }
      CHECK(acquired);
      CHECK(waited >= 2000ms);
    }
  }
  REQUIRE(world.loop.close());
}

TEST_CASE("without quarantine, a master restarted empty lets a second holder in (the danger it prevents)",
          "[quarantine]") {
  HolderOnTwo world;
  Options options = world.masters.options();
  options.retry_count = 0;
  world.lock_and_restart_first(options, 10s);
  {
    Client contender(world.loop.get(), options);
    Answer a = try_lock(world.loop, contender, "leader", 10s);
    // Masters 0 and 2 both said yes while the first holder's lock is valid:
    // two holders at once. This is why restart_quarantine exists.
    REQUIRE_FALSE(a.error);
    CHECK(a.lock.value != world.value);
    CHECK(world.masters[1].get("{leader}") == world.value);
  }
  REQUIRE(world.loop.close());
}

TEST_CASE("a ttl longer than the quarantine is refused", "[quarantine]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.restart_quarantine = 1000ms;
    Client client(loop.get(), options);
    CHECK(try_lock(loop, client, "r", 1001ms).error == errc::invalid_argument);
    CHECK(try_lock(loop, client, "r", 10s).error == errc::invalid_argument);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a writable replica never votes", "[quarantine]") {
  RedisServer primary;
  ServerOptions writable_replica;
  writable_replica.args = {"--replicaof", "127.0.0.1", std::to_string(primary.port()), "--replica-read-only",
                           "no"};
  RedisServer replica(writable_replica);
  Cluster masters(2);
  LoopFixture loop;
  {
    Options options;
    options.masters = {masters[0].endpoint(), masters[1].endpoint(), replica.endpoint()};
    options.retry_count = 0;
    std::vector<std::string> diagnostics;
    options.diagnostics = [&](std::string_view line) { diagnostics.emplace_back(line); };
    masters[0].set("{r}", "someone", 10s);
    Client client(loop.get(), options);
    // Master 1 and the replica would make two yes votes of three, if the
    // replica counted.
    Answer a = try_lock(loop, client, "r", 5s);
    CHECK(a.error == errc::not_acquired);
    bool replica_reported = false;
    for (const auto& d : diagnostics) replica_reported |= d.find("not master") != std::string::npos;
    CHECK(replica_reported);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master that may evict keys is reported", "[quarantine]") {
  ServerOptions evicting;
  evicting.args = {"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"};
  RedisServer server(evicting);
  LoopFixture loop;
  {
    Options options;
    options.masters = {server.endpoint()};
    std::vector<std::string> diagnostics;
    options.diagnostics = [&](std::string_view line) { diagnostics.emplace_back(line); };
    Client client(loop.get(), options);
    REQUIRE_FALSE(try_lock(loop, client, "r", 5s).error);
    REQUIRE(diagnostics.size() == 1);
    CHECK_THAT(diagnostics[0], Catch::Contains("allkeys-lru") && Catch::Contains("noeviction") &&
                                   Catch::Contains(std::to_string(server.port())));
  }
  REQUIRE(loop.close());
}
