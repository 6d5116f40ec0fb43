#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <set>
#include <string>

#include "lock_value.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// Tests that contend want answers quickly, not after the default 200 ms pauses.
Options fast(Options o) {
  o.retry_count = 2;
  o.retry_delay = 10ms;
  o.retry_jitter = 10ms;
  o.command_timeout = 200ms;
  return o;
}

}  // namespace

TEST_CASE("a lock is taken, contended and released on N masters", "[lock]") {
  int n = GENERATE(1, 3, 5);
  Cluster masters(n);
  LoopFixture loop;
  {
    Options options = fast(masters.options());
    options.key_prefix = "app:";
    Client first(loop.get(), options);
    Client second(loop.get(), options);

    Answer a = try_lock(loop, first, "orders", 10s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "app:{orders}", a.lock.value));
    CHECK(a.lock.resource == "orders");
    CHECK(a.lock.value.size() > 32);
    CHECK(a.lock.valid());
    CHECK(a.lock.validity() > 9s);
    CHECK(a.lock.validity() <= 10s);

    for (int i = 0; i < n; ++i) {
      INFO("master " << i);
      CHECK(masters[i].get("app:{orders}") == a.lock.value);
      long long pttl = masters[i].pttl("app:{orders}");
      CHECK(pttl > 9000);
      CHECK(pttl <= 10000);
    }

    Answer b = lock(loop, second, "orders", 10s);
    CHECK(b.error == errc::not_acquired);
    CHECK(masters[0].get("app:{orders}") == a.lock.value);

    CHECK_FALSE(unlock(loop, first, a.lock));
    CHECK(gone_everywhere(masters, "app:{orders}", a.lock.value));

    Answer c = try_lock(loop, second, "orders", 10s);
    REQUIRE_FALSE(c.error);
    CHECK(c.lock.value != a.lock.value);
    CHECK_FALSE(unlock(loop, second, c.lock));

    first.close(nullptr);
    second.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("lock values start with 128 unique random bits in base64url", "[lock]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    std::set<std::string> random_parts;
    for (int i = 0; i < 20; ++i) {
      Answer a = try_lock(loop, client, "r" + std::to_string(i), 5s);
      REQUIRE_FALSE(a.error);
      REQUIRE(a.lock.value.size() > 23);
      CHECK(a.lock.value.substr(0, 22).find_first_not_of(
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == std::string::npos);
      CHECK(a.lock.value[22] == ':');
      random_parts.insert(a.lock.value.substr(0, 22));
    }
    CHECK(random_parts.size() == 20);
    // Never '-' first, so the command line never takes a value for an option:
    // with it possible, one value in 64 would start so.
    for (int i = 0; i < 2000; ++i) {
      Answer a = try_lock(loop, client, "dash", 5s);
      REQUIRE_FALSE(a.error);
      REQUIRE(a.lock.value.front() != '-');
      REQUIRE_FALSE(unlock(loop, client, a.lock));
    }

    // Within the 44 bytes Redis keeps in one allocation, for an owner of 12.
    Options options = masters.options();
    options.owner = "worker-12345";
    Client labelled(loop.get(), options);
    Answer a = try_lock(loop, labelled, "short", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(a.lock.value.size() <= 44);
    labelled.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock's value says who took it and when", "[lock]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.owner = "deploy job 42";
    Client named(loop.get(), options);
    Client unnamed(loop.get(), masters.options());

    auto before = std::chrono::system_clock::now();
    Answer a = try_lock(loop, named, "a", 5s);
    Answer b = try_lock(loop, unnamed, "b", 5s);
    auto after = std::chrono::system_clock::now();
    REQUIRE_FALSE(a.error);
    REQUIRE_FALSE(b.error);

    auto label = read_lock_value(a.lock.value);
    REQUIRE(label);
    CHECK(label->owner == "deploy job 42");
    // The value holds whole milliseconds.
    CHECK(label->since >= std::chrono::time_point_cast<std::chrono::milliseconds>(before));
    CHECK(label->since <= after);

    auto default_label = read_lock_value(b.lock.value);
    REQUIRE(default_label);
    CHECK(default_label->owner == default_owner());
    CHECK(default_owner().find(":" + std::to_string(getpid())) != std::string::npos);

    CHECK_FALSE(read_lock_value("not a value of ours"));
    CHECK_FALSE(read_lock_value(std::string(22, 'f')));
    CHECK_FALSE(read_lock_value(std::string(22, 'f') + ":x!:owner"));
    CHECK_FALSE(read_lock_value(std::string(22, 'f') + ":zzzzzzzzzzzzzz:owner"));
    CHECK_FALSE(read_lock_value(std::string(21, 'f') + "+:1a2b3c4d:owner"));
    named.close(nullptr);
    unnamed.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("validity is exactly t0 + ttl - drift on the injected clock", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    // A clock that stands still at 1000 s after the epoch of steady_clock.
    auto frozen = std::chrono::steady_clock::time_point{} + 1000s;
    Options options = masters.options();
    options.clock = [frozen] { return frozen; };
    options.drift_factor = 0.01;
    options.drift_constant = 2ms;
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "exact", 10000ms);
    REQUIRE_FALSE(a.error);
    CHECK(a.lock.valid_until == frozen + 10000ms - 102ms);

    SECTION("extend counts from the extend's own t0") {
      Answer e = extend(loop, client, a.lock, 20000ms);
      REQUIRE_FALSE(e.error);
      CHECK(e.lock.valid_until == frozen + 20000ms - 202ms);
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock that expired before its quorum answered is never returned", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    // Each reading of this clock is 60 ms after the last: by the time a round
    // decides, more than the ttl has passed since its t0.
    auto ticks = std::make_shared<std::atomic<long long>>(0);
    Options options = fast(masters.options());
    options.clock = [ticks] { return std::chrono::steady_clock::time_point{} + 60ms * ++*ticks; };
    Client client(loop.get(), options);
    Answer a = lock(loop, client, "slow", 50ms);
    CHECK(a.error == errc::unavailable);
    CHECK(gone_everywhere(masters, "{slow}", a.lock.value));
    for (std::size_t i = 0; i < masters.size(); ++i) CHECK_FALSE(masters[i].get("{slow}"));
  }
  REQUIRE(loop.close());
}

TEST_CASE("foreign values on a minority do not stop a quorum; on a majority they do", "[lock]") {
  Cluster masters(5);
  LoopFixture loop;
  {
    Client client(loop.get(), fast(masters.options()));
    SECTION("two of five held by another owner: acquired on the other three") {
      masters[0].set("{res}", "someone-else", 10s);
      masters[1].set("{res}", "someone-else", 10s);
      Answer a = try_lock(loop, client, "res", 5s);
      REQUIRE_FALSE(a.error);
      CHECK(eventually([&] { return holders(masters, "{res}", a.lock.value) == 3; }));
      CHECK(masters[0].get("{res}") == "someone-else");
      CHECK(masters[1].get("{res}") == "someone-else");
    }
    SECTION("three of five held by another owner: not acquired, and nothing of ours is left") {
      masters[0].set("{res}", "someone-else", 10s);
      masters[2].set("{res}", "someone-else", 10s);
      masters[4].set("{res}", "someone-else", 10s);
      Answer a = lock(loop, client, "res", 5s);
      CHECK(a.error == errc::not_acquired);
      CHECK(masters[0].get("{res}") == "someone-else");
      CHECK(masters[2].get("{res}") == "someone-else");
      CHECK(masters[4].get("{res}") == "someone-else");
      // Our value reached masters 1 and 3; the release must have removed it.
      CHECK(eventually([&] { return !masters[1].get("{res}") && !masters[3].get("{res}"); }));
      CHECK_FALSE(masters[1].get("{res}"));
      CHECK_FALSE(masters[3].get("{res}"));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("extend renews the ttl only where the value is ours", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), fast(masters.options()));
    Answer a = try_lock(loop, client, "job", 2s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{job}", a.lock.value));

    SECTION("held everywhere: every ttl grows") {
      Answer e = extend(loop, client, a.lock, 30s);
      REQUIRE_FALSE(e.error);
      CHECK(e.lock.value == a.lock.value);
      CHECK(e.lock.valid_until > a.lock.valid_until);
      CHECK(eventually([&] {
        return masters[0].pttl("{job}") > 20000 && masters[1].pttl("{job}") > 20000 &&
               masters[2].pttl("{job}") > 20000;
      }));
    }
    SECTION("a lock from a gapped continue_lock is continuous again once extended") {
      Lock gapped = a.lock;
      gapped.continued = false;
      Answer e = extend(loop, client, gapped, 30s);
      REQUIRE_FALSE(e.error);
      CHECK(e.lock.continued);
    }
    SECTION("vanished on one master: still a quorum, and the key is not re-created there") {
      masters[1].command({"DEL", "{job}"});
      Answer e = extend(loop, client, a.lock, 30s);
      REQUIRE_FALSE(e.error);
      CHECK_FALSE(masters[1].get("{job}"));
    }
    SECTION("vanished on two masters: not held, and our last copy is deleted") {
      masters[0].command({"DEL", "{job}"});
      masters[1].command({"DEL", "{job}"});
      Answer e = extend(loop, client, a.lock, 30s);
      CHECK(e.error == errc::not_held);
      CHECK(gone_everywhere(masters, "{job}", a.lock.value));
      CHECK_FALSE(masters[0].get("{job}"));
      CHECK_FALSE(masters[1].get("{job}"));
    }
    SECTION("taken over by another owner: not held, and their key is untouched") {
      for (int i = 0; i < 3; ++i) masters[i].set("{job}", "thief", 10s);
      Answer e = extend(loop, client, a.lock, 30s);
      CHECK(e.error == errc::not_held);
      for (int i = 0; i < 3; ++i) {
        CHECK(masters[i].get("{job}") == "thief");
        CHECK(masters[i].pttl("{job}") <= 10000);
      }
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("extend of a lock whose validity has passed fails without a round", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), fast(masters.options()));
    Answer a = try_lock(loop, client, "late", 5s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{late}", a.lock.value));
    Lock stale = a.lock;
    stale.valid_until = std::chrono::steady_clock::now() - 1ms;
    Answer e = extend(loop, client, stale, 5s);
    CHECK(e.error == errc::not_held);
    // The lock is lost: our value is deleted so that others need not wait.
    CHECK(gone_everywhere(masters, "{late}", a.lock.value));
  }
  REQUIRE(loop.close());
}

TEST_CASE("continue_lock renews, re-sets where absent, and says whether ownership was continuous", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), fast(masters.options()));
    Answer a = try_lock(loop, client, "leader", 5s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{leader}", a.lock.value));

    SECTION("held: renewed, continuous") {
      Answer c = continue_lock(loop, client, a.lock, 20s);
      REQUIRE_FALSE(c.error);
      CHECK(c.lock.continued);
      CHECK(c.lock.value == a.lock.value);
      CHECK(eventually([&] {
        return masters[0].pttl("{leader}") > 15000 && masters[1].pttl("{leader}") > 15000 &&
               masters[2].pttl("{leader}") > 15000;
      }));
    }
    SECTION("vanished on one master: set again there, still continuous") {
      masters[2].command({"DEL", "{leader}"});
      Answer c = continue_lock(loop, client, a.lock, 20s);
      REQUIRE_FALSE(c.error);
      CHECK(c.lock.continued);  // two of three renewed our existing value
      CHECK(held_everywhere(masters, "{leader}", a.lock.value));
    }
    SECTION("vanished on two masters: set again there, continuity not proved") {
      masters[0].command({"DEL", "{leader}"});
      masters[2].command({"DEL", "{leader}"});
      Answer c = continue_lock(loop, client, a.lock, 20s);
      REQUIRE_FALSE(c.error);
      // Only one master renewed our value: a majority re-created it, so
      // someone else may have held the lock in between.
      CHECK_FALSE(c.lock.continued);
      CHECK(held_everywhere(masters, "{leader}", a.lock.value));
    }
    SECTION("taken and released by another client in between: not continuous, though still valid") {
      // Our keys vanish (a stall past the masters' ttl, or a flush); a rival
      // takes the lock and releases it; our old Lock still looks valid here.
      for (int i = 0; i < 3; ++i) masters[i].command({"DEL", "{leader}"});
      Client rival(loop.get(), fast(masters.options()));
      Answer r = try_lock(loop, rival, "leader", 10s);
      REQUIRE_FALSE(r.error);
      REQUIRE_FALSE(unlock(loop, rival, r.lock));
      REQUIRE(a.lock.valid());
      Answer c = continue_lock(loop, client, a.lock, 20s);
      REQUIRE_FALSE(c.error);
      CHECK_FALSE(c.lock.continued);
      CHECK(held_everywhere(masters, "{leader}", a.lock.value));
    }
    SECTION("expired everywhere: acquired afresh, not continuous") {
      for (int i = 0; i < 3; ++i) masters[i].command({"DEL", "{leader}"});
      Lock old = a.lock;
      old.valid_until = std::chrono::steady_clock::now() - 1s;
      Answer c = continue_lock(loop, client, old, 20s);
      REQUIRE_FALSE(c.error);
      CHECK_FALSE(c.lock.continued);
      CHECK(held_everywhere(masters, "{leader}", a.lock.value));
    }
    SECTION("another owner on a majority: not held, their keys untouched, ours deleted") {
      masters[0].set("{leader}", "rival", 10s);
      masters[1].set("{leader}", "rival", 10s);
      Answer c = continue_lock(loop, client, a.lock, 20s);
      CHECK(c.error == errc::not_held);
      CHECK(masters[0].get("{leader}") == "rival");
      CHECK(masters[1].get("{leader}") == "rival");
      CHECK(gone_everywhere(masters, "{leader}", a.lock.value));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("unlock never touches another owner's key", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), fast(masters.options()));
    Answer a = try_lock(loop, client, "mine", 10s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{mine}", a.lock.value));

    SECTION("a forged value") {
      Lock forged = a.lock;
      forged.value = "0123456789abcdef0123456789abcdef";
      CHECK(unlock(loop, client, forged) == errc::not_held);
      CHECK(holders(masters, "{mine}", a.lock.value) == 3);
      Answer e = extend(loop, client, forged, 30s);
      CHECK(e.error == errc::not_held);
      CHECK(holders(masters, "{mine}", a.lock.value) == 3);
      for (int i = 0; i < 3; ++i) CHECK(masters[i].pttl("{mine}") <= 10000);
    }
    SECTION("a double unlock") {
      CHECK_FALSE(unlock(loop, client, a.lock));
      CHECK(unlock(loop, client, a.lock) == errc::not_held);
    }
    SECTION("an expired lock whose key another owner took") {
      for (int i = 0; i < 3; ++i) masters[i].set("{mine}", "next-owner", 10s);
      CHECK(unlock(loop, client, a.lock) == errc::not_held);
      for (int i = 0; i < 3; ++i) CHECK(masters[i].get("{mine}") == "next-owner");
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("bad arguments are answered with invalid_argument on a later turn", "[lock]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.restart_quarantine = 60s;
    Client client(loop.get(), options);
    CHECK(try_lock(loop, client, "", 1s).error == errc::invalid_argument);
    CHECK(try_lock(loop, client, std::string(70000, 'k'), 1s).error == errc::invalid_argument);
    CHECK(try_lock(loop, client, "r", 0ms).error == errc::invalid_argument);
    CHECK(try_lock(loop, client, "r", -5ms).error == errc::invalid_argument);
    CHECK(try_lock(loop, client, "r", 2ms).error == errc::invalid_argument);  // drift eats it whole
    CHECK(try_lock(loop, client, "r", 61s).error == errc::invalid_argument);  // above the quarantine
    CHECK(lock(loop, client, "r", 3000000000ms).error == errc::invalid_argument);
    Lock empty;
    CHECK(extend(loop, client, empty, 1s).error == errc::invalid_argument);
    CHECK(continue_lock(loop, client, empty, 1s).error == errc::invalid_argument);
    CHECK(unlock(loop, client, empty) == errc::invalid_argument);
    Lock no_value;
    no_value.resource = "r";
    CHECK(unlock(loop, client, no_value) == errc::invalid_argument);
  }
  REQUIRE(loop.close());
}

TEST_CASE("bad options throw at construction", "[lock]") {
  LoopFixture loop;
  Options none;
  CHECK_THROWS_AS(Client(loop.get(), none), std::invalid_argument);
  Options one;
  one.masters = {Endpoint{}};
  CHECK_THROWS_AS(Client(nullptr, one), std::invalid_argument);
  CHECK_THROWS_AS(Redlock(none), std::invalid_argument);
  REQUIRE(loop.close());
}

TEST_CASE("unlock answers not_held only when a majority answered", "[lock]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = fast(masters.options());
    options.command_timeout = 300ms;
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "half-known", 30s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{half-known}", a.lock.value));
    // Master 0 no longer holds it, master 1 is gone and master 2 (which
    // still holds our value) is slow to answer: one answer is not a majority.
    masters[0].command({"DEL", "{half-known}"});
    masters[1].kill9();
    masters[2].pause();
    std::error_code unlocked = unlock(loop, client, a.lock);
    masters[2].resume();
    CHECK(unlocked == errc::unavailable);
  }
  REQUIRE(loop.close());
}
