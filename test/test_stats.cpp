#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

std::uint64_t granted(const Stats& s) {
  std::uint64_t n = 0;
  for (const MasterStats& m : s.masters) n += m.votes_granted;
  return n;
}

bool all_up(const Client& client) {
  Stats s = client.stats();
  for (const MasterStats& m : s.masters)
    if (m.state != MasterState::up) return false;
  return true;
}

bool contains(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

}  // namespace

TEST_CASE("the histogram counts each sample in its bucket and estimates quantiles by bucket bounds",
          "[stats]") {
  LatencyHistogram h;
  CHECK(h.quantile(0.5) == 0us);
  h.record(10us);   // bucket 0 (<= 25)
  h.record(25us);   // bucket 0: the bounds are inclusive
  h.record(26us);   // bucket 1 (<= 50)
  h.record(700us);  // bucket 5 (<= 1000)
  h.record(9s);     // above the last bound
  h.record(-5us);   // counts as 0
  CHECK(h.count() == 6);
  CHECK(h.sum() == 10us + 25us + 26us + 700us + 9s);
  CHECK(h.bucket(0) == 3);
  CHECK(h.bucket(1) == 1);
  CHECK(h.bucket(5) == 1);
  CHECK(h.bucket(LatencyHistogram::bounds_us.size()) == 1);
  CHECK(h.bucket(LatencyHistogram::buckets) == 0);
  CHECK(h.quantile(0.5) == 25us);
  CHECK(h.quantile(0.6) == 50us);
  CHECK(h.quantile(0.8) == 1000us);
  CHECK(h.quantile(1.0) == 2500000us);
  CHECK(h.quantile(std::nan("")) == 25us);  // as 0: the smallest sample's bucket
  CHECK(h.quantile(-1.0) == 25us);
  CHECK(h.quantile(7.0) == 2500000us);
}

TEST_CASE("Prometheus text: cumulative buckets, escaped labels, every family typed", "[stats]") {
  Stats s;
  MasterStats m;
  m.endpoint = R"(redis://a"b\c:1)";
  m.state = MasterState::quarantined;
  m.role = "master";
  m.votes_granted = 7;
  m.timeouts = 2;
  m.rtt = 250us;
  s.masters.push_back(m);
  s.acquire.ok = 3;
  s.acquire.not_acquired = 1;
  s.lost.expired = 4;
  s.acquire_latency.record(30us);
  s.acquire_latency.record(400us);
  std::string text = to_prometheus(s, "rl");
  std::string master = R"(master="redis://a\"b\\c:1")";
  CHECK(contains(text, "rl_master_up{" + master + "} 0\n"));
  CHECK(contains(text, "rl_master_state{" + master + R"(,state="quarantined",role="master"} 1)"));
  CHECK(contains(text, "rl_master_state{" + master + R"(,state="up",role="master"} 0)"));
  CHECK(contains(text, "rl_master_votes_total{" + master + R"(,vote="granted"} 7)"));
  CHECK(contains(text, "rl_master_timeouts_total{" + master + "} 2\n"));
  CHECK(contains(text, "rl_master_rtt_seconds{" + master + "} 0.00025\n"));
  CHECK(contains(text, R"(rl_calls_total{call="acquire",outcome="ok"} 3)"));
  CHECK(contains(text, R"(rl_calls_total{call="acquire",outcome="not_acquired"} 1)"));
  CHECK(contains(text, R"(rl_lost_total{error="expired"} 4)"));
  CHECK(contains(text, R"(rl_acquire_seconds_bucket{le="2.5e-05"} 0)"));
  CHECK(contains(text, R"(rl_acquire_seconds_bucket{le="5e-05"} 1)"));
  CHECK(contains(text, R"(rl_acquire_seconds_bucket{le="0.0005"} 2)"));
  CHECK(contains(text, R"(rl_acquire_seconds_bucket{le="+Inf"} 2)"));
  CHECK(contains(text, "rl_acquire_seconds_count 2\n"));
  CHECK(contains(text, "rl_acquire_seconds_sum 0.00043\n"));
  // Every sample belongs to a family declared with # TYPE before it.
  std::size_t samples = 0;
  std::string typed;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      typed = line.substr(7, line.find(' ', 7) - 7);
    } else if (line.rfind('#', 0) != 0) {
      ++samples;
      INFO(line);
      CHECK(line.rfind(typed, 0) == 0);
    }
  }
  CHECK(samples > 40);
}

TEST_CASE("Prometheus text: label values are UTF-8 and the prefix a metric name", "[stats]") {
  Stats s;
  MasterStats m;
  m.endpoint = "unix:///tmp/sock\xff\xfe-caf\xc3\xa9\xed\xa0\x80.sock";  // stray bytes, é, a surrogate
  s.masters.push_back(m);
  std::string text = to_prometheus(s, "1my-app");
  const std::string replacement = "\xEF\xBF\xBD";
  CHECK(contains(text, "_my_app_master_up{master=\"unix:///tmp/sock" + replacement + replacement +
                           "-caf\xc3\xa9" + replacement + replacement + replacement + ".sock\"} 0\n"));
  CHECK_FALSE(contains(text, "my-app"));
  CHECK_FALSE(contains(text, "\n1my"));
}

TEST_CASE("calls, votes and latencies are counted as they happen", "[stats]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Client other(loop.get(), masters.options());
    REQUIRE(loop.run_until([&] { return all_up(client); }, 2s));
    Stats before = client.stats();
    REQUIRE(before.masters.size() == 3);
    CHECK(before.acquire.total() == 0);
    CHECK(granted(before) == 0);

    Answer a = try_lock(loop, client, "counted", 10s);
    REQUIRE_FALSE(a.error);
    CHECK(try_lock(loop, client, "counted", 10s).error == errc::not_acquired);
    CHECK(try_lock(loop, client, "", 10s).error == errc::invalid_argument);
    CHECK_FALSE(unlock(loop, client, a.lock));
    CHECK(unlock(loop, client, a.lock) == errc::not_held);
    Answer b = try_lock(loop, other, "counted", 10s);
    REQUIRE_FALSE(b.error);
    CHECK_FALSE(extend(loop, client, a.lock, 10s).error == std::error_code{});

    Stats s = client.stats();
    CHECK(s.acquire.ok == 1);
    CHECK(s.acquire.not_acquired == 1);
    CHECK(s.acquire.invalid_argument == 1);
    CHECK(s.acquire.total() == 3);
    CHECK(s.unlock.ok == 1);
    CHECK(s.unlock.not_held == 1);
    CHECK(s.extend.total() == 1);
    CHECK(s.extend.ok == 0);
    // Every call is timed to its answer, the refused one too.
    CHECK(s.acquire_latency.count() == 3);
    CHECK(s.unlock_latency.count() == 2);
    CHECK(s.acquire_latency.sum() > 0us);
    for (std::size_t i = 0; i < 3; ++i) {
      const MasterStats& m = s.masters[i];
      INFO("master " << i);
      CHECK(m.endpoint == masters[i].endpoint().to_string());
      CHECK(m.state == MasterState::up);
      CHECK(m.role == "master");
      CHECK(m.cause.empty());
      CHECK(m.reconnects == 0);
      CHECK(m.timeouts == 0);
    }
    // Every master answered every round: yes to the first lock and unlock,
    // no to the second lock, the second unlock and the extend. A round
    // decides at a majority, so wait for the stragglers.
    REQUIRE(loop.run_until(
        [&] {
          Stats now = client.stats();
          std::uint64_t answered = 0;
          for (const MasterStats& m : now.masters)
            answered += m.votes_granted + m.votes_refused + m.votes_failed;
          return answered == 15;
        },
        2s));
    s = client.stats();
    for (const MasterStats& m : s.masters) {
      CHECK(m.rtt.count() > 0);
      CHECK(m.rtt.count() < 1'000'000);
      CHECK(m.votes_granted == 2);
      CHECK(m.votes_refused == 3);
      CHECK(m.votes_failed == 0);
    }
    other.close(nullptr);
    client.close(nullptr);
    // Counters only grow: closing keeps them, and says why the masters are down.
    Stats closed = client.stats();
    REQUIRE(closed.masters.size() == 3);
    for (const MasterStats& m : closed.masters) {
      CHECK(m.state == MasterState::down);
      CHECK(m.cause == "the client is closed");
      CHECK(m.votes_granted == 2);
      CHECK(m.votes_refused == 3);
    }
    CHECK(closed.acquire.ok == 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a killed master: failed votes and down with a cause; restarted: up again and one reconnect",
          "[stats]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    // A round decides at two votes: wait until the third master is connected too.
    REQUIRE(loop.run_until([&] { return client.stats().masters[2].state == MasterState::up; }, 2s));
    masters[2].kill9();
    REQUIRE(loop.run_until([&] { return client.stats().masters[2].state == MasterState::down; }, 2s));
    Answer a = try_lock(loop, client, "with-two", 1s);
    REQUIRE_FALSE(a.error);  // two of three
    REQUIRE(loop.run_until([&] { return client.stats().masters[2].votes_failed >= 1; }, 2s));
    Stats s = client.stats();
    CHECK_FALSE(s.masters[2].cause.empty());
    CHECK(s.masters[0].state == MasterState::up);
    CHECK(s.masters[2].reconnects == 0);

    masters[2].restart(false);
    REQUIRE(loop.run_until([&] { return client.stats().masters[2].state == MasterState::up; }, 5s));
    s = client.stats();
    CHECK(s.masters[2].reconnects == 1);
    CHECK(s.masters[0].reconnects == 0);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master in restart quarantine is reported quarantined, and its votes fail", "[stats]") {
  Cluster masters(3);  // just started: each has been up for less than the quarantine
  LoopFixture loop;
  {
    Options options = masters.options();
    options.restart_quarantine = 60s;
    Client client(loop.get(), options);
    REQUIRE(loop.run_until(
        [&] {
          Stats s = client.stats();
          for (const MasterStats& m : s.masters)
            if (m.state != MasterState::quarantined) return false;
          return true;
        },
        2s));
    CHECK(try_lock(loop, client, "too-early", 1s).error == errc::unavailable);
    // The round decided at the second failed vote; the third comes after.
    REQUIRE(loop.run_until(
        [&] {
          Stats now = client.stats();
          for (const MasterStats& m : now.masters)
            if (m.votes_failed == 0) return false;
          return true;
        },
        2s));
    Stats s = client.stats();
    for (const MasterStats& m : s.masters) {
      CHECK(m.votes_failed >= 1);
      CHECK(m.votes_granted == 0);
      CHECK(m.cause == "in restart quarantine");
    }
    CHECK(s.acquire.unavailable == 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master behind a delaying proxy: its timeouts and the reconnect after", "[stats]") {
  Cluster masters(3);
  FaultProxy proxy(masters[0].port());
  LoopFixture loop;
  {
    Options options = masters.options();
    options.masters[0].port = proxy.port();
    options.command_timeout = 100ms;
    Client client(loop.get(), options);
    REQUIRE(loop.run_until([&] { return all_up(client); }, 2s));
    proxy.delay(1000ms);
    Answer a = try_lock(loop, client, "slow", 10s);
    REQUIRE_FALSE(a.error);  // the other two
    REQUIRE(loop.run_until([&] { return client.stats().masters[0].timeouts >= 1; }, 2s));
    Stats s = client.stats();
    CHECK(s.masters[0].votes_failed >= 1);
    CHECK(s.masters[1].timeouts == 0);
    proxy.pass();
    // The connection was dropped at the deadline (late replies must not match
    // the wrong command); the next one is a reconnect.
    REQUIRE(loop.run_until([&] { return client.stats().masters[0].reconnects >= 1; }, 5s));
    REQUIRE(loop.run_until([&] { return client.stats().masters[0].state == MasterState::up; }, 5s));
  }
  REQUIRE(loop.close());
}

TEST_CASE("kept locks: renewals, holds now, and losses by cause", "[stats][keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "kept-1", 300ms);
    Answer b = try_lock(loop, client, "kept-2", 300ms);
    REQUIRE_FALSE(a.error);
    REQUIRE_FALSE(b.error);
    int lost = 0;
    client.keep(a.lock, {}, [&](std::error_code) { ++lost; });
    client.keep(b.lock, {}, [&](std::error_code) { ++lost; });
    CHECK(client.stats().kept == 2);
    REQUIRE(loop.run_until([&] { return client.stats().renewals >= 4; }, 2s));
    for (std::size_t i = 0; i < 2; ++i) masters[i].set("{kept-2}", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return lost == 1; }, 2s));
    Stats s = client.stats();
    CHECK(s.lost.not_held == 1);
    CHECK(s.lost.total() == 1);
    CHECK(s.kept == 1);
    CHECK_FALSE(unlock(loop, client, a.lock));
    CHECK(client.stats().kept == 0);
    CHECK(client.stats().lost.total() == 1);  // an unlock is not a loss
  }
  REQUIRE(loop.close());
}

TEST_CASE("Redlock::stats from several threads while others lock", "[stats][threads]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  constexpr int per_thread = 50;
  std::atomic<int> acquired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto lock = redlock.try_lock("thread-" + std::to_string(t) + "-" + std::to_string(i), 10s);
        if (!lock) continue;
        ++acquired;
        (void)redlock.unlock(*lock);
      }
    });
  }
  std::uint64_t last = 0;
  bool monotonic = true;
  for (int i = 0; i < 200 && acquired < 2 * per_thread; ++i) {
    Stats s = redlock.stats();
    if (s.acquire.total() < last) monotonic = false;
    last = s.acquire.total();
  }
  for (auto& t : threads) t.join();
  CHECK(monotonic);
  Stats s = redlock.stats();
  CHECK(s.acquire.ok == static_cast<std::uint64_t>(acquired.load()));
  CHECK(s.acquire.total() == 2 * per_thread);
  CHECK(s.unlock.ok == static_cast<std::uint64_t>(acquired.load()));
  CHECK(s.masters.size() == 3);
}

TEST_CASE("a kept lock's loss counts in lost, and its release is no unlock() call", "[stats]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "kept-and-lost", 300ms);
    REQUIRE_FALSE(a.error);
    std::vector<std::error_code> lost;
    client.keep(a.lock, {100ms, 0ms}, [&](std::error_code e) { lost.push_back(e); });
    for (std::size_t i = 0; i < 2; ++i) masters[i].set("{kept-and-lost}", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return !lost.empty(); }, 2s));
    loop.run_until([] { return false; }, 100ms);  // the release answers
    Stats s = client.stats();
    CHECK(s.lost.not_held == 1);
    CHECK(s.unlock.total() == 0);
    CHECK(s.unlock_latency.count() == 0);
  }
  REQUIRE(loop.close());
}
