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
    CHECK(holders(masters, "guarded", value) == 3);
    CHECK(redlock.try_lock("guarded", 300ms).error() == errc::not_acquired);
    CHECK(lost == 0);
  }
  CHECK(held_nowhere(masters, "guarded"));
}

TEST_CASE("a kept LockGuard's loss is seen from other threads, and called back once", "[guard]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> lock = redlock.try_lock("taken", 600ms);
  REQUIRE(lock);
  REQUIRE(held_everywhere(masters, "taken", lock->value));
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
  for (std::size_t m = 0; m < 2; ++m) masters[m].set("taken", "someone-else", 10s);
  REQUIRE(eventually([&] { return guard.lost(); }, 3s));
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(guard.error() == errc::not_held);
  CHECK(eventually([&] { return calls == 1; }));
  CHECK(last == static_cast<int>(errc::not_held));
  CHECK(gone_everywhere(masters, "taken", lock->value));
  CHECK(masters[0].get("taken") == "someone-else");
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
  CHECK(held_nowhere(masters, "capped"));
}
