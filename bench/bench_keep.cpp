// The cost of keeping many locks alive: Client::keep's batched renewals next
// to the same locks renewed one extend() at a time, at N = 5 masters of our
// own; and how soon a kept lock hears that its key was deleted on a majority,
// with the masters' keyspace notifications and without (the next renewal).
// One JSON object per line on stdout; see docs/long-holds.md.
//
//   bench_keep           1,000 and 10,000 locks, five renewal ticks each, three
//                        repetitions; 20 losses with notifications and 10
//                        without; masters on CPU 1, this process on CPU 0
//   bench_keep --smoke   100 locks, two ticks, once; 3 and 2 losses (CI: it
//                        keeps building and running)

#include <sys/resource.h>
#include <uv.h>

#include <redlock/redlock.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "placement.hpp"
#include "stats.hpp"
#include "support/cluster.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto ttl = 3000ms;
constexpr auto every = 1000ms;

// This process's CPU time (user + system), in microseconds: the client only,
// the masters are other processes.
double client_cpu_us() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(usage.ru_utime) + us(usage.ru_stime);
}

double info_field(const std::string& info, const std::string& name) {
  auto at = info.find(name + ":");
  if (at == std::string::npos) return 0;
  return std::stod(info.substr(at + name.size() + 1));
}

long long calls_of(const std::string& info, const std::string& command) {
  std::string key = "cmdstat_" + command + ":calls=";
  auto at = info.find(key);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + key.size()));
}

struct Masters {
  long long commands = 0;  // EVALSHA and EVAL calls, summed over masters
  double cpu_us = 0;       // used_cpu_user + used_cpu_sys, summed
};

Masters read_masters(redlock::test::Cluster& cluster) {
  Masters m;
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    std::string stats = cluster[i].command({"INFO", "commandstats"});
    m.commands += calls_of(stats, "evalsha") + calls_of(stats, "eval");
    std::string cpu = cluster[i].command({"INFO", "cpu"});
    m.cpu_us += (info_field(cpu, "used_cpu_user") + info_field(cpu, "used_cpu_sys")) * 1e6;
  }
  return m;
}

template <class Pred>
void run_until(uv_loop_t* loop, Pred done, Clock::time_point deadline) {
  uv_timer_t tick;
  uv_timer_init(loop, &tick);
  uv_timer_start(
      &tick, [](uv_timer_t*) {}, 1, 1);
  while (!done() && Clock::now() < deadline) uv_run(loop, UV_RUN_ONCE);
  uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
}

// Runs the loop for `length` with no timer of ours besides the one that ends
// it, so that the client's CPU time is the renewals'.
void run_for(uv_loop_t* loop, Clock::duration length) {
  uv_timer_t stop;
  uv_timer_init(loop, &stop);
  uv_timer_start(
      &stop, [](uv_timer_t* t) { uv_stop(t->loop); },
      static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(length).count()), 0);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close(reinterpret_cast<uv_handle_t*>(&stop), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
}

std::vector<redlock::Lock> acquire(uv_loop_t* loop, redlock::Client& client, const std::string& prefix,
                                   int count) {
  std::vector<redlock::Lock> locks;
  int answered = 0;
  for (int i = 0; i < count; ++i) {
    client.try_lock(prefix + std::to_string(i), ttl, [&](std::error_code e, redlock::Lock l) {
      ++answered;
      if (!e) locks.push_back(std::move(l));
    });
    if (i % 1000 == 999 || i + 1 == count) {
      run_until(
          loop, [&] { return answered == i + 1; }, Clock::now() + 30s);
    }
  }
  if (static_cast<int>(locks.size()) != count) throw std::runtime_error("could not take every lock");
  return locks;
}

// Renews `locks` for `ticks` renewal periods, batched (keep) or one extend()
// per lock per period, and prints what it cost. False when a renewal failed.
bool measure(redlock::test::Cluster& cluster, int count, int ticks, bool batched, int rep, bool pinned) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  bool ok = false;
  {
    redlock::Options options = cluster.options();
    options.command_timeout = 1000ms;  // thousands of commands in one write
    redlock::Client client(&loop, options);
    std::string prefix = std::string(batched ? "keep:" : "extend:") + std::to_string(count) + ":";
    std::vector<redlock::Lock> locks = acquire(&loop, client, prefix, count);
    long long renewals = 0;
    long long failures = 0;
    Masters before = read_masters(cluster);
    double cpu_before = client_cpu_us();
    auto started = Clock::now();
    auto until = started + ticks * every + every / 2;
    uv_timer_t timer;
    struct Extender {
      redlock::Client* client;
      std::vector<redlock::Lock>* locks;
      long long* renewals;
      long long* failures;
    } extender{&client, &locks, &renewals, &failures};
    if (batched) {
      for (const redlock::Lock& l : locks) {
        client.keep(
            l, {every, 0ms}, [&](std::error_code) { ++failures; }, [&](Clock::time_point) { ++renewals; });
      }
    } else {
      // What a watchdog without batching does: one extend per lock per period.
      uv_timer_init(&loop, &timer);
      timer.data = &extender;
      uv_timer_start(
          &timer,
          [](uv_timer_t* t) {
            auto* x = static_cast<Extender*>(t->data);
            for (redlock::Lock& l : *x->locks) {
              x->client->extend(l, ttl, [x, &l](std::error_code e, redlock::Lock renewed) {
                if (e) {
                  ++*x->failures;
                  return;
                }
                l.valid_until = renewed.valid_until;
                ++*x->renewals;
              });
            }
          },
          every.count(), every.count());
    }
    run_for(&loop, until - Clock::now());
    double cpu = client_cpu_us() - cpu_before;
    double elapsed_ticks = std::chrono::duration<double>(Clock::now() - started) / every;
    Masters after = read_masters(cluster);
    if (!batched) uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
    double per_master_per_tick = static_cast<double>(after.commands - before.commands) /
                                 static_cast<double>(cluster.size()) / elapsed_ticks;
    double r = static_cast<double>(renewals > 0 ? renewals : 1);
    std::printf(
        "{\"bench\":\"renewal\",\"impl\":\"%s\",\"masters\":%zu,\"locks\":%d,\"ticks\":%.2f,\"renewals\":%"
        "lld,"
        "\"failures\":%lld,\"client_cpu_us_per_renewal\":%.2f,\"commands_per_master_per_tick\":%.1f,"
        "\"master_cpu_us_per_renewal\":%.2f,\"rep\":%d,\"placement\":\"%s\"}\n",
        batched ? "keep-batched" : "extend-each", cluster.size(), count, elapsed_ticks, renewals, failures,
        cpu / r, per_master_per_tick, (after.cpu_us - before.cpu_us) / r, rep,
        pinned ? "masters cpu1, client cpu0" : "unpinned");
    std::fflush(stdout);
    ok = failures == 0 && renewals > 0;
    client.close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  return ok;
}

// Takes and keeps one lock per sample, deletes its key on every master at a
// random point of its renewal period, and times from the delete on the
// majority's last master to on_lost. False when a sample was not lost.
bool measure_loss(redlock::test::Cluster& cluster, bool notifications, int samples, bool pinned) {
  for (std::size_t i = 0; i < cluster.size(); ++i)
    cluster[i].command({"CONFIG", "SET", "notify-keyspace-events", notifications ? "Kgx" : ""});
  const std::size_t majority = cluster.size() / 2 + 1;
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> phase_ms(0, static_cast<int>(every.count()) - 1);
  std::vector<double> heard_ms;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    redlock::Client client(&loop, cluster.options());
    for (int i = 0; i < samples; ++i) {
      std::string resource = "loss:" + std::to_string(i);
      std::string key = "{" + resource + "}";
      bool answered = false;
      redlock::Lock lock;
      client.try_lock(resource, ttl, [&](std::error_code e, redlock::Lock l) {
        answered = true;
        if (!e) lock = std::move(l);
      });
      run_until(
          &loop, [&] { return answered; }, Clock::now() + 5s);
      if (lock.value.empty()) break;
      bool lost = false;
      Clock::time_point lost_at;
      client.keep(lock, {every, 0ms}, [&](std::error_code) {
        lost = true;
        lost_at = Clock::now();
      });
      if (notifications) {
        std::string expected = "__keyspace@0__:" + key + " 1";
        run_until(
            &loop,
            [&] {
              for (std::size_t m = 0; m < cluster.size(); ++m) {
                if (cluster[m].command({"PUBSUB", "NUMSUB", "__keyspace@0__:" + key}) != expected)
                  return false;
              }
              return true;
            },
            Clock::now() + 5s);
      }
      auto phase = Clock::now() + std::chrono::milliseconds(phase_ms(rng));
      run_until(
          &loop, [] { return false; }, phase);
      Clock::time_point deleted;
      for (std::size_t m = 0; m < cluster.size(); ++m) {
        cluster[m].command({"DEL", key});
        if (m + 1 == majority) deleted = Clock::now();
      }
      run_until(
          &loop, [&] { return lost; }, Clock::now() + 3 * every);
      if (!lost) break;
      heard_ms.push_back(std::chrono::duration<double, std::milli>(lost_at - deleted).count());
    }
    client.close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  bench::Percentiles p = bench::summarize(heard_ms);
  double max = heard_ms.empty() ? 0 : *std::max_element(heard_ms.begin(), heard_ms.end());
  std::printf(
      "{\"bench\":\"loss-heard\",\"notifications\":%s,\"masters\":%zu,\"every_ms\":%lld,\"samples\":%zu,"
      "\"p50_ms\":%.3f,\"max_ms\":%.3f,\"placement\":\"%s\"}\n",
      notifications ? "true" : "false", cluster.size(), static_cast<long long>(every.count()),
      heard_ms.size(), p.p50, max, pinned ? "masters cpu1, client cpu0" : "unpinned");
  std::fflush(stdout);
  return static_cast<int>(heard_ms.size()) == samples;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  try {
    redlock::test::Cluster cluster(5);
    std::vector<int> counts = smoke ? std::vector<int>{100} : std::vector<int>{1000, 10000};
    int ticks = smoke ? 2 : 5;
    int reps = smoke ? 1 : 3;
    bool pinned = !smoke && bench::pin_apart(cluster);
    bool ok = true;
    for (int rep = 0; rep < reps; ++rep) {
      for (int count : counts) {
        ok = measure(cluster, count, ticks, true, rep, pinned) && ok;
        ok = measure(cluster, count, ticks, false, rep, pinned) && ok;
      }
    }
    ok = measure_loss(cluster, true, smoke ? 3 : 20, pinned) && ok;
    ok = measure_loss(cluster, false, smoke ? 2 : 10, pinned) && ok;
    if (!ok) {
      std::fprintf(stderr, "bench_keep: a renewal failed, none happened, or a deleted lock was not lost\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_keep: %s\n", e.what());
    return 1;
  }
  return 0;
}
