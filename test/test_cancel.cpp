#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
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

// A waiter that could only poll would wait this long between attempts: a
// prompt answer can only come from a wake.
Options slow_polling(Options o) {
  o.retry_delay = 10s;
  o.retry_jitter = 0ms;
  o.command_timeout = 200ms;
  return o;
}

// One lock() in flight: its id, its answers.
struct Call {
  std::shared_ptr<Answer> answer = std::make_shared<Answer>();
  Client::CallId id = 0;

  Call(Client& client, const std::string& resource, milliseconds ttl, milliseconds wait) {
    id = client.lock(resource, ttl, wait, [a = answer](std::error_code e, Lock l) {
      ++a->calls;
      a->error = e;
      a->lock = std::move(l);
    });
  }
  bool done() const { return answer->calls > 0; }
};

}  // namespace

TEST_CASE("cancel answers a waiting lock() once with canceled, and the holder keeps its lock", "[cancel]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "report", 30s);
    REQUIRE_FALSE(held.error);

    Call call(waiter, "report", 10s, 60s);
    CHECK(call.id != 0);
    REQUIRE(loop.run_until([&] { return !masters.queued_on("{report}", 1).empty(); }, 5s));
    auto asked = steady::now();
    waiter.cancel(call.id);
    CHECK_FALSE(call.done());  // never inside the call
    REQUIRE(loop.run_until([&] { return call.done(); }, 2s));
    CHECK(steady::now() - asked < 1s);
    CHECK(call.answer->error == errc::canceled);
    // It left the gate's queue; the holder still holds.
    CHECK(loop.run_until([&] { return masters.queued_on("{report}", 1).empty(); }, 2s));
    CHECK(held_everywhere(masters, "{report}", held.lock.value));

    // Once only, and ids are never answered twice nor reused.
    waiter.cancel(call.id);
    waiter.cancel(987654321);
    (void)loop.run_until([] { return false; }, 50ms);  // time for a wrong answer to arrive
    CHECK(call.answer->calls == 1);
    Call next(waiter, "other", 10s, 1s);
    CHECK(next.id > call.id);
    REQUIRE(loop.run_until([&] { return next.done(); }, 5s));
    CHECK_FALSE(next.answer->error);
    CHECK(waiter.stats().acquire.canceled == 1);

    holder.close(nullptr);
    waiter.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a canceled waiter does not strand the waiters behind it", "[cancel]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client first(loop.get(), slow_polling(masters.options()));
    Client second(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "queue", 30s);
    REQUIRE_FALSE(held.error);

    Call ahead(first, "queue", 10s, 60s);
    REQUIRE(loop.run_until([&] { return !masters.queued_on("{queue}", 1).empty(); }, 5s));
    Call behind(second, "queue", 10s, 60s);
    REQUIRE(loop.run_until([&] { return !masters.queued_on("{queue}", 2).empty(); }, 5s));
    // The first waiter in the same Client as a local line, too.
    Call local(first, "queue", 10s, 60s);

    first.cancel(ahead.id);
    REQUIRE(loop.run_until([&] { return ahead.done(); }, 2s));
    CHECK(ahead.answer->error == errc::canceled);

    // The release goes to those still waiting, at once (not after 10 s of polling).
    auto released = steady::now();
    CHECK_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return behind.done() || local.done(); }, 3s));
    CHECK(steady::now() - released < 2s);
    // `behind` is second's call, `local` first's; one holds now, the other waits.
    const bool behind_won = behind.done();
    Call& winner = behind_won ? behind : local;
    Call& other = behind_won ? local : behind;
    Client& winner_client = behind_won ? second : first;
    Client& other_client = behind_won ? first : second;
    REQUIRE_FALSE(winner.answer->error);
    CHECK_FALSE(other.done());
    CHECK_FALSE(unlock(loop, winner_client, winner.answer->lock));
    REQUIRE(loop.run_until([&] { return other.done(); }, 3s));
    CHECK_FALSE(other.answer->error);
    CHECK_FALSE(unlock(loop, other_client, other.answer->lock));
    CHECK(held_nowhere(masters, "{queue}"));

    holder.close(nullptr);
    first.close(nullptr);
    second.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock() canceled while its attempt is in flight leaves nothing on the masters", "[cancel]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    for (int i = 0; i < 20; ++i) {
      const std::string resource = "free-" + std::to_string(i);
      Call call(client, resource, 10s, 5s);
      // The attempt starts on this turn; cancel before any reply is read.
      client.cancel(call.id);
      REQUIRE(loop.run_until([&] { return call.done(); }, 2s));
      CHECK(call.answer->error == errc::canceled);
      CHECK(eventually([&] { return held_nowhere(masters, "{" + resource + "}"); }));
    }
    // The form with retries can be canceled too.
    Answer held = try_lock(loop, client, "busy", 30s);
    REQUIRE_FALSE(held.error);
    Client other(loop.get(), slow_polling(masters.options()));
    auto answer = std::make_shared<Answer>();
    Client::CallId id = other.lock("busy", 10s, [answer](std::error_code e, const Lock&) {
      ++answer->calls;
      answer->error = e;
    });
    (void)loop.run_until([] { return false; }, 50ms);  // time for a wrong answer to arrive
    other.cancel(id);
    REQUIRE(loop.run_until([&] { return answer->calls > 0; }, 2s));
    CHECK(answer->error == errc::canceled);
    client.close(nullptr);
    other.close(nullptr);
  }
  REQUIRE(loop.close());
}

// Found by review: a wake the gate sent while the waiter's attempt was in
// flight was swallowed by its cancel, and the next Client waited for its
// fallback timer though the lock was free.
TEST_CASE("a waiter cancelled after the queue woke it passes the wake on", "[cancel]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options patient = masters.options();
    patient.retry_delay = 100ms;
    patient.retry_jitter = 0ms;
    patient.command_timeout = 5s;  // its attempt stays in flight on the paused masters
    Options polling_slowly = patient;
    polling_slowly.retry_delay = 10s;
    Client a(loop.get(), masters.options());
    Client b(loop.get(), patient);
    Client c(loop.get(), polling_slowly);
    Answer held = try_lock(loop, a, "R", 20s);
    REQUIRE_FALSE(held.error);
    Call wb(b, "R", 10s, 60s);
    REQUIRE(loop.run_until([&] { return !masters.queued_on("{R}", 1).empty(); }, 5s));
    const std::size_t gate = masters.queued_on("{R}", 1).front();
    Call wc(c, "R", 10s, 60s);
    REQUIRE(loop.run_until([&] { return !masters.queued_on("{R}", 2).empty(); }, 5s));
    // After refusals at a gate nobody releases at, b's attempts go to every
    // master (docs/waiting.md); with the others paused, one stays in flight.
    (void)loop.run_until([] { return false; }, 400ms);
    std::vector<std::size_t> others;
    for (std::size_t i = 0; i < 3; ++i) {
      if (i != gate) others.push_back(i);
    }
    for (auto i : others) masters[i].pause();
    (void)loop.run_until([] { return false; }, 250ms);
    bool unlocked = false;
    a.unlock(held.lock, [&](std::error_code) { unlocked = true; });
    // The gate pops b and keeps the key for it; b's wake arrives while its
    // attempt is in flight (no event outside the Client says when).
    (void)loop.run_until([] { return false; }, 20ms);
    b.cancel(wb.id);
    REQUIRE(loop.run_until([&] { return wb.done(); }, 2s));
    CHECK(wb.answer->error == errc::canceled);
    for (auto i : others) masters[i].resume();
    auto resumed = steady::now();
    REQUIRE(loop.run_until([&] { return wc.done(); }, 15s));
    CHECK_FALSE(wc.answer->error);
    CHECK(steady::now() - resumed < 2s);  // woken, not its 10 s timer
    REQUIRE(loop.run_until([&] { return unlocked; }, 5s));
    if (!wc.answer->error) CHECK_FALSE(unlock(loop, c, wc.answer->lock));
    a.close(nullptr);
    b.close(nullptr);
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a Cancellation ends blocking calls waiting on another thread", "[cancel][blocking]") {
  Cluster masters(3);
  Options options = masters.options();
  options.retry_delay = 10s;  // only a release or the cancel can end the wait early
  Redlock holder(masters.options());
  Redlock waiter(options);
  Result<Lock> held = holder.try_lock("busy", 30s);
  REQUIRE(held);
  Result<Lock> permit = holder.lock_permit("pool", 1, 30s, 0ms);
  REQUIRE(permit);

  Cancellation cancel;
  CHECK_FALSE(cancel.canceled());
  std::optional<Result<Lock>> lock_answer;
  std::optional<Result<Lock>> permit_answer;
  std::thread blocked([&] { lock_answer = waiter.lock("busy", 10s, 60s, cancel); });
  std::thread blocked_permit([&] { permit_answer = waiter.lock_permit("pool", 1, 10s, 60s, cancel); });
  REQUIRE(eventually([&] { return !masters.queued_on("{busy}", 1).empty(); }, 5s));
  REQUIRE(eventually([&] { return !masters.queued_on("{pool}:permit:0", 1).empty(); }, 5s));
  auto asked = steady::now();
  cancel.cancel();
  blocked.join();
  blocked_permit.join();
  CHECK(steady::now() - asked < 2s);
  REQUIRE(lock_answer);
  REQUIRE(permit_answer);
  CHECK(lock_answer->error() == errc::canceled);
  CHECK(permit_answer->error() == errc::canceled);
  CHECK(cancel.canceled());
  CHECK(held_everywhere(masters, "{busy}", held->value));

  // Cancelled already: a later call returns at once, without waiting.
  asked = steady::now();
  CHECK(waiter.lock("busy", 10s, 60s, cancel).error() == errc::canceled);
  CHECK(steady::now() - asked < 2s);
  // A fresh one does not stop a call that gets its lock.
  Cancellation unused;
  Result<Lock> free = waiter.lock("free", 10s, 5s, unused);
  REQUIRE(free);
  CHECK_FALSE(waiter.unlock(*free));
  CHECK_FALSE(holder.unlock(*held));
  CHECK_FALSE(holder.unlock(*permit));
}

TEST_CASE("a Cancellation may outlive its Redlock", "[cancel][blocking]") {
  Cluster masters(1);
  Cancellation cancel;
  {
    Redlock redlock(masters.options());
    Result<Lock> lock = redlock.lock("r", 10s, 1s, cancel);
    REQUIRE(lock);
    CHECK_FALSE(redlock.unlock(*lock));
  }
  cancel.cancel();  // nothing left to stop, nothing to crash
  CHECK(cancel.canceled());
}
