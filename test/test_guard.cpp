#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/holders.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST_CASE("a kept LockGuard holds past its ttl and unlocks at scope exit", "[guard]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  std::string value;
  {
    Result<Lock> lock = redlock.try_lock("guarded", 300ms);
    REQUIRE(lock);
    value = lock->value;
    std::atomic<int> lost{0};
    LockGuard guard(redlock, *lock, {}, [&](std::error_code) { ++lost; });
    auto first = guard.valid_until();
    CHECK(first == lock->valid_until);
    // Renewals move valid_until on; after a second the first ttl is long gone.
    REQUIRE(eventually([&] { return guard.valid_until() > first + 1000ms; }, 3s));
    CHECK_FALSE(guard.lost());
    CHECK_FALSE(guard.error());
    CHECK(holders(masters, "{guarded}", value) == 3);
    CHECK(redlock.try_lock("guarded", 300ms).error() == errc::not_acquired);
    CHECK(lost == 0);
  }
  CHECK(held_nowhere(masters, "{guarded}"));
}

TEST_CASE("extend on a kept LockGuard moves valid_until and the renewals to the new ttl", "[guard]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> lock = redlock.try_lock("stretched-guard", 300ms);
  REQUIRE(lock);
  LockGuard guard(redlock, *lock, {});
  REQUIRE_FALSE(guard.extend(5000ms));
  CHECK(guard.lock().ttl == 5000ms);
  CHECK(guard.valid_until() == guard.lock().valid_until);
  CHECK(guard.valid_until() > steady::now() + 4000ms);
  // The next renewal comes a third of the new ttl later, and renews to it;
  // at the old ttl it would leave at most 300 ms on the masters.
  auto extended = guard.valid_until();
  REQUIRE(eventually([&] { return guard.valid_until() > extended; }, 4s));
  // A round decides at a majority: the last master may answer a moment later.
  for (std::size_t i = 0; i < masters.size(); ++i)
    CHECK(eventually([&] { return masters[i].pttl("{stretched-guard}") > 3000; }));
  CHECK_FALSE(guard.lost());
}

TEST_CASE("a kept LockGuard's loss is seen from other threads, and called back once", "[guard]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> lock = redlock.try_lock("taken", 600ms);
  REQUIRE(lock);
  REQUIRE(held_everywhere(masters, "{taken}", lock->value));
  std::atomic<int> calls{0};
  std::atomic<int> last{0};
  LockGuard guard(redlock, *lock, {100ms, 0ms}, [&](std::error_code e) {
    last = e.value();
    ++calls;
  });
  // Readers on other threads while the loop thread renews and then loses it.
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      auto until = steady::now() + scaled(5s);
      for (int i = 0; i < 1000000 && !stop && steady::now() < until; ++i) {
        (void)guard.valid_until();
        if (guard.lost()) (void)guard.error();
        ++reads;
      }
    });
  }
  REQUIRE(eventually([&] { return reads > 100; }));
  for (std::size_t m = 0; m < 2; ++m) masters[m].set("{taken}", "someone-else", 10s);
  REQUIRE(eventually([&] { return guard.lost(); }, 3s));
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(guard.error() == errc::not_held);
  CHECK(eventually([&] { return calls == 1; }));
  CHECK(last == static_cast<int>(errc::not_held));
  CHECK(gone_everywhere(masters, "{taken}", lock->value));
  CHECK(masters[0].get("{taken}") == "someone-else");
  CHECK(guard.unlock() == errc::not_held);
  CHECK(calls == 1);
}

TEST_CASE("max_hold through a LockGuard: timeout, released", "[guard]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> lock = redlock.try_lock("capped", 300ms);
  REQUIRE(lock);
  LockGuard guard(redlock, *lock, {0ms, 400ms});
  REQUIRE(eventually([&] { return guard.lost(); }, 3s));
  CHECK(guard.error() == errc::timeout);
  CHECK(held_nowhere(masters, "{capped}"));
}

TEST_CASE("reentrant: the holding thread locks again at once, released at its last unlock",
          "[guard][reentrant]") {
  Cluster masters(3);
  Options options = masters.options();
  SECTION("off by default: the same thread is refused like any other") {
    Redlock redlock(options);
    Result<Lock> a = redlock.try_lock("nested", 10s);
    REQUIRE(a);
    CHECK(redlock.try_lock("nested", 10s).error() == errc::not_acquired);
    CHECK_FALSE(redlock.unlock(*a));
  }
  SECTION("on") {
    options.reentrant = true;
    Redlock redlock(options);
    Result<Lock> a = redlock.try_lock("nested", 10s);
    REQUIRE(a);
    Result<Lock> b = redlock.try_lock("nested", 5s);  // within the first ttl: as it is
    REQUIRE(b);
    CHECK(b->value == a->value);
    CHECK(b->valid_until == a->valid_until);
    CHECK(masters[0].pttl("{nested}") <= 10000);
    Result<Lock> c = redlock.lock("nested", 30s);  // reaches further: extended first
    REQUIRE(c);
    CHECK(c->value == a->value);
    CHECK(c->valid_until > a->valid_until + 15s);
    CHECK(eventually([&] { return masters[0].pttl("{nested}") > 20000; }));
    // Another thread, and another Redlock (as another process would), are refused.
    Result<Lock> other_thread = make_error_code(errc::closed);
    std::thread([&] { other_thread = redlock.try_lock("nested", 10s); }).join();
    CHECK(other_thread.error() == errc::not_acquired);
    Redlock elsewhere(masters.options());
    CHECK(elsewhere.try_lock("nested", 10s).error() == errc::not_acquired);
    CHECK_FALSE(redlock.unlock(*c));
    CHECK_FALSE(redlock.unlock(*b));
    CHECK(holders(masters, "{nested}", a->value) == 3);
    CHECK_FALSE(redlock.unlock(*a));  // the last level
    CHECK(held_nowhere(masters, "{nested}"));
    CHECK(redlock.unlock(*a) == errc::not_held);
  }
}

TEST_CASE("reentrant holds from several threads: one thread at a time, nested levels free",
          "[guard][reentrant]") {
  Cluster masters(3);
  Options options = masters.options();
  options.reentrant = true;
  Redlock redlock(options);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> held{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        Result<Lock> outer = redlock.lock("shared", 5s, 10s);
        if (!outer) {
          ++errors;
          continue;
        }
        if (inside.fetch_add(1) != 0) ++overlaps;
        for (int level = 0; level < 3; ++level) {
          Result<Lock> again = redlock.try_lock("shared", 1s);  // nested: at once
          if (!again || again->value != outer->value) ++errors;
          if (again && redlock.unlock(*again)) ++errors;
        }
        ++held;
        inside.fetch_sub(1);
        if (redlock.unlock(*outer)) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  CHECK(errors == 0);
  CHECK(held == 40);
  CHECK(held_nowhere(masters, "{shared}"));
}

TEST_CASE("reentrant kept guards share one keep; the inner one's end changes nothing", "[guard][reentrant]") {
  Cluster masters(3);
  Options options = masters.options();
  options.reentrant = true;
  Redlock redlock(options);
  Result<Lock> a = redlock.try_lock("kept-nested", 300ms);
  REQUIRE(a);
  std::atomic<int> outer_lost{0};
  std::atomic<int> inner_lost{0};
  {
    LockGuard outer(redlock, *a, {}, [&](std::error_code) { ++outer_lost; });
    {
      Result<Lock> b = redlock.try_lock("kept-nested", 300ms);
      REQUIRE(b);
      CHECK(b->value == a->value);
      LockGuard inner(redlock, *b, {}, [&](std::error_code) { ++inner_lost; });
      auto first = inner.valid_until();
      REQUIRE(eventually([&] { return inner.valid_until() > first + 300ms; }, 3s));
      CHECK_FALSE(inner.lost());
    }
    auto after_inner = outer.valid_until();
    REQUIRE(eventually([&] { return outer.valid_until() > after_inner + 600ms; }, 3s));
    CHECK(holders(masters, "{kept-nested}", a->value) == 3);
    CHECK_FALSE(outer.lost());
  }
  CHECK(held_nowhere(masters, "{kept-nested}"));
  CHECK(outer_lost == 0);
  CHECK(inner_lost == 0);
}

// Hardening 2, item 4.
TEST_CASE("extend on a kept LockGuard past its first ttl succeeds: the renewals kept it valid",
          "[guard][hardening]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> lock = redlock.try_lock("guard-first-taken", 300ms);
  REQUIRE(lock);
  std::atomic<int> lost{0};
  LockGuard guard(redlock, *lock, {}, [&](std::error_code) { ++lost; });
  REQUIRE(eventually([&] { return steady::now() > lock->valid_until + 200ms; }, 3s));
  CHECK_FALSE(guard.lost());
  REQUIRE_FALSE(guard.extend(1000ms));
  CHECK(guard.valid_until() > steady::now() + 800ms);
  CHECK(holders(masters, "{guard-first-taken}", lock->value) == 3);
  CHECK_FALSE(guard.lost());
  CHECK(lost == 0);
}

// Hardening 2, item 1.
TEST_CASE("reentrant: after a refused extend or continue_lock the thread's next lock is a fresh acquisition",
          "[guard][reentrant][hardening]") {
  Cluster masters(3);
  Options options = masters.options();
  options.reentrant = true;
  options.retry_count = 0;
  Redlock redlock(options);
  Result<Lock> held = redlock.try_lock("reentered", 10s);
  REQUIRE(held);
  for (std::size_t i = 1; i < 3; ++i) masters[i].pause();
  bool use_continue = GENERATE(false, true);
  Result<Lock> refused = use_continue ? redlock.continue_lock(*held, 10s) : redlock.extend(*held, 10s);
  CHECK(refused.error() == errc::unavailable);
  for (std::size_t i = 1; i < 3; ++i) masters[i].resume();
  // The library deleted our value everywhere: the lock is free, and another owner takes it.
  REQUIRE(gone_everywhere(masters, "{reentered}", held->value));
  Redlock other(masters.options());
  Result<Lock> taken = other.try_lock("reentered", 10s);
  REQUIRE(taken);
  // The dead Lock is not handed out again: the masters are asked, and refuse.
  Result<Lock> again = redlock.lock("reentered", 10s);
  CHECK(again.error() == errc::not_acquired);
  // try_lock answers at a majority's yes: the third master's may come later.
  CHECK(held_everywhere(masters, "{reentered}", taken->value));
}
