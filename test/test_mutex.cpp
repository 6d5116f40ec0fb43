#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/holders.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

Options patient(Options o) {
  o.retry_count = 100;
  o.retry_delay = 5ms;
  o.retry_jitter = 5ms;
  o.command_timeout = 200ms;
  return o;
}

}  // namespace

TEST_CASE("a Mutex works with std::lock_guard and keeps the lock while held", "[mutex]") {
  Cluster masters(3);
  Redlock redlock(patient(masters.options()));
  Mutex mutex(redlock, "report", 300ms);
  {
    std::lock_guard<Mutex> held(mutex);
    const Lock& lock = mutex.lock_held();
    CHECK(lock.resource == "report");
    CHECK(holders(masters, "{report}", lock.value) >= 2);
    // Kept alive: still held well past the first ttl.
    std::this_thread::sleep_for(700ms);
    CHECK_FALSE(mutex.lost());
    CHECK(mutex.valid_until() > std::chrono::steady_clock::now());
    CHECK(eventually([&] { return held_everywhere(masters, "{report}", lock.value); }));
  }
  CHECK(held_nowhere(masters, "{report}"));
  CHECK_FALSE(mutex.error());
  CHECK(mutex.valid_until() == std::chrono::steady_clock::time_point{});
}

TEST_CASE("two Mutexes on one resource exclude each other; try_lock and try_lock_for say so", "[mutex]") {
  Cluster masters(3);
  Redlock first(patient(masters.options()));
  Redlock second(patient(masters.options()));
  Mutex a(first, "jobs", 2s);
  Mutex b(second, "jobs", 2s);
  std::atomic<bool> taken{false};
  std::atomic<bool> let_go{false};
  // a is held by a thread of its own, which unlocks it when told.
  std::thread holder([&] {
    std::lock_guard<Mutex> held(a);
    taken = true;
    for (int i = 0; i < 1000 && !let_go; ++i) std::this_thread::sleep_for(10ms);
  });
  REQUIRE(eventually([&] { return taken.load(); }));
  CHECK_FALSE(b.try_lock());
  CHECK(b.error() == errc::not_acquired);
  auto asked = std::chrono::steady_clock::now();
  CHECK_FALSE(b.try_lock_for(150ms));
  // The loop's clock is read once per turn: a few ms early at most.
  CHECK(std::chrono::steady_clock::now() - asked >= 140ms);
  CHECK(b.error() == errc::timeout);

  // Released by a, taken by b while it waits.
  let_go = true;
  CHECK(b.try_lock_until(std::chrono::steady_clock::now() + 5s));
  holder.join();
  CHECK_FALSE(b.error());
  CHECK(b.lock_held().resource == "jobs");
  CHECK_FALSE(a.try_lock());
  b.unlock();
  CHECK(held_nowhere(masters, "{jobs}"));
}

TEST_CASE("threads sharing one Mutex hold it one at a time", "[mutex]") {
  Cluster masters(3);
  Redlock redlock(patient(masters.options()));
  Mutex mutex(redlock, "counter", 5s);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  int counter = 0;  // guarded by the Mutex alone
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        std::lock_guard<Mutex> held(mutex);
        if (inside.fetch_add(1) != 0) ++overlaps;
        ++counter;
        inside.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  CHECK(counter == 40);
  CHECK(held_nowhere(masters, "{counter}"));
}

TEST_CASE("std::scoped_lock takes two Mutexes without deadlock", "[mutex]") {
  Cluster masters(3);
  Redlock redlock(patient(masters.options()));
  Mutex x(redlock, "x", 5s);
  Mutex y(redlock, "y", 5s);
  std::atomic<int> done{0};
  std::thread one([&] {
    for (int i = 0; i < 5; ++i) {
      std::scoped_lock both(x, y);
      ++done;
    }
  });
  std::thread two([&] {
    for (int i = 0; i < 5; ++i) {
      std::scoped_lock both(y, x);
      ++done;
    }
  });
  one.join();
  two.join();
  CHECK(done == 10);
  CHECK(held_nowhere(masters, "{x}"));
  CHECK(held_nowhere(masters, "{y}"));
}

TEST_CASE("a Mutex locked twice by one thread throws instead of waiting on itself", "[mutex]") {
  Cluster masters(1);
  Redlock redlock(patient(masters.options()));
  Mutex mutex(redlock, "once", 5s);
  std::lock_guard<Mutex> held(mutex);
  try {
    mutex.lock();
    FAIL("lock() returned");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::resource_deadlock_would_occur);
  }
  CHECK_THROWS_AS(mutex.try_lock_for(10ms), std::system_error);
  CHECK_FALSE(mutex.try_lock());
  CHECK_FALSE(mutex.error());  // its own hold is no failure
}

TEST_CASE("a lost Mutex says so; its unlock releases the local side", "[mutex]") {
  Cluster masters(3);
  Options options = patient(masters.options());
  options.command_timeout = 50ms;
  Redlock redlock(options);
  Mutex mutex(redlock, "fragile", 300ms);
  mutex.lock();
  masters[0].pause();
  masters[1].pause();
  CHECK(eventually([&] { return mutex.lost(); }, 5s));
  CHECK(mutex.error());
  mutex.unlock();
  CHECK(mutex.error());  // why the hold ended, still
  masters[0].resume();
  masters[1].resume();
  // Free again for this process: the local side was released.
  CHECK(mutex.try_lock_for(5s));
  CHECK_FALSE(mutex.lost());
  mutex.unlock();
}

TEST_CASE("a Mutex unlocked by another thread is free again at once", "[mutex]") {
  Cluster masters(3);
  Redlock redlock(patient(masters.options()));
  Mutex mutex(redlock, "handed-over", 5s);
  std::unique_lock<Mutex> held(mutex);
  std::thread other([moved = std::move(held)]() mutable { moved.unlock(); });
  other.join();
  CHECK(eventually([&] { return held_nowhere(masters, "{handed-over}"); }));
  // Free for this process and for others.
  Redlock elsewhere(patient(masters.options()));
  Result<Lock> taken = elsewhere.try_lock("handed-over", 5s);
  REQUIRE(taken);
  CHECK_FALSE(elsewhere.unlock(*taken));
  CHECK(mutex.try_lock_for(2s));
  mutex.unlock();
}

TEST_CASE("try_lock_for and try_lock_until take the largest waits as waits without end", "[mutex]") {
  Cluster masters(3);
  Redlock redlock(patient(masters.options()));
  Mutex mutex(redlock, "patient", 5s);
  std::atomic<bool> taken{false};
  std::thread holder([&] {
    std::lock_guard<Mutex> held(mutex);
    taken = true;
    std::this_thread::sleep_for(300ms);
  });
  REQUIRE(eventually([&] { return taken.load(); }));
  CHECK(mutex.try_lock_for(std::chrono::milliseconds::max()));
  mutex.unlock();
  holder.join();
  std::thread again([&] {
    std::lock_guard<Mutex> held(mutex);
    std::this_thread::sleep_for(100ms);
  });
  std::this_thread::sleep_for(20ms);
  CHECK(mutex.try_lock_until(std::chrono::steady_clock::time_point::max()));
  mutex.unlock();
  again.join();
  CHECK(mutex.try_lock_until(std::chrono::system_clock::now() - 1h));  // free: one attempt
  mutex.unlock();
}

TEST_CASE("error() is the calling thread's: another thread's failure is not the holder's", "[mutex]") {
  Cluster masters(1);
  Redlock redlock(patient(masters.options()));
  Mutex mutex(redlock, "mine", 5s);
  std::lock_guard<Mutex> held(mutex);
  std::thread other([&] {
    CHECK_FALSE(mutex.try_lock());
    CHECK(mutex.error() == errc::not_acquired);
  });
  other.join();
  CHECK_FALSE(mutex.error());
}

TEST_CASE("a Mutex refuses bad arguments at construction", "[mutex]") {
  Cluster masters(1);
  Redlock redlock(masters.options());
  CHECK_THROWS_AS(Mutex(redlock, "", 1s), std::invalid_argument);
  CHECK_THROWS_AS(Mutex(redlock, "r", 0ms), std::invalid_argument);
  CHECK_THROWS_AS(Mutex(redlock, "r", std::chrono::milliseconds{(1LL << 31)}), std::invalid_argument);
  CHECK_NOTHROW(Mutex(redlock, "r", std::chrono::milliseconds{(1LL << 31) - 1}));
  CHECK_THROWS_AS(Mutex(redlock, "r", 1s, KeepOptions{-1ms, 0ms}), std::invalid_argument);
  CHECK_THROWS_AS(Mutex(redlock, "r", 1s, KeepOptions{0ms, -1ms}), std::invalid_argument);
  // A ttl the Client refuses (the drift allowance eats 1 ms whole): lock() says so.
  Mutex tiny(redlock, "r", 1ms);
  try {
    tiny.lock();
    FAIL("lock() returned");
  } catch (const std::system_error& e) {
    CHECK(e.code() == errc::invalid_argument);
  }
  CHECK(tiny.try_lock_for(10ms) == false);
  CHECK(tiny.error() == errc::invalid_argument);
}
