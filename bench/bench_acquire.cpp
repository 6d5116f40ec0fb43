// Acquire latency, throughput, allocations and memory of redlock, next to the
// floor (bench/floor.hpp) measured by the same binary in the same run.
// One JSON object per line on stdout; see docs/performance.md.
//
//   bench_acquire                      start 9 masters, run everything
//   bench_acquire --ports 7001,7002    use running masters (N = their count)
//   bench_acquire --smoke              a few hundred iterations, for CI
//   bench_acquire --cycles K           only K async try_lock+unlock cycles at N = 5 (for callgrind)
//   bench_acquire --floor-cycles K     only K floor SET NX + compare-and-delete cycles at N = 5
//                                      (callgrind: what raw libuv + hiredis cost per cycle)
//   bench_acquire --throughput-only S  only async throughput with S cycles in flight at N = 5, 3 s
//                                      (for a profiler)
//   bench_acquire --fencing            only async try_lock with and without Options::fencing, and
//                                      the plain and the fenced floor
//   bench_acquire --tls                only async try_lock over rediss:// and plain TCP, same masters
//   bench_acquire --primitives         only async acquire + unlock of each primitive (try_lock,
//                                      try_lock_shared, lock_all of 2 and 8, lock_permit of 4),
//                                      same masters, alternating

#include <hiredis/hiredis.h>
#include <sched.h>
#include <unistd.h>
#include <uv.h>

#include <redlock/redlock.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "alloc_counter.hpp"
#include "floor.hpp"
#include "stats.hpp"
#include "support/certificates.hpp"
#include "support/redis_server.hpp"

using namespace std::chrono_literals;
using bench::Clock;
using bench::micros;

namespace {

constexpr auto lock_ttl = 10s;

// The plain compare-and-delete, what any safe lock must run to release. The
// library's unlock is this where nobody listens for the key's release, plus
// the listening marker's DEL (lib/scripts.cpp); bench_unlock_cost measures the
// difference on a master.
constexpr const char* compare_and_delete_body =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end\n"
    "return 0\n";
constexpr const char* compare_and_delete_sha1 = "3c878575892b1b569fd5e1a5ce04d480da65b703";

struct Settings {
  std::vector<int> ns{1, 3, 5, 7, 9};
  int iterations = 2000;
  int warmup = 200;
  int repeat = 3;
  std::vector<int> in_flight{1, 16, 256};
  std::chrono::milliseconds throughput_for{1500};
  int held_locks = 10000;
  std::vector<int> ports;     // external masters
  int cycles = 0;             // callgrind mode
  bool floor_cycles = false;  // --floor-cycles: `cycles` of the floor instead
  int throughput_only = 0;    // --throughput-only: cycles in flight
  bool smoke = false;
  bool fencing_only = false;     // --fencing
  bool tls_only = false;         // --tls
  bool primitives_only = false;  // --primitives
};

std::vector<int> parse_ints(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--ports") {
      s.ports = parse_ints(value());
    } else if (arg == "--masters") {
      s.ns = parse_ints(value());
    } else if (arg == "--iterations") {
      s.iterations = std::stoi(value());
    } else if (arg == "--warmup") {
      s.warmup = std::stoi(value());
    } else if (arg == "--repeat") {
      s.repeat = std::stoi(value());
    } else if (arg == "--cycles") {
      s.cycles = std::stoi(value());
    } else if (arg == "--floor-cycles") {
      s.cycles = std::stoi(value());
      s.floor_cycles = true;
    } else if (arg == "--throughput-only") {
      s.throughput_only = std::stoi(value());
    } else if (arg == "--fencing") {
      s.fencing_only = true;
    } else if (arg == "--tls") {
      s.tls_only = true;
    } else if (arg == "--primitives") {
      s.primitives_only = true;
    } else if (arg == "--smoke") {
      s.smoke = true;
      s.ns = {1, 3};
      s.iterations = 200;
      s.warmup = 20;
      s.repeat = 1;
      s.in_flight = {16};
      s.throughput_for = 200ms;
      s.held_locks = 500;
    } else {
      throw std::invalid_argument("unknown argument " + arg);
    }
  }
  if (!s.ports.empty()) {
    // Running masters: measure the N values asked for, each on the first N ports.
    s.ns.erase(std::remove_if(s.ns.begin(), s.ns.end(),
                              [&](int n) { return n < 1 || n > static_cast<int>(s.ports.size()); }),
               s.ns.end());
    if (s.ns.empty()) s.ns = {static_cast<int>(s.ports.size())};
  }
  return s;
}

// ---- placement --------------------------------------------------------------

bool pin(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(pid, sizeof set, &set) == 0;
}

// ---- masters ----------------------------------------------------------------

class Masters {
 public:
  Masters(const Settings& s, bool pinned) {
    if (!s.ports.empty()) {
      if (s.tls_only) throw std::invalid_argument("--tls starts its own masters: no --ports");
      ports_ = s.ports;
      return;
    }
    redlock::test::ServerOptions server_options;
    if (s.tls_only) {
      certificates_ = std::make_unique<redlock::test::Certificates>();
      const auto& c = *certificates_;
      server_options.tls = redlock::test::ServerOptions::Tls{c.path("server.crt"), c.path("server.key"),
                                                             c.path("ca.crt"), false};
    }
    int n = *std::max_element(s.ns.begin(), s.ns.end());
    for (int i = 0; i < n; ++i) {
      servers_.push_back(std::make_unique<redlock::test::RedisServer>(server_options));
      ports_.push_back(servers_.back()->port());
      if (pinned) pin(servers_.back()->pid(), 1);
    }
  }

  std::vector<int> ports(int n) const { return {ports_.begin(), ports_.begin() + n}; }

  redlock::Options options(int n) const {
    redlock::Options o;
    for (int port : ports(n)) {
      redlock::Endpoint e;
      e.port = port;
      o.masters.push_back(e);
    }
    o.retry_count = 0;
    return o;
  }

  /// The same masters over rediss:// (--tls).
  redlock::Options tls_options(int n) const {
    redlock::Options o = options(n);
    for (int i = 0; i < n; ++i)
      o.masters[static_cast<std::size_t>(i)] = servers_.at(static_cast<std::size_t>(i))->tls_endpoint();
    o.tls.ca_file = certificates_->path("ca.crt");
    return o;
  }

  redlock::test::RedisServer* server(int i) {
    return i < static_cast<int>(servers_.size()) ? servers_[i].get() : nullptr;
  }

  /// Zeroes the first `n` masters' INFO commandstats (ours only: --ports gives none).
  void reset_stats(int n) {
    for (int i = 0; i < n && i < static_cast<int>(servers_.size()); ++i)
      servers_[static_cast<std::size_t>(i)]->command({"CONFIG", "RESETSTAT"});
  }

  /// The time the first `n` masters spent in commands since reset_stats
  /// (but INFO and CONFIG, ours), summed, in µs, and how many they ran; {0, 0}
  /// without ours.
  std::pair<double, long long> command_time(int n) {
    double usec = 0;
    long long calls = 0;
    for (int i = 0; i < n && i < static_cast<int>(servers_.size()); ++i) {
      std::istringstream stats(servers_[static_cast<std::size_t>(i)]->command({"INFO", "commandstats"}));
      std::string line;
      while (std::getline(stats, line)) {
        if (line.rfind("cmdstat_", 0) != 0 || line.rfind("cmdstat_info:", 0) == 0 ||
            line.rfind("cmdstat_config", 0) == 0)
          continue;
        calls += std::stoll(line.substr(line.find("calls=") + 6));
        usec += std::stod(line.substr(line.find(",usec=") + 6));
      }
    }
    return {usec, calls};
  }

 private:
  std::unique_ptr<redlock::test::Certificates> certificates_;  // --tls; outlives the servers
  std::vector<std::unique_ptr<redlock::test::RedisServer>> servers_;
  std::vector<int> ports_;
};

// ---- the measured workloads -------------------------------------------------

struct Latency {
  std::vector<double> samples;
  int errors = 0;
  double allocs_per_op = 0;
  // The masters' own time in commands per cycle, summed over the masters (the
  // primitives' series: with every master on one CPU it adds to each cycle).
  double master_us_per_cycle = 0;
  double commands_per_cycle = 0;
};

// How a workload takes its lock: try_lock by default.
using Take = std::function<void(redlock::Client&, redlock::Client::LockCallback)>;

void take_try_lock(redlock::Client& client, redlock::Client::LockCallback cb) {
  client.try_lock("bench:latency", lock_ttl, std::move(cb));
}

// One acquire at a time on the async Client; `with_unlock` times the unlock too.
Latency async_latency(const redlock::Options& o, int warmup, int iterations, bool with_unlock,
                      const Take& take = take_try_lock) {
  Latency out;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    redlock::Client client(&loop, o);
    int done = 0;
    std::uint64_t allocs = 0;
    Clock::time_point started;
    std::uint64_t allocs_at_start = 0;
    std::function<void()> step;
    auto next = [&](Clock::time_point end, std::uint64_t allocs_at_end) {
      if (done >= warmup) {
        out.samples.push_back(micros(end - started));
        allocs += allocs_at_end - allocs_at_start;
      }
      if (++done < warmup + iterations) return step();
      client.close(nullptr);
    };
    step = [&] {
      started = Clock::now();
      allocs_at_start = bench::allocations();
      take(client, [&](std::error_code error, redlock::Lock lock) {
        auto acquired = Clock::now();
        auto allocs_acquired = bench::allocations();
        if (error) {
          ++out.errors;
          return next(acquired, allocs_acquired);
        }
        client.unlock(lock, [&, acquired, allocs_acquired](std::error_code) {
          if (with_unlock) return next(Clock::now(), bench::allocations());
          next(acquired, allocs_acquired);
        });
      });
    };
    step();
    uv_run(&loop, UV_RUN_DEFAULT);
    out.allocs_per_op = iterations ? static_cast<double>(allocs) / iterations : 0;
  }
  uv_loop_close(&loop);
  return out;
}

Latency blocking_latency(const redlock::Options& o, int warmup, int iterations, bool with_unlock) {
  Latency out;
  redlock::Redlock redlock(o);
  for (int i = 0; i < warmup + iterations; ++i) {
    auto started = Clock::now();
    auto lock = redlock.try_lock("bench:latency", lock_ttl);
    auto acquired = Clock::now();
    if (!lock) ++out.errors;
    if (lock) redlock.unlock(*lock);
    auto end = with_unlock ? Clock::now() : acquired;
    if (i >= warmup) out.samples.push_back(micros(end - started));
  }
  return out;
}

std::string encode(const char* format, const std::string& a, const std::string& b = {},
                   const std::string& c = {}, const std::string& d = {}) {
  char* raw = nullptr;
  int size = redisFormatCommand(&raw, format, a.c_str(), b.c_str(), c.c_str(), d.c_str());
  std::string out(raw, static_cast<std::size_t>(size));
  redisFreeCommand(raw);
  return out;
}

// The floor releases the way any safe lock must: compare-and-delete, run
// with EVALSHA like the library does (a plain DEL would cost the masters less).
constexpr const char* floor_value = "0123456789abcdef0123456789abcdef";

std::string floor_release(const std::string& key) {
  return encode("EVALSHA %s 1 %s %s", std::string(compare_and_delete_sha1), key, floor_value);
}

std::string load_script(const std::vector<int>& ports, const char* body) {
  std::string sha;
  for (int port : ports) {
    redisContext* c = redisConnect("127.0.0.1", port);
    if (!c || c->err) throw std::runtime_error("floor: cannot connect to load a script");
    auto* reply = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", body));
    bool ok = reply && reply->type == REDIS_REPLY_STRING;
    if (ok) sha.assign(reply->str, reply->len);
    if (reply) freeReplyObject(reply);
    redisFree(c);
    if (!ok) throw std::runtime_error("floor: SCRIPT LOAD failed");
  }
  return sha;
}

void load_unlock_script(const std::vector<int>& ports) {
  if (load_script(ports, compare_and_delete_body) != compare_and_delete_sha1)
    throw std::runtime_error("floor: SCRIPT LOAD gave another SHA-1");
}

// Times `warmup + iterations` cycles on a Floor over `ports`, one after the
// other: `cycle(floor, out, done)` runs one and calls `done(end)`, the end of
// its sample (which starts just before the call). Recorded after the warmup.
using CycleDone = std::function<void(Clock::time_point)>;
using FloorCycle = std::function<void(bench::Floor&, Latency&, const CycleDone&)>;

Latency time_floor_cycles(const std::vector<int>& ports, int warmup, int iterations,
                          const FloorCycle& cycle) {
  Latency out;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    bench::Floor floor(&loop, ports);
    if (!floor.connected()) throw std::runtime_error("floor: cannot connect");
    int done = 0;
    Clock::time_point started;
    std::function<void()> step;
    CycleDone next = [&](Clock::time_point end) {
      if (done >= warmup) out.samples.push_back(micros(end - started));
      if (++done < warmup + iterations) return step();
      floor.close();
    };
    step = [&] {
      started = Clock::now();
      cycle(floor, out, next);
    };
    step();
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  return out;
}

Latency floor_latency(const std::vector<int>& ports, int warmup, int iterations, bool with_unlock) {
  load_unlock_script(ports);
  std::string set = encode("SET %s %s NX PX 10000", "bench:floor", floor_value);
  std::string del = floor_release("bench:floor");
  return time_floor_cycles(
      ports, warmup, iterations, [&](bench::Floor& floor, Latency& out, const CycleDone& done) {
        floor.fan_out(set, [&](bool yes) {
          auto acquired = Clock::now();
          if (!yes) ++out.errors;
          floor.fan_out(del, [&, acquired](bool) { done(with_unlock ? Clock::now() : acquired); });
        });
      });
}

// What any fenced Redlock pays: two rounds of scripts. The first takes the key
// and answers the master's counter floored by its clock (TIME), the second
// raises the counter where the key still holds our value. The least of what
// Options::fencing does (lib/scripts.cpp: acquire_fenced, fence), raw.
constexpr const char* floor_acquire_fenced =
    "local counter = tonumber(redis.call('get', KEYS[2]) or '0')\n"
    "local now = redis.call('time')\n"
    "now = now[1] * 1000000 + now[2]\n"
    "if now > counter then counter = now end\n"
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return counter + 1 end\n"
    "return 0\n";
constexpr const char* floor_fence =
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "if tonumber(redis.call('get', KEYS[2]) or '0') < tonumber(ARGV[2]) then\n"
    "  redis.call('set', KEYS[2], ARGV[2])\n"
    "end\n"
    "return 1\n";

// The fenced floor's latency: both rounds, then a release that is not timed.
Latency floor_fenced_latency(const std::vector<int>& ports, int warmup, int iterations) {
  load_unlock_script(ports);
  std::string acquire_sha = load_script(ports, floor_acquire_fenced);
  std::string fence_sha = load_script(ports, floor_fence);
  std::string acquire =
      encode("EVALSHA %s 2 bench:floor bench:floor:fencing %s 10000", acquire_sha, floor_value);
  std::string del = floor_release("bench:floor");
  return time_floor_cycles(
      ports, warmup, iterations, [&](bench::Floor& floor, Latency& out, const CycleDone& done) {
        floor.fan_out(acquire, [&](bool yes) {
          if (!yes) ++out.errors;
          // A token that grows, like the library's (the largest counter + 1).
          std::string token = std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                                 std::chrono::system_clock::now().time_since_epoch())
                                                 .count());
          std::string fence =
              encode("EVALSHA %s 2 bench:floor bench:floor:fencing %s %s", fence_sha, floor_value, token);
          floor.fan_out(fence, [&](bool fenced) {
            auto acquired = Clock::now();
            if (!fenced) ++out.errors;
            floor.fan_out(del, [&, acquired](bool) { done(acquired); });
          });
        });
      });
}

// try_lock + unlock cycles, `slots` of them in flight on distinct resources.
double async_throughput(const redlock::Options& o, int slots, std::chrono::milliseconds duration) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  long long cycles = 0;
  Clock::time_point started;
  double seconds = 0;
  {
    redlock::Client client(&loop, o);
    int active = slots;
    Clock::time_point end;
    std::function<void(int)> cycle = [&](int slot) {
      client.try_lock("bench:tp:" + std::to_string(slot), lock_ttl,
                      [&, slot](std::error_code error, redlock::Lock l) {
                        auto after = [&, slot](std::error_code) {
                          ++cycles;
                          if (Clock::now() < end) return cycle(slot);
                          if (--active == 0) {
                            seconds = std::chrono::duration<double>(Clock::now() - started).count();
                            client.close(nullptr);
                          }
                        };
                        if (error) return after(error);
                        client.unlock(l, after);
                      });
    };
    // One cycle first, so that connecting is not measured.
    client.try_lock("bench:tp:warm", lock_ttl, [&](std::error_code, redlock::Lock l) {
      client.unlock(l, [&](std::error_code) {
        started = Clock::now();
        end = started + duration;
        for (int s = 0; s < slots; ++s) cycle(s);
      });
    });
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  return seconds > 0 ? static_cast<double>(cycles) / seconds : 0;
}

double floor_throughput(const std::vector<int>& ports, int slots, std::chrono::milliseconds duration) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  long long cycles = 0;
  double seconds = 0;
  {
    bench::Floor floor(&loop, ports);
    if (!floor.connected()) throw std::runtime_error("floor: cannot connect");
    load_unlock_script(ports);
    std::vector<std::string> sets, dels;
    for (int s = 0; s < slots; ++s) {
      std::string key = "bench:floor:" + std::to_string(s);
      sets.push_back(encode("SET %s %s NX PX 10000", key, floor_value));
      dels.push_back(floor_release(key));
    }
    auto started = Clock::now();
    auto end = started + duration;
    int active = slots;
    std::function<void(int)> cycle = [&](int s) {
      floor.fan_out(sets[s], [&, s](bool) {
        floor.fan_out(dels[s], [&, s](bool) {
          ++cycles;
          if (Clock::now() < end) return cycle(s);
          if (--active == 0) {
            seconds = std::chrono::duration<double>(Clock::now() - started).count();
            floor.close();
          }
        });
      });
    };
    for (int s = 0; s < slots; ++s) cycle(s);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  return seconds > 0 ? static_cast<double>(cycles) / seconds : 0;
}

long long resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * sysconf(_SC_PAGESIZE);
}

long long used_memory(int port) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (!c || c->err) {
    if (c) redisFree(c);
    return 0;
  }
  auto* reply = static_cast<redisReply*>(redisCommand(c, "INFO memory"));
  long long bytes = 0;
  if (reply && reply->type == REDIS_REPLY_STRING) {
    const char* at = std::strstr(reply->str, "used_memory:");
    if (at) bytes = std::atoll(at + std::strlen("used_memory:"));
  }
  if (reply) freeReplyObject(reply);
  redisFree(c);
  return bytes;
}

// Holds `count` locks at once (256 acquisitions in flight), then releases them.
void held_locks_memory(const redlock::Options& o, const std::vector<int>& ports, int count,
                       const std::string& placement) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::vector<redlock::Lock> held;
  held.reserve(static_cast<std::size_t>(count));
  long long rss_before = 0, rss_after = 0, redis_before = used_memory(ports[0]), redis_after = 0;
  int errors = 0;
  {
    redlock::Client client(&loop, o);
    int issued = 0, answered = 0;
    std::function<void()> issue = [&] {
      int i = issued++;
      client.try_lock("bench:held:" + std::to_string(i), 60s, [&](std::error_code error, redlock::Lock l) {
        ++answered;
        if (error) {
          ++errors;
        } else {
          held.push_back(std::move(l));
        }
        if (issued < count) return issue();
        if (answered == count) uv_stop(&loop);
      });
    };
    client.try_lock("bench:held:warm", 1s, [&](std::error_code, redlock::Lock) {
      rss_before = resident_bytes();
      for (int s = 0; s < 256 && issued < count; ++s) issue();
    });
    uv_run(&loop, UV_RUN_DEFAULT);
    rss_after = resident_bytes();
    redis_after = used_memory(ports[0]);
    int released = 0;
    for (const auto& l : held) {
      client.unlock(l, [&](std::error_code) {
        if (++released == static_cast<int>(held.size())) client.close(nullptr);
      });
    }
    if (held.empty()) client.close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  bench::JsonLine()
      .add("bench", "held_locks")
      .add("impl", "redlock-async")
      .add("masters", static_cast<int>(o.masters.size()))
      .add("locks", static_cast<int>(held.size()))
      .add("errors", errors)
      .add("client_rss_bytes_per_lock", static_cast<double>(rss_after - rss_before) / count)
      .add("redis_bytes_per_lock", static_cast<double>(redis_after - redis_before) / count)
      .add("placement", placement)
      .print();
}

// ---- reporting --------------------------------------------------------------

struct Key {
  std::string bench, impl;
  int masters;
  bool operator<(const Key& o) const {
    return std::tie(bench, impl, masters) < std::tie(o.bench, o.impl, o.masters);
  }
};

class Report {
 public:
  explicit Report(std::string placement) : placement_(std::move(placement)) {}

  void latency(const std::string& bench, const std::string& impl, int n, int rep, const Latency& l) {
    auto p = bench::summarize(l.samples);
    runs_[{bench, impl, n}].push_back(p);
    bench::JsonLine line;
    line.add("bench", bench).add("impl", impl).add("masters", n).add("rep", rep);
    add_percentiles(line, p).add("iterations", l.samples.size()).add("errors", l.errors);
    if (impl == "redlock-async") line.add("allocs_per_op", l.allocs_per_op);
    if (l.commands_per_cycle > 0) {
      master_us_[{bench, impl, n}].push_back(l.master_us_per_cycle);
      line.add("master_us_per_cycle", l.master_us_per_cycle).add("commands_per_cycle", l.commands_per_cycle);
    }
    line.add("placement", placement_).print();
  }

  void throughput(const std::string& impl, int n, int slots, int rep, double per_second) {
    rates_[{"throughput:" + std::to_string(slots), impl, n}].push_back(per_second);
    bench::JsonLine()
        .add("bench", "throughput")
        .add("impl", impl)
        .add("masters", n)
        .add("in_flight", slots)
        .add("rep", rep)
        .add("cycles_per_s", per_second)
        .add("placement", placement_)
        .print();
  }

  // Medians over the repetitions, each also as a ratio to the floor's median.
  void summary() const {
    for (const auto& [key, runs] : runs_) {
      Percentiles m = median_of(runs);
      bench::JsonLine line;
      line.add("bench", key.bench).add("impl", key.impl).add("masters", key.masters).add("rep", "median");
      add_percentiles(line, m).add("reps", runs.size());
      auto floor = runs_.find({key.bench, "floor", key.masters});
      if (floor != runs_.end() && key.impl != "floor") {
        Percentiles f = median_of(floor->second);
        line.add("p50_vs_floor", m.p50 / f.p50).add("p99_vs_floor", m.p99 / f.p99);
      }
      // A variant (-tls, -fencing) against plain redlock-async in the same run.
      auto plain = runs_.find({key.bench, "redlock-async", key.masters});
      if (plain != runs_.end() && key.impl.rfind("redlock-async-", 0) == 0) {
        Percentiles p = median_of(plain->second);
        line.add("p50_vs_async", m.p50 / p.p50).add("p99_vs_async", m.p99 / p.p99);
      }
      auto one = runs_.find({key.bench, key.impl, 1});
      if (one != runs_.end() && key.masters != 1) line.add("p50_vs_n1", m.p50 / median_of(one->second).p50);
      auto spent = master_us_.find(key);
      if (spent != master_us_.end()) line.add("master_us_per_cycle", bench::median(spent->second));
      line.add("placement", placement_).print();
    }
    for (const auto& [key, rates] : rates_) {
      bench::JsonLine line;
      auto slots = std::stoi(key.bench.substr(key.bench.find(':') + 1));
      line.add("bench", "throughput")
          .add("impl", key.impl)
          .add("masters", key.masters)
          .add("in_flight", slots);
      line.add("rep", "median").add("cycles_per_s", bench::median(rates));
      auto floor = rates_.find({key.bench, "floor", key.masters});
      if (floor != rates_.end() && key.impl != "floor") {
        line.add("vs_floor", bench::median(rates) / bench::median(floor->second));
      }
      line.add("placement", placement_).print();
    }
  }

 private:
  using Percentiles = bench::Percentiles;

  static bench::JsonLine& add_percentiles(bench::JsonLine& line, const Percentiles& p) {
    return line.add("p50_us", p.p50)
        .add("p90_us", p.p90)
        .add("p99_us", p.p99)
        .add("p999_us", p.p999)
        .add("mean_us", p.mean);
  }

  static Percentiles median_of(const std::vector<Percentiles>& runs) {
    auto pick = [&](double Percentiles::*field) {
      std::vector<double> v;
      for (const auto& r : runs) v.push_back(r.*field);
      return bench::median(v);
    };
    return {pick(&Percentiles::p50), pick(&Percentiles::p90), pick(&Percentiles::p99),
            pick(&Percentiles::p999), pick(&Percentiles::mean)};
  }

  std::string placement_;
  std::map<Key, std::vector<Percentiles>> runs_;
  std::map<Key, std::vector<double>> rates_;
  std::map<Key, std::vector<double>> master_us_;  // the primitives' master time per cycle
};

int run(const Settings& s) {
  bool pinned = std::thread::hardware_concurrency() >= 2 && s.ports.empty() && pin(0, 0);
  std::string placement = pinned ? "masters cpu1, client cpu0" : (s.ports.empty() ? "unpinned" : "external");
  Masters masters(s, pinned);

  if (s.cycles > 0) {
    auto l = s.floor_cycles ? floor_latency(masters.ports(5), 100, s.cycles, true)
                            : async_latency(masters.options(5), 100, s.cycles, true);
    bench::JsonLine()
        .add("bench", s.floor_cycles ? "floor-cycles" : "cycles")
        .add("masters", 5)
        .add("cycles", s.cycles)
        .add("errors", l.errors)
        .print();
    return l.errors == 0 ? 0 : 1;
  }

  if (s.throughput_only > 0) {
    bench::JsonLine()
        .add("bench", "throughput")
        .add("impl", "redlock-async")
        .add("masters", 5)
        .add("in_flight", s.throughput_only)
        .add("cycles_per_s", async_throughput(masters.options(5), s.throughput_only, 3s))
        .print();
    return 0;
  }

  Report report(placement);
  if (s.fencing_only) {
    // The second round's cost: the same workload with and without it, alternating.
    for (int rep = 1; rep <= s.repeat; ++rep) {
      for (int n : s.ns) {
        auto o = masters.options(n);
        auto fenced = o;
        fenced.fencing = true;
        report.latency("try_lock", "floor", n, rep,
                       floor_latency(masters.ports(n), s.warmup, s.iterations, false));
        report.latency("try_lock", "floor-fenced", n, rep,
                       floor_fenced_latency(masters.ports(n), s.warmup, s.iterations));
        report.latency("try_lock", "redlock-async", n, rep, async_latency(o, s.warmup, s.iterations, false));
        report.latency("try_lock", "redlock-async-fencing", n, rep,
                       async_latency(fenced, s.warmup, s.iterations, false));
      }
    }
    report.summary();
    return 0;
  }
  if (s.primitives_only) {
    // What each primitive costs over the plain lock: the same masters, alternating.
    std::vector<std::string> two = {"bench:a", "bench:b"};
    std::vector<std::string> eight;
    for (int i = 0; i < 8; ++i) eight.push_back("bench:r" + std::to_string(i));
    const std::vector<std::pair<std::string, Take>> takes = {
        {"redlock-async", take_try_lock},
        {"redlock-async-shared",
         [](redlock::Client& c, redlock::Client::LockCallback cb) {
           c.try_lock_shared("bench:latency", lock_ttl, std::move(cb));
         }},
        {"redlock-async-all-2",
         [two](redlock::Client& c, redlock::Client::LockCallback cb) {
           c.lock_all(two, lock_ttl, std::chrono::milliseconds{0}, std::move(cb));
         }},
        {"redlock-async-all-8",
         [eight](redlock::Client& c, redlock::Client::LockCallback cb) {
           c.lock_all(eight, lock_ttl, std::chrono::milliseconds{0}, std::move(cb));
         }},
        {"redlock-async-permit-4",
         [](redlock::Client& c, redlock::Client::LockCallback cb) {
           c.lock_permit("bench:latency", 4, lock_ttl, std::chrono::milliseconds{0}, std::move(cb));
         }},
    };
    for (int rep = 1; rep <= s.repeat; ++rep) {
      for (int n : s.ns) {
        for (const auto& [name, take] : takes) {
          masters.reset_stats(n);
          Latency l = async_latency(masters.options(n), s.warmup, s.iterations, true, take);
          auto [usec, calls] = masters.command_time(n);
          double cycles = s.warmup + s.iterations;
          l.master_us_per_cycle = usec / cycles;
          l.commands_per_cycle = static_cast<double>(calls) / cycles;
          report.latency("acquire_unlock", name, n, rep, l);
        }
      }
    }
    report.summary();
    return 0;
  }
  if (s.tls_only) {
    // TLS's cost: the same masters over their TLS and their plain ports, alternating.
    for (int rep = 1; rep <= s.repeat; ++rep) {
      for (int n : s.ns) {
        report.latency("try_lock", "redlock-async", n, rep,
                       async_latency(masters.options(n), s.warmup, s.iterations, false));
        report.latency("try_lock", "redlock-async-tls", n, rep,
                       async_latency(masters.tls_options(n), s.warmup, s.iterations, false));
      }
    }
    report.summary();
    return 0;
  }
  for (int rep = 1; rep <= s.repeat; ++rep) {
    for (int n : s.ns) {
      auto o = masters.options(n);
      auto ports = masters.ports(n);
      for (bool with_unlock : {false, true}) {
        const char* bench = with_unlock ? "try_lock_unlock" : "try_lock";
        report.latency(bench, "floor", n, rep, floor_latency(ports, s.warmup, s.iterations, with_unlock));
        report.latency(bench, "redlock-async", n, rep, async_latency(o, s.warmup, s.iterations, with_unlock));
        report.latency(bench, "redlock-blocking", n, rep,
                       blocking_latency(o, s.warmup, s.iterations, with_unlock));
      }
    }
    int n = s.ns.back() >= 5 ? 5 : s.ns.back();
    for (int slots : s.in_flight) {
      report.throughput("floor", n, slots, rep, floor_throughput(masters.ports(n), slots, s.throughput_for));
      report.throughput("redlock-async", n, slots, rep,
                        async_throughput(masters.options(n), slots, s.throughput_for));
    }
    // One master of five paused: the other four form every quorum.
    if (auto* paused = masters.server(4); paused && std::find(s.ns.begin(), s.ns.end(), 5) != s.ns.end()) {
      paused->pause();
      report.latency("try_lock_one_paused", "redlock-async", 5, rep,
                     async_latency(masters.options(5), s.warmup, s.iterations, false));
      paused->resume();
    }
  }
  report.summary();
  int n = s.ns.back() >= 5 ? 5 : s.ns.back();
  held_locks_memory(masters.options(n), masters.ports(n), s.held_locks, placement);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_acquire: %s\n", e.what());
    return 1;
  }
}
