#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
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

struct Call {
  std::shared_ptr<Answer> answer = std::make_shared<Answer>();
  Client::CallId id = 0;

  Call(Client& client, std::vector<std::string> resources, milliseconds ttl, milliseconds wait) {
    id = client.lock_all(std::move(resources), ttl, wait, [a = answer](std::error_code e, Lock l) {
      ++a->calls;
      a->error = e;
      a->lock = std::move(l);
    });
  }
  bool done() const { return answer->calls > 0; }
};

Answer lock_all(LoopFixture& loop, Client& c, std::vector<std::string> resources, milliseconds ttl,
                milliseconds wait) {
  Call call(c, std::move(resources), ttl, wait);
  REQUIRE(loop.run_until([&] { return call.done(); }, wait + 10s));
  REQUIRE(call.answer->calls == 1);
  return *call.answer;
}

}  // namespace

TEST_CASE("lock_all takes every resource or none of them", "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), masters.options());
    Client b(loop.get(), masters.options());
    Answer both = lock_all(loop, a, {"left", "right"}, 10s, 0ms);
    REQUIRE_FALSE(both.error);
    CHECK(both.lock.resource == "left");
    CHECK(both.lock.resources == std::vector<std::string>{"left", "right"});
    CHECK(both.lock.valid());
    CHECK(held_everywhere(masters, "{left}", both.lock.value));
    CHECK(held_everywhere(masters, "{right}", both.lock.value));

    // One of them held: none is taken.
    CHECK(try_lock(loop, b, "right", 10s).error == errc::not_acquired);
    CHECK(lock_all(loop, b, {"middle", "right"}, 10s, 0ms).error == errc::not_acquired);
    CHECK(held_nowhere(masters, "{middle}"));

    // extend and unlock cover all of them.
    Answer longer = extend(loop, a, both.lock, 30s);
    REQUIRE_FALSE(longer.error);
    CHECK(longer.lock.resources == both.lock.resources);
    CHECK(
        eventually([&] { return masters[1].pttl("{left}") > 20000 && masters[1].pttl("{right}") > 20000; }));
    CHECK_FALSE(unlock(loop, a, longer.lock));
    CHECK(held_nowhere(masters, "{left}"));
    CHECK(held_nowhere(masters, "{right}"));
    a.close(nullptr);
    b.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("callers naming resources in opposite orders never deadlock", "[all]") {
  Cluster masters(3);
  Options options = masters.options();
  options.retry_delay = 20ms;
  options.retry_jitter = 20ms;
  Redlock first(options);
  Redlock second(options);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Redlock& redlock = t % 2 == 0 ? first : second;
      std::vector<std::string> order =
          t % 2 == 0 ? std::vector<std::string>{"a", "b", "c"} : std::vector<std::string>{"c", "b", "a"};
      for (int i = 0; i < 8; ++i) {
        Result<Lock> lock = redlock.lock_all(order, 5s, 20s);
        if (!lock) {
          ++failures;
          continue;
        }
        if (++inside != 1) ++overlaps;
        std::this_thread::sleep_for(2ms);
        --inside;
        if (redlock.unlock(*lock)) ++failures;  // (Catch2 asserts from the test thread only)
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(overlaps == 0);
}

TEST_CASE("a lock_all waiting is woken by the release of the resource it lacked", "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter(loop.get(), masters.options());
    Answer held = try_lock(loop, holder, "b", 30s);
    REQUIRE_FALSE(held.error);
    Call call(waiter, {"a", "b"}, 10s, 20s);
    (void)loop.run_until([&] { return call.done(); }, 300ms);
    CHECK_FALSE(call.done());
    CHECK(held_nowhere(masters, "{a}"));  // it holds nothing while it waits

    auto released = steady::now();
    CHECK_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return call.done(); }, 5s));
    REQUIRE_FALSE(call.answer->error);
    CHECK(steady::now() - released < 1s);  // not its deadline, 20 s away
    CHECK(held_everywhere(masters, "{a}", call.answer->lock.value));

    // Held past its ttl by keep, then cancelled waits and timeouts leave nothing.
    Lock kept = call.answer->lock;
    std::vector<std::error_code> lost;
    waiter.keep(kept, {}, [&](std::error_code e) { lost.push_back(e); });
    Call late(holder, {"b", "c"}, 10s, 200ms);
    REQUIRE(loop.run_until([&] { return late.done(); }, 5s));
    CHECK(late.answer->error == errc::timeout);
    Call canceled(holder, {"c", "a"}, 10s, 20s);
    (void)loop.run_until([&] { return canceled.done(); }, 100ms);
    holder.cancel(canceled.id);
    REQUIRE(loop.run_until([&] { return canceled.done(); }, 2s));
    CHECK(canceled.answer->error == errc::canceled);
    CHECK(held_nowhere(masters, "{c}"));
    CHECK(lost.empty());
    CHECK_FALSE(unlock(loop, waiter, kept));
    CHECK(held_nowhere(masters, "{a}"));
    CHECK(held_nowhere(masters, "{b}"));
    holder.close(nullptr);
    waiter.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("with fencing, a lock_all's token is above every earlier token of each of its resources", "[all]") {
  Cluster masters(3);
  Options options = masters.options();
  options.fencing = true;
  LoopFixture loop;
  {
    Client c(loop.get(), options);
    Answer one = try_lock(loop, c, "x", 10s);
    REQUIRE_FALSE(one.error);
    CHECK_FALSE(unlock(loop, c, one.lock));
    Answer two = try_lock(loop, c, "y", 10s);
    REQUIRE_FALSE(two.error);
    CHECK_FALSE(unlock(loop, c, two.lock));
    Answer both = lock_all(loop, c, {"x", "y"}, 10s, 0ms);
    REQUIRE_FALSE(both.error);
    CHECK(both.lock.fencing_token > std::max(one.lock.fencing_token, two.lock.fencing_token));
    CHECK_FALSE(unlock(loop, c, both.lock));
    Answer after = try_lock(loop, c, "y", 10s);
    REQUIRE_FALSE(after.error);
    CHECK(after.lock.fencing_token > both.lock.fencing_token);
    CHECK_FALSE(unlock(loop, c, after.lock));
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock_all's unlock nobody listens for publishes nothing and leaves nothing", "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    std::vector<long long> before;  // the connections' ACL probe publishes once
    for (int i = 0; i < 3; ++i) {
      Answer held = lock_all(loop, client, {"x", "y"}, 10s, 0ms);
      REQUIRE_FALSE(held.error);
      REQUIRE(held_everywhere(masters, "{y}", held.lock.value));
      if (before.empty()) {
        for (std::size_t m = 0; m < masters.size(); ++m) before.push_back(publishes(masters[m]));
      }
      REQUIRE_FALSE(unlock(loop, client, held.lock));
      REQUIRE(gone_everywhere(masters, "{x}", held.lock.value));
      REQUIRE(gone_everywhere(masters, "{y}", held.lock.value));
    }
    for (std::size_t m = 0; m < masters.size(); ++m) {
      INFO("master " << m);
      CHECK(publishes(masters[m]) == before[m]);
      CHECK(masters[m].command({"KEYS", "*"}).empty());
    }
  }
  REQUIRE(loop.close());
}

// The second section is helper-19's review: as unlock_and_wake does for one
// key, a lock_all's unlock wakes the queue at a gate where its value is not
// (the gate was down when it was taken, restarted empty, or, here, lost the
// key) but the key is free.
TEST_CASE("a waiter queued for one of a lock_all's resources is woken by its unlock at once", "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Options polling_slowly = masters.options();
    polling_slowly.retry_delay = 10s;
    polling_slowly.retry_jitter = 0ms;
    Client waiter(loop.get(), polling_slowly);
    Answer held = lock_all(loop, holder, {"p", "q"}, 30s, 0ms);
    REQUIRE_FALSE(held.error);
    REQUIRE(held_everywhere(masters, "{q}", held.lock.value));
    auto answer = std::make_shared<Answer>();
    waiter.lock("q", 10s, 20s, [answer](std::error_code e, Lock l) {
      ++answer->calls;
      answer->error = e;
      answer->lock = std::move(l);
    });
    std::vector<std::size_t> gate;
    REQUIRE(loop.run_until([&] { return (gate = masters.queued_on("{q}", 1)).size() == 1; }, 5s));
    SECTION("the gate holds the lock_all's key") {
    }
    SECTION("the gate lost the lock_all's key") {
      // Queued, the waiter no longer hears releases once its subscription's
      // linger is over: only the queue can wake it.
      REQUIRE(loop.run_until(
          [&] {
            for (std::size_t m = 0; m < masters.size(); ++m) {
              if (masters[m].command({"PUBSUB", "NUMSUB", "{q}:released"}) != "{q}:released 0") return false;
            }
            return true;
          },
          5s));
      REQUIRE(masters[gate[0]].command({"DEL", "{q}"}) == "1");
    }
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return answer->calls > 0; }, 15s));
    REQUIRE_FALSE(answer->error);
    CHECK(steady::now() - released < scaled(500ms));  // woken, not its retry_delay of 10 s
    CHECK_FALSE(unlock(loop, waiter, answer->lock));
  }
  REQUIRE(loop.close());
}

TEST_CASE("lock_all refuses bad resource lists with invalid_argument", "[all]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client c(loop.get(), masters.options());
    CHECK(lock_all(loop, c, {}, 10s, 0ms).error == errc::invalid_argument);
    CHECK(lock_all(loop, c, {"a", "a"}, 10s, 0ms).error == errc::invalid_argument);
    CHECK(lock_all(loop, c, {"a", ""}, 10s, 0ms).error == errc::invalid_argument);
    CHECK(lock_all(loop, c, {"a", "b"}, 0ms, 0ms).error == errc::invalid_argument);
    Lock forged{"a", "00000000000000000000000000000000:1:me"};
    forged.resources = {"b", "a"};  // its first is not `resource`
    CHECK(unlock(loop, c, forged) == errc::invalid_argument);
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a waiting lock_all holds up no single-resource waiter of its Client on a free resource", "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client c(loop.get(), masters.options());
    Answer y = try_lock(loop, c, "y", 30s);
    REQUIRE_FALSE(y.error);
    Call both(c, {"x", "y"}, 10s, 20s);  // waits for y
    (void)loop.run_until([&] { return both.done(); }, 100ms);
    REQUIRE_FALSE(both.done());
    auto asked = steady::now();
    Answer x = await_answer(loop, [&](Client::LockCallback cb) { c.lock("x", 10s, 5s, std::move(cb)); });
    REQUIRE_FALSE(x.error);
    CHECK(steady::now() - asked < 1s);
    CHECK_FALSE(unlock(loop, c, x.lock));
    CHECK_FALSE(unlock(loop, c, y.lock));
    REQUIRE(loop.run_until([&] { return both.done(); }, 5s));
    CHECK_FALSE(both.answer->error);
    if (!both.answer->error) CHECK_FALSE(unlock(loop, c, both.answer->lock));
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock_all waiting for a lock that is never released wakes when its keys expire", "[all]") {
  Cluster masters(3);
  Options options = masters.options();
  options.retry_delay = 3s;  // the fallback timer far off
  options.retry_jitter = 0ms;
  LoopFixture loop;
  {
    Client holder(loop.get(), options);
    Client waiter(loop.get(), options);
    Answer brief = try_lock(loop, holder, "r", 300ms);
    REQUIRE_FALSE(brief.error);
    auto asked = steady::now();
    Call call(waiter, {"q", "r"}, 10s, 10s);
    REQUIRE(loop.run_until([&] { return call.done(); }, 5s));
    REQUIRE_FALSE(call.answer->error);
    CHECK(steady::now() - asked < 1500ms);  // about the holder's 300 ms, not the 3 s fallback
    CHECK_FALSE(unlock(loop, waiter, call.answer->lock));
    holder.close(nullptr);
    waiter.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock_all answer is never a Lock whose validity has run out", "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client c(loop.get(), masters.options());
    Redlock other(masters.options());
    int answered = 0;
    bool expired_handed_over = false;
    bool other_got_it = false;
    for (int round = 0; round < 5; ++round) {
      std::string name = "stale-" + std::to_string(round);
      c.lock_all({name}, 100ms, 0ms, [&, name](std::error_code e, Lock l) {
        ++answered;
        if (e) return;
        if (!l.valid()) expired_handed_over = true;
        if (Result<Lock> second = other.try_lock(name, 10s)) {
          other_got_it = l.valid();
          (void)other.unlock(*second);
        }
      });
      // A callback that keeps the loop busy past the lock_all's ttl.
      c.try_lock("busy-" + std::to_string(round), 10s, [](std::error_code, const Lock&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
      });
      REQUIRE(loop.run_until([&] { return answered == round + 1; }, 5s));
    }
    CHECK_FALSE(expired_handed_over);
    CHECK_FALSE(other_got_it);
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "a lock_all that does not wait marks no writer waiting; too large a list and a forged Lock are refused",
    "[all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client c(loop.get(), masters.options());
    Answer reading = await_answer(loop, [&](Client::LockCallback cb) { c.try_lock_shared("s", 10s, cb); });
    REQUIRE_FALSE(reading.error);
    CHECK(lock_all(loop, c, {"s", "t"}, 10s, 0ms).error == errc::not_acquired);
    CHECK(masters[0].command({"EXISTS", "{s}:writer-waiting"}) == "0");
    Answer second = await_answer(loop, [&](Client::LockCallback cb) { c.try_lock_shared("s", 10s, cb); });
    CHECK_FALSE(second.error);

    std::vector<std::string> big;
    for (int i = 0; i < 100; ++i) big.push_back(std::string(1000, 'a') + std::to_string(i));
    CHECK(lock_all(loop, c, big, 10s, 0ms).error == errc::invalid_argument);

    Lock forged{"k", "00000000000000000000000000000000:1:me"};
    forged.resources = {"k", "k"};
    forged.ttl = 3s;
    std::vector<std::error_code> lost;
    c.keep(forged, {}, [&](std::error_code e) { lost.push_back(e); });
    REQUIRE(loop.run_until([&] { return !lost.empty(); }, 2s));
    CHECK(lost == std::vector<std::error_code>{make_error_code(errc::invalid_argument)});
    CHECK_FALSE(unlock(loop, c, reading.lock));
    if (!second.error) CHECK_FALSE(unlock(loop, c, second.lock));
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}
