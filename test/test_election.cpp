#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster.hpp"
#include "support/fault_proxy.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

Options fenced(const Cluster& masters) {
  Options o = masters.options();
  o.fencing = true;
  return o;
}

// Fenced options whose masters are reached through a FaultProxy each (in
// `proxies`), patient enough (500 ms) for the delays a test sets there.
Options through_proxies(Cluster& masters, std::vector<std::unique_ptr<FaultProxy>>& proxies) {
  Options o = fenced(masters);
  o.masters = proxy_each(masters, proxies);
  o.command_timeout = 500ms;
  return o;
}

struct Campaign {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  std::shared_ptr<std::error_code> error = std::make_shared<std::error_code>();
  std::shared_ptr<Leader> leader = std::make_shared<Leader>();
  std::shared_ptr<std::vector<std::error_code>> lost = std::make_shared<std::vector<std::error_code>>();

  Campaign(Election& e, const std::string& value, milliseconds wait) {
    e.campaign(
        value, wait,
        [calls = calls, error = error, leader = leader](std::error_code ec, Leader l) {
          ++*calls;
          *error = ec;
          *leader = std::move(l);
        },
        [lost = lost](std::error_code ec) { lost->push_back(ec); });
  }
  bool done() const { return *calls > 0; }
  // Runs the loop until answered: it must have won.
  void wait_won(LoopFixture& loop) const {
    REQUIRE(loop.run_until([&] { return done(); }, 5s));
    REQUIRE_FALSE(*error);
  }
};

std::error_code done_of(LoopFixture& loop, const std::function<void(Election::Done)>& call) {
  auto answer = std::make_shared<std::optional<std::error_code>>();
  call([answer](std::error_code e) { *answer = e; });
  REQUIRE_FALSE(answer->has_value());  // never inside the call
  REQUIRE(loop.run_until([&] { return answer->has_value(); }, 5s));
  return **answer;
}

Leader read_leader(LoopFixture& loop, Election& e) {
  auto answer = std::make_shared<std::optional<Leader>>();
  e.leader([answer](std::error_code, Leader l) { *answer = std::move(l); });
  REQUIRE(loop.run_until([&] { return answer->has_value(); }, 5s));
  return **answer;
}

}  // namespace

TEST_CASE("an election has one leader, its term a fencing token; resign hands over within a round trip",
          "[election]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    Client b(loop.get(), fenced(masters));
    Election first(a, "scheduler", "node-a", 2s);
    Election second(b, "scheduler", "node-b", 2s);
    Campaign one(first, "a:8080", 0ms);
    one.wait_won(loop);
    CHECK(one.leader->present);
    CHECK(one.leader->id == "node-a");
    CHECK(one.leader->term > 0);

    Campaign two(second, "b:8080", 20s);
    (void)loop.run_until([&] { return two.done(); }, 2500ms);  // past the ttl: kept alive
    REQUIRE_FALSE(two.done());
    Leader now = read_leader(loop, second);
    CHECK(now.known);
    CHECK(now.id == "node-a");
    CHECK(now.value == "a:8080");
    CHECK(now.term == one.leader->term);

    auto resigned = steady::now();
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { first.resign(std::move(cb)); }));
    REQUIRE(loop.run_until([&] { return two.done(); }, 5s));
    REQUIRE_FALSE(*two.error);
    CHECK(steady::now() - resigned < 1s);
    CHECK(two.leader->term > one.leader->term);
    CHECK(one.lost->empty());  // a resign is no loss
    CHECK(read_leader(loop, first).id == "node-b");
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { second.resign(std::move(cb)); }));
    Leader none = read_leader(loop, first);
    CHECK(none.known);
    CHECK_FALSE(none.present);
    a.close(nullptr);
    b.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("proclaim changes the leader's value; a candidate that does not lead cannot", "[election]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    Election leader(a, "scheduler", "node-a", 5s);
    Election other(a, "scheduler", "node-x", 5s);
    Campaign won(leader, "v1", 0ms);
    won.wait_won(loop);
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { leader.proclaim("v2", std::move(cb)); }));
    CHECK(read_leader(loop, other).value == "v2");
    CHECK(done_of(loop, [&](Election::Done cb) { other.proclaim("mine", std::move(cb)); }) == errc::not_held);
    CHECK(done_of(loop, [&](Election::Done cb) { other.resign(std::move(cb)); }) == errc::not_held);
    CHECK(read_leader(loop, other).value == "v2");
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { leader.resign(std::move(cb)); }));
    a.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("observe reports each change in term order: a leader, its value, no leader, and a lost leadership",
          "[election]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    Client watcher(loop.get(), fenced(masters));
    Election candidate(a, "scheduler", "node-a", 1s);
    Election observer(watcher, "scheduler", "observer", 1s);
    std::vector<Leader> seen;
    observer.observe([&](const Leader& l) { seen.push_back(l); });

    Campaign won(candidate, "v1", 0ms);
    REQUIRE(loop.run_until([&] { return won.done() && !seen.empty() && seen.back().present; }, 5s));
    CHECK(seen.back().id == "node-a");
    CHECK(seen.back().term == won.leader->term);

    auto proclaimed = steady::now();
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { candidate.proclaim("v2", std::move(cb)); }));
    REQUIRE(loop.run_until([&] { return seen.back().value == "v2"; }, 5s));
    CHECK(steady::now() - proclaimed < 500ms);  // woken by the message, not a poll

    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { candidate.resign(std::move(cb)); }));
    REQUIRE(loop.run_until([&] { return !seen.back().present; }, 5s));

    // A new term, then its keys flushed from every master: the leader hears
    // its loss once, and the observer that nobody leads.
    Campaign again(candidate, "v3", 0ms);
    REQUIRE(loop.run_until([&] { return again.done() && seen.back().present; }, 5s));
    REQUIRE_FALSE(*again.error);
    CHECK(seen.back().term > won.leader->term);
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].command({"FLUSHALL"});
    REQUIRE(loop.run_until([&] { return !again.lost->empty() && !seen.back().present; }, 5s));
    (void)loop.run_until([] { return false; }, 1500ms);
    CHECK(again.lost->size() == 1);
    for (std::size_t i = 1; i < seen.size(); ++i) {
      if (seen[i].present && seen[i - 1].present) CHECK(seen[i].term >= seen[i - 1].term);
    }
    a.close(nullptr);
    watcher.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an Election needs a fenced Client, a name and an id", "[election]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client plain(loop.get(), masters.options());
    Client with_fencing(loop.get(), fenced(masters));
    CHECK_THROWS_AS(Election(plain, "x", "me", 1s), std::invalid_argument);
    CHECK_THROWS_AS(Election(with_fencing, "", "me", 1s), std::invalid_argument);
    CHECK_THROWS_AS(Election(with_fencing, "x", "a\nb", 1s), std::invalid_argument);
    CHECK_THROWS_AS(Election(with_fencing, "x", "me", 0ms), std::invalid_argument);
    Election fine(with_fencing, "x", "me", 1s);
    Campaign twice_first(fine, "v", 0ms);
    Campaign twice_second(fine, "v", 0ms);
    REQUIRE(loop.run_until([&] { return twice_first.done() && twice_second.done(); }, 5s));
    CHECK(*twice_second.error == errc::invalid_argument);
    plain.close(nullptr);
    with_fencing.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("Leadership for threads: one leader at a time, terms that only grow", "[election]") {
  Cluster masters(3);
  Options options = fenced(masters);
  options.retry_delay = 20ms;
  options.retry_jitter = 20ms;
  Redlock first(options);
  Redlock second(options);
  std::mutex mutex;
  std::vector<std::uint64_t> terms;  // in the order leaders took office
  std::atomic<int> leading{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Leadership candidate(t % 2 == 0 ? first : second, "scheduler", "node-" + std::to_string(t), 2s);
      for (int i = 0; i < 4; ++i) {
        Result<Leader> won = candidate.campaign("v", 20s);
        if (!won) {
          ++failures;
          continue;
        }
        if (++leading != 1) ++overlaps;
        {
          std::lock_guard<std::mutex> lock(mutex);
          terms.push_back(won->term);
        }
        if (candidate.proclaim("busy")) ++failures;
        std::this_thread::sleep_for(3ms);
        --leading;
        if (candidate.resign()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(overlaps == 0);
  REQUIRE(terms.size() == 16);
  for (std::size_t i = 1; i < terms.size(); ++i) CHECK(terms[i] > terms[i - 1]);
  Leadership reader(first, "scheduler", "reader", 2s);
  Result<Leader> none = reader.leader();
  REQUIRE(none);
  CHECK_FALSE(none->present);
  CHECK(reader.lost() == std::error_code{});
}

TEST_CASE("a resign between winning the lock and writing who leads gives the lock back", "[election]") {
  Cluster masters(3);
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  Options slow = through_proxies(masters, proxies);
  LoopFixture loop;
  {
    Client a(loop.get(), slow);
    Client b(loop.get(), fenced(masters));
    Election first(a, "sched", "a", 5s);
    Election second(b, "sched", "b", 5s);
    (void)loop.run_until([] { return false; }, 200ms);  // connected
    for (auto& p : proxies) p->delay(60ms);
    Campaign won(first, "v", 0ms);
    // The lock is won on the masters; who leads is not written yet.
    REQUIRE(loop.run_until([&] { return masters[0].get("{sched}").has_value(); }, 5s));
    REQUIRE_FALSE(won.done());
    auto resigned = std::make_shared<std::optional<std::error_code>>();
    first.resign([resigned](std::error_code e) { *resigned = e; });
    REQUIRE(loop.run_until([&] { return won.done() && resigned->has_value(); }, 5s));
    CHECK(*won.error == errc::canceled);
    CHECK_FALSE(**resigned);
    CHECK(held_nowhere(masters, "{sched}"));
    Campaign next(second, "w", 2s);
    REQUIRE(loop.run_until([&] { return next.done(); }, 5s));
    CHECK_FALSE(*next.error);
    CHECK(won.lost->empty());
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { second.resign(std::move(cb)); }));
    a.close(nullptr);
    b.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an Election destroyed in its own observer, or after its Client closed, is no use after free",
          "[election]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    auto watcher = std::make_unique<Election>(a, "sched", "w", 1s);
    bool told = false;
    watcher->observe([&](const Leader&) {
      told = true;
      watcher.reset();  // from inside its own callback
    });
    Election leader(a, "sched", "l", 1s);
    Campaign won(leader, "v", 0ms);
    REQUIRE(loop.run_until([&] { return told && won.done(); }, 5s));
    CHECK_FALSE(watcher);

    auto late = std::make_unique<Election>(a, "sched", "late", 1s);
    late->observe([](const Leader&) {});
    a.close(nullptr);
    // After close, what it is asked is answered closed.
    auto answer = std::make_shared<std::optional<std::error_code>>();
    late->leader([answer](std::error_code e, Leader) { *answer = e; });
    CHECK(done_of(loop, [&](Election::Done cb) { late->proclaim("x", std::move(cb)); }) == errc::closed);
    REQUIRE(loop.run_until([&] { return answer->has_value(); }, 2s));
    CHECK(**answer == errc::closed);
    late.reset();
  }
  REQUIRE(loop.close());
}

TEST_CASE("a second campaign while leading and a value over 64 KiB are invalid_argument", "[election]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    Election e(a, "sched", "a", 5s);
    Campaign first(e, "v", 0ms);
    first.wait_won(loop);
    Campaign again(e, "v", 0ms);
    REQUIRE(loop.run_until([&] { return again.done(); }, 5s));
    CHECK(*again.error == errc::invalid_argument);
    std::string big(64 * 1024 + 1, 'x');
    CHECK(done_of(loop, [&](Election::Done cb) { e.proclaim(big, std::move(cb)); }) ==
          errc::invalid_argument);
    CHECK(read_leader(loop, e).value == "v");
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { e.resign(std::move(cb)); }));
    CHECK(first.lost->empty());
    a.close(nullptr);
  }
  REQUIRE(loop.close());
}

// In these, a Client call issued just before the campaign is answered in the
// same turn, just before it: its callback runs while the campaign has won
// (the key is ours on the master) but `elected` is still on its way, past
// the point where cancel() could stop it.
TEST_CASE("an Election destroyed after its campaign won, before it was told, gives the lock back",
          "[election]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    int won_untold = 0;
    for (int i = 0; i < 5; ++i) {
      const std::string name = "won-" + std::to_string(i);
      const std::string key = "{" + name + "}";
      auto election = std::make_unique<Election>(a, name, "a", 30s);
      bool elected = false;
      bool destroyed = false;
      a.try_lock("beside-" + std::to_string(i), 30s, [&](std::error_code, Lock) {
        if (!elected && masters[0].get(key)) ++won_untold;
        election.reset();
        destroyed = true;
      });
      election->campaign(
          "v", 5s, [&](std::error_code, Leader) { elected = true; }, nullptr);
      REQUIRE(loop.run_until([&] { return destroyed; }, 5s));
      CHECK(loop.run_until([&] { return !masters[0].get(key); }, 2s));  // given back, not left for 30 s
    }
    CHECK(won_untold > 0);  // the case this test is about happened
    a.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "a campaign resigned after it won, before it was told, then run again: the first is told canceled, "
    "the second leads",
    "[election]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    int won_untold = 0;
    for (int i = 0; i < 5; ++i) {
      const std::string name = "again-" + std::to_string(i);
      Election e(a, name, "a", 30s);
      std::unique_ptr<Campaign> second;
      std::unique_ptr<Campaign> first;
      a.try_lock("beside-" + std::to_string(i), 30s, [&](std::error_code, Lock) {
        if (!first->done() && masters[0].get("{" + name + "}")) ++won_untold;
        e.resign(nullptr);
        second = std::make_unique<Campaign>(e, "v2", 5s);
      });
      first = std::make_unique<Campaign>(e, "v1", 5s);
      REQUIRE(loop.run_until([&] { return first->done() && second && second->done(); }, 5s));
      CHECK(*first->error == errc::canceled);
      CHECK_FALSE(*second->error);
      CHECK(second->leader->value == "v2");
      CHECK(masters[0].get("{" + name + "}") == e.lock().value);  // it leads with the lock the masters hold
      CHECK(read_leader(loop, e).value == "v2");
      CHECK_FALSE(done_of(loop, [&](Election::Done cb) { e.resign(std::move(cb)); }));
      CHECK(loop.run_until([&] { return !masters[0].get("{" + name + "}"); }, 2s));  // no lock() left waiting
      CHECK(first->lost->empty());
      CHECK(second->lost->empty());
    }
    CHECK(won_untold > 0);
    a.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("no callback of an Election runs after its destruction: resign's, proclaim's, a refused call's",
          "[election]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), fenced(masters));
    auto leading = std::make_unique<Election>(a, "gone", "a", 30s);
    Campaign won(*leading, "v", 0ms);
    won.wait_won(loop);
    auto idle = std::make_unique<Election>(a, "other", "b", 30s);
    int called = 0;
    leading->proclaim("w", [&](std::error_code) { ++called; });
    leading->resign([&](std::error_code) { ++called; });
    idle->campaign(
        std::string(64 * 1024 + 1, 'x'), 0ms, [&](std::error_code, Leader) { ++called; }, nullptr);
    idle->resign([&](std::error_code) { ++called; });
    idle->leader([&](std::error_code, Leader) { ++called; });
    leading.reset();
    idle.reset();
    CHECK(loop.run_until([&] { return !masters[0].get("{gone}"); }, 2s));  // the resign still went out
    (void)loop.run_until([] { return false; }, 100ms);
    CHECK(called == 0);
    a.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a renewal never writes an older value back over a proclaim sent before it", "[election]") {
  // Every command and reply 40 ms late: a proclaim is in flight 80 ms, and a
  // renewal (every 100 ms) is answered while one is, then writes the record.
  Cluster masters(3);
  std::vector<std::unique_ptr<FaultProxy>> proxies;
  Options slow = through_proxies(masters, proxies);
  LoopFixture loop;
  {
    Client a(loop.get(), slow);
    Election e(a, "sched", "a", 300ms);
    Campaign won(e, "v0", 0ms);
    won.wait_won(loop);
    for (auto& p : proxies) p->delay(40ms);
    int proclaimed = 0;
    std::vector<std::string> older;  // read back after a newer value was proclaimed
    for (int k = 1; k <= 12; ++k) {
      const std::string value = "v" + std::to_string(k);
      if (done_of(loop, [&](Election::Done cb) { e.proclaim(value, std::move(cb)); })) continue;
      ++proclaimed;
      Leader now = read_leader(loop, e);
      if (now.value != value) older.push_back(value + " read as " + now.value);
    }
    CHECK(proclaimed >= 10);
    CHECK(older.empty());
    for (const auto& o : older) UNSCOPED_INFO(o);
    CHECK(won.lost->empty());
    for (auto& p : proxies) p->pass();
    CHECK_FALSE(done_of(loop, [&](Election::Done cb) { e.resign(std::move(cb)); }));
    a.close(nullptr);
  }
  REQUIRE(loop.close());
}
