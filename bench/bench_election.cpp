// Leader election's failover and observer lag, at N = 5 masters of our own.
// One JSON object per line on stdout; see docs/performance.md.
//
//   bench_election           200 resign handovers, 10 leader deaths (ttl 1 s);
//                            masters on CPU 1, this process on CPU 0
//   bench_election --smoke   20 handovers, 2 deaths (CI: it keeps building and running)
//
// - after resign: from the leader's resign() answer to the waiting
//   candidate's `elected`;
// - after the leader's death: its process stops (here: its loop stops
//   running, so it never renews nor releases) and the waiting candidate is
//   elected when the leader's keys expire, at most a ttl after the last
//   renewal: from the stop to `elected`, against the ttl;
// - observer lag: from a new leader's `elected` to an observer (another
//   Client) reporting that term.

#include <uv.h>

#include <redlock/redlock.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "placement.hpp"
#include "support/cluster.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto ttl = 1000ms;

double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Runs `loop` until `done` or `deadline`; throws when the deadline passes.
template <class Pred>
void run_until(uv_loop_t* loop, Pred done, Clock::duration deadline, const char* what) {
  auto until = Clock::now() + deadline;
  while (!done()) {
    if (Clock::now() > until) throw std::runtime_error(std::string("bench_election: timed out ") + what);
    uv_run(loop, UV_RUN_ONCE);
  }
}

struct Loop {
  uv_loop_t loop{};
  Loop() { uv_loop_init(&loop); }
  ~Loop() {
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
  }
};

struct Result {
  std::vector<double> resign_us;  // resign answered -> next elected
  std::vector<double> death_ms;   // leader stopped -> next elected
  std::vector<double> lag_us;     // elected -> observer reported it
};

// `elected` of a campaign, and when.
struct Win {
  bool done = false;
  std::error_code error;
  redlock::Leader leader;
  Clock::time_point at{};
};

void campaign(redlock::Election& e, Win& win, std::chrono::milliseconds wait) {
  win = Win{};
  e.campaign(
      "bench", wait,
      [&win](std::error_code ec, redlock::Leader l) {
        win = Win{true, ec, std::move(l), Clock::now()};
      },
      nullptr);
}

void handovers(redlock::test::Cluster& cluster, int count, Result& out) {
  Loop l;
  redlock::Options o = cluster.options();
  o.fencing = true;
  {
    redlock::Client a(&l.loop, o), b(&l.loop, o), watcher(&l.loop, o);
    redlock::Election ea(a, "bench", "a", ttl), eb(b, "bench", "b", ttl),
        observer(watcher, "bench", "o", ttl);
    std::vector<std::pair<std::uint64_t, Clock::time_point>> seen;
    observer.observe([&](const redlock::Leader& leader) {
      if (leader.present) seen.emplace_back(leader.term, Clock::now());
    });
    Win first, next;
    campaign(ea, first, 0ms);
    run_until(
        &l.loop, [&] { return first.done; }, 5s, "for the first leader");
    if (first.error) throw std::runtime_error("bench_election: no first leader: " + first.error.message());
    redlock::Election* leader = &ea;
    redlock::Election* candidate = &eb;
    for (int i = 0; i < count; ++i) {
      campaign(*candidate, next, 10s);
      run_until(
          &l.loop, [] { return true; }, 1s, "");  // its first attempt goes out
      bool resigned = false;
      Clock::time_point resign_answered;
      leader->resign([&](std::error_code) {
        resigned = true;
        resign_answered = Clock::now();
      });
      run_until(
          &l.loop, [&] { return resigned && next.done; }, 10s, "for a handover");
      if (next.error) throw std::runtime_error("bench_election: handover failed: " + next.error.message());
      out.resign_us.push_back(micros(next.at - resign_answered));
      const std::uint64_t term = next.leader.term;
      const Clock::time_point elected = next.at;
      run_until(
          &l.loop, [&] { return !seen.empty() && seen.back().first == term; }, 5s, "for the observer");
      out.lag_us.push_back(micros(seen.back().second - elected));
      std::swap(leader, candidate);
    }
    bool done = false;
    leader->resign([&](std::error_code) { done = true; });
    run_until(
        &l.loop, [&] { return done; }, 5s, "for the last resign");
    a.close(nullptr);
    b.close(nullptr);
    watcher.close(nullptr);
  }
}

// The leader's loop stops: it neither renews nor releases, as a dead process.
void deaths(redlock::test::Cluster& cluster, int count, Result& out) {
  redlock::Options o = cluster.options();
  o.fencing = true;
  for (int i = 0; i < count; ++i) {
    Loop dead, alive;
    {
      redlock::Client doomed(&dead.loop, o), survivor(&alive.loop, o);
      auto ed = std::make_unique<redlock::Election>(doomed, "bench-death", "doomed", ttl);
      redlock::Election es(survivor, "bench-death", "survivor", ttl);
      Win first, next;
      campaign(*ed, first, 5s);
      run_until(
          &dead.loop, [&] { return first.done; }, 5s, "for the doomed leader");
      // Renewed a few times, then it stops.
      auto until = Clock::now() + 2 * ttl / 3;
      run_until(
          &dead.loop, [&] { return Clock::now() >= until; }, 5s, "");
      const Clock::time_point stopped = Clock::now();
      campaign(es, next, 10s);
      run_until(
          &alive.loop, [&] { return next.done; }, 10s, "for the survivor");
      if (next.error) throw std::runtime_error("bench_election: no survivor: " + next.error.message());
      out.death_ms.push_back(std::chrono::duration<double, std::milli>(next.at - stopped).count());
      bool resigned = false;
      es.resign([&](std::error_code) { resigned = true; });
      run_until(
          &alive.loop, [&] { return resigned; }, 5s, "for the survivor's resign");
      survivor.close(nullptr);
      ed.reset();
      doomed.close(nullptr);
    }
  }
}

void print(const char* bench, const std::vector<double>& v, const char* unit, bool pinned, int n) {
  std::printf(
      "{\"bench\":\"%s\",\"masters\":%d,\"count\":%zu,\"p50_%s\":%.1f,\"p99_%s\":%.1f,\"max_%s\":%.1f", bench,
      n, v.size(), unit, percentile(v, 0.5), unit, percentile(v, 0.99), unit,
      v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()));
  if (std::strcmp(unit, "ms") == 0) {
    std::printf(",\"ttl_ms\":%lld,\"max_vs_ttl\":%.2f", static_cast<long long>(ttl.count()),
                v.empty() ? 0.0 : *std::max_element(v.begin(), v.end()) / static_cast<double>(ttl.count()));
  }
  std::printf(",\"placement\":\"%s\"}\n", pinned ? "masters cpu1, client cpu0" : "unpinned");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
    redlock::test::Cluster cluster(5);
    bool pinned = bench::pin_apart(cluster);
    Result r;
    handovers(cluster, smoke ? 20 : 200, r);
    deaths(cluster, smoke ? 2 : 10, r);
    print("election_failover_after_resign", r.resign_us, "us", pinned, 5);
    print("election_failover_after_death", r.death_ms, "ms", pinned, 5);
    print("election_observer_lag", r.lag_us, "us", pinned, 5);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
