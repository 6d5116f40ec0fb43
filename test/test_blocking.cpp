#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.hpp"
#include "support/eventually.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

TEST_CASE("the blocking facade takes and releases a lock", "[blocking]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> a = redlock.try_lock("report", 10s);
  REQUIRE(a);
  CHECK(eventually([&] { return masters[0].get("{report}") == a->value; }));
  CHECK(redlock.try_lock("report", 10s).error() == errc::not_acquired);
  Result<Lock> e = redlock.extend(*a, 20s);
  REQUIRE(e);
  CHECK(eventually([&] { return masters[1].pttl("{report}") > 15000; }));
  Result<Lock> c = redlock.continue_lock(*e, 20s);
  REQUIRE(c);
  CHECK(c->continued);
  CHECK_FALSE(redlock.unlock(*c));
  CHECK(redlock.unlock(*c) == errc::not_held);
  CHECK(redlock.try_lock("", 1s).error() == errc::invalid_argument);
}

TEST_CASE("eight threads contending: one holder at a time", "[blocking]") {
  Cluster masters(3);
  Options options = masters.options();
  options.retry_count = 100;
  options.retry_delay = 1ms;
  options.retry_jitter = 5ms;
  Redlock redlock(options);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> acquired{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        Result<Lock> lock = redlock.lock("counter", 5s);
        if (!lock) {
          ++errors;
          continue;
        }
        if (inside.fetch_add(1) != 0) ++overlaps;
        ++acquired;
        std::this_thread::yield();
        inside.fetch_sub(1);
        if (redlock.unlock(*lock)) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  CHECK(errors == 0);
  CHECK(acquired == 80);
}

TEST_CASE("LockGuard unlocks when it goes out of scope", "[blocking]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  std::string value;
  {
    Result<Lock> lock = redlock.try_lock("guarded", 10s);
    REQUIRE(lock);
    LockGuard guard(redlock, *lock);
    value = guard.lock().value;
    CHECK(eventually([&] { return masters[0].get("{guarded}") == value; }));
    CHECK_FALSE(guard.extend(20s));
    CHECK(guard.owns_lock());
    CHECK(eventually([&] { return masters[0].pttl("{guarded}") > 15000; }));
  }
  CHECK(eventually([&] { return !masters[0].get("{guarded}") && !masters[1].get("{guarded}"); }));

  SECTION("release() gives up ownership without unlocking") {
    Result<Lock> lock = redlock.try_lock("kept", 10s);
    REQUIRE(lock);
    {
      LockGuard guard(redlock, *lock);
      Lock kept = guard.release();
      CHECK(kept.value == lock->value);
    }
    CHECK(eventually([&] { return masters[0].get("{kept}") == lock->value; }));
  }
}

TEST_CASE("the facade shuts down promptly with a master paused and commands pending", "[blocking]") {
  Cluster masters(3);
  Options options = masters.options();
  options.command_timeout = 10s;  // the paused master's commands stay pending
  auto started = std::chrono::steady_clock::now();
  {
    Redlock redlock(options);
    REQUIRE(redlock.try_lock("warm", 5s));
    masters[2].pause();
    // The other two form the quorum; the paused master's SET stays in flight.
    REQUIRE(redlock.try_lock("pending", 5s));
  }
  auto took = std::chrono::steady_clock::now() - started;
  masters[2].resume();
  CHECK(took < scaled(2s));
}

// Fails the next allocation made off the main thread (the facade's loop
// thread), once armed: how an allocation failure inside the loop is shown.
namespace {
std::atomic<int> fail_off_main{0};
const std::thread::id main_thread = std::this_thread::get_id();
}  // namespace

// Every replaceable form that libstdc++ routes through one another, so that
// what one allocates the other frees (ASan checks the pairs).
void* operator new(std::size_t size) {
  if (fail_off_main.load(std::memory_order_relaxed) > 0 && std::this_thread::get_id() != main_thread &&
      fail_off_main.fetch_sub(1) > 0) {
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  return operator new(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return operator new(size);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return operator new(size, std::nothrow);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

// The facade's loop thread ("redlock-loop") is blocked in epoll_wait or
// epoll_pwait (Linux x86-64 syscalls 232 and 281), as /proc says.
bool loop_thread_asleep_in_epoll() {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "redlock-loop") continue;
    std::ifstream syscall(task.path() / "syscall");
    std::string number;
    syscall >> number;
    return number == "232" || number == "281";
  }
  return false;
}

TEST_CASE("an exception on the loop thread reaches the caller and the facade goes on", "[blocking]") {
  // One master: the warm-up's answer means every reply has been read, so
  // nothing but the next call wakes the loop thread.
  Cluster masters(1);
  Redlock redlock(masters.options());
  REQUIRE(redlock.try_lock("warm", 10s));
  // Armed only once the loop thread sleeps in epoll_wait, so that the failing
  // allocation is the next call's own, not the tail of the last one.
  REQUIRE(eventually([] { return loop_thread_asleep_in_epoll(); }));
  fail_off_main = 1;
  CHECK_THROWS_AS(redlock.try_lock("oom", 10s), std::bad_alloc);
  CHECK(fail_off_main == 0);
  Result<Lock> after = redlock.try_lock("oom", 10s);
  CHECK(after);
}
