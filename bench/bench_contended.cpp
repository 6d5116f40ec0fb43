// Contended locking: K worker processes take turns on one resource on N
// masters, each looping lock -> 100 us of work -> unlock. Measures cycles/s,
// fairness (each process's share) and handoff latency (the previous holder's
// unlock answered -> the next holder's lock answered), next to the
// one-process serial bound of the same run. One JSON object per line on stdout.
//
//   bench_contended                        start 5 masters; N = 1,3,5; K = 1,2,8; redlock and redlock-polling
//   bench_contended --ports 7001,...       use running masters (pinned by the caller)
//   bench_contended --smoke                N = 5, K = 2 and 8, 1 s each, for CI
//   bench_contended --worker ...           one worker process (started by the parent)
//
// Placement: masters on CPU 1, the parent and every worker on CPU 0. Each
// worker has its own redlock::Client on its own libuv loop. Workers time
// every cycle on CLOCK_MONOTONIC (steady_clock, and node's process.hrtime,
// read the same host-wide clock) and write their records to a file that the
// parent merges by time after they exit.
//
// Implementations ("impl"):
//   redlock             Client::lock(resource, ttl, wait): woken by release notifications
//   redlock-polling     Client::try_lock in a loop, sleeping node-redlock's default
//                       retry pause between tries (200 ms +- 100 ms): waiting as peers do
//   node-redlock        bench/peers/node_redlock_contended.js, node-redlock's default
//                       retry settings (retryCount 10, retryDelay 200, retryJitter 100)
//   node-redlock-10ms   the same with retryDelay 10 (retryJitter left at its default)
//   floor               the least a handoff takes (contended_floor.hpp): raw SET NX on
//                       every master, a release message wakes the waiters, strict turns
//
// Evidence besides the timings: the masters' INFO commandstats, reset before
// each run, give the acquire votes asked for and refused, deletes and
// publishes, per acquisition.

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <redlock/redlock.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "contended_floor.hpp"
#include "stats.hpp"
#include "support/redis_server.hpp"

#ifndef BENCH_NODE_WORKER
#define BENCH_NODE_WORKER "bench/peers/node_redlock_contended.js"
#endif

using namespace std::chrono_literals;

namespace {

namespace fs = std::filesystem;

constexpr std::chrono::milliseconds lock_ttl = 10s;
// How long one lock() call of the redlock impl waits before it gives up
// (answered errc::timeout, counted as an error, and called again).
constexpr std::chrono::milliseconds lock_wait = 5s;
constexpr std::size_t max_cycles_per_worker = 2'000'000;
// After the window: workers finish the cycle they are in, then exit; the
// parent kills any that has not exited `exit_grace` after the window.
constexpr auto worker_close_after = 4s;
constexpr auto exit_grace = 10s;
constexpr auto ready_timeout = 30s;

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<int> parse_ints(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

std::vector<std::string> parse_words(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

bool pin(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(pid, sizeof set, &set) == 0;
}

// Every thread of `pid` (redis keeps background threads beside the main one).
bool pin_all_threads(pid_t pid, int cpu) {
  bool ok = true;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    ok = pin(static_cast<pid_t>(std::stol(task.path().filename().string())), cpu) && ok;
  }
  return ok && !ec;
}

// ---- the worker -------------------------------------------------------------

struct WorkerArgs {
  std::string impl;
  std::vector<int> ports;
  std::string resource;
  std::string out;
  int ready_fd = -1;
  int work_us = 100;
  int poll_delay_ms = 200;
  int poll_jitter_ms = 100;
};

struct Cycle {
  std::int64_t call, acquired, work_end, released;
  int attempts;  // tries (redlock-polling only; 0 where the worker cannot see them)
};

void spin_until(std::int64_t t) {
  while (now_ns() < t) {
  }
}

// Blocks until the parent sends "START_NS END_NS\n" on stdin.
bool read_go(std::int64_t& start, std::int64_t& end) {
  std::string line;
  char c = 0;
  while (line.size() < 64) {
    ssize_t r = ::read(STDIN_FILENO, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (c == '\n') break;
    line += c;
  }
  return std::sscanf(line.c_str(), "%" SCNd64 " %" SCNd64, &start, &end) == 2;
}

// Says ready on `ready_fd`, then waits for the parent's window and sleeps
// until it starts. False when the parent is gone.
bool start_window(int ready_fd, std::int64_t& start, std::int64_t& end) {
  char ready = 'R';
  if (::write(ready_fd, &ready, 1) != 1) return false;
  ::close(ready_fd);
  if (!read_go(start, end)) return false;
  timespec at{static_cast<time_t>(start / 1'000'000'000), static_cast<long>(start % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nullptr) == EINTR) {
  }
  return true;
}

// The worker's file for the parent: a "# key=value ..." header, then a line per cycle.
bool write_cycles(const std::string& path, const std::string& header, const std::vector<Cycle>& cycles) {
  std::ofstream out(path);
  out << "# " << header << "\n";
  for (const auto& c : cycles) {
    out << c.call << ' ' << c.acquired << ' ' << c.work_end << ' ' << c.released << ' ' << c.attempts << '\n';
  }
  out.close();
  return static_cast<bool>(out);
}

// The impl "floor": raw commands, no library (contended_floor.hpp).
int floor_worker_main(const WorkerArgs& a) {
  std::vector<Cycle> cycles;
  cycles.reserve(1 << 16);
  long long fallbacks = 0;
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    bench::HandoffFloor floor(&loop, a.ports, a.resource, a.work_us);
    if (!floor.ready()) {
      std::fprintf(stderr, "bench_contended worker: the floor could not connect\n");
      return 1;
    }
    std::int64_t start = 0, end = 0;
    if (!start_window(a.ready_fd, start, end)) return 1;
    uv_update_time(&loop);
    // A master that stopped answering would leave an attempt pending forever.
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    guard.data = &floor;
    auto guard_ms = static_cast<std::uint64_t>((end - now_ns()) / 1'000'000) +
                    static_cast<std::uint64_t>(std::chrono::milliseconds(worker_close_after).count());
    uv_timer_start(
        &guard, [](uv_timer_t* t) { static_cast<bench::HandoffFloor*>(t->data)->stop(); }, guard_ms, 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&guard));
    floor.run(end, [&](const bench::HandoffFloor::Cycle& c) {
      if (cycles.size() < max_cycles_per_worker) {
        cycles.push_back({c.call, c.acquired, c.work_end, c.released, c.attempts});
      }
    });
    fallbacks = floor.fallbacks();
    uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  int loop_status = uv_loop_close(&loop);
  std::string header = "impl=floor pid=" + std::to_string(::getpid()) + " errors=0 unlock_errors=0" +
                       " fallbacks=" + std::to_string(fallbacks) +
                       " loop_close=" + std::to_string(loop_status);
  return write_cycles(a.out, header, cycles) && loop_status == 0 ? 0 : 1;
}

int worker_main(const WorkerArgs& a) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::signal(SIGPIPE, SIG_IGN);
  if (a.impl == "floor") return floor_worker_main(a);
  redlock::Options o;
  for (int port : a.ports) {
    redlock::Endpoint e;
    e.port = port;
    o.masters.push_back(e);
  }
  o.retry_count = 0;
  bool polling = a.impl == "redlock-polling";
  std::vector<Cycle> cycles;
  cycles.reserve(1 << 16);
  long long errors = 0, unlock_errors = 0, closed = 0;
  std::string last_error;
  std::mt19937_64 rng(static_cast<std::uint64_t>(now_ns()) ^ static_cast<std::uint64_t>(::getpid()));
  std::uniform_int_distribution<int> poll_pause(std::max(0, a.poll_delay_ms - a.poll_jitter_ms),
                                                a.poll_delay_ms + a.poll_jitter_ms);

  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    redlock::Client client(&loop, o);
    // Warm up on a resource of our own: connections, scripts and (for the
    // waiting impl) the subscriber connections are all up before the window.
    std::string warm = "bench:contended:warm:" + std::to_string(::getpid());
    bool warmed = false;
    auto after_warm = [&](std::error_code error, const redlock::Lock& l) {
      if (error) {
        std::fprintf(stderr, "bench_contended worker: warm-up lock: %s\n", error.message().c_str());
        uv_stop(&loop);
        return;
      }
      client.unlock(l, [&](std::error_code) {
        warmed = true;
        uv_stop(&loop);
      });
    };
    if (polling) {
      client.try_lock(warm, 2s, after_warm);
    } else {
      client.lock(warm, 2s, 5s, after_warm);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    if (!warmed) return 1;

    std::int64_t start = 0, end = 0;
    if (!start_window(a.ready_fd, start, end)) return 1;
    uv_update_time(&loop);

    bool closing = false;
    auto close = [&] {
      if (std::exchange(closing, true)) return;
      client.close(nullptr);
    };
    // redlock-polling's next try, run by poll_timer after its pause.
    std::function<void()> poll_next;
    uv_timer_t poll_timer;
    uv_timer_init(&loop, &poll_timer);
    poll_timer.data = &poll_next;
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    guard.data = &close;
    auto guard_ms = static_cast<std::uint64_t>((end - now_ns()) / 1'000'000) +
                    static_cast<std::uint64_t>(std::chrono::milliseconds(worker_close_after).count());
    uv_timer_start(
        &guard, [](uv_timer_t* t) { (*static_cast<std::function<void()>*>(t->data))(); }, guard_ms, 0);
    uv_unref(reinterpret_cast<uv_handle_t*>(&guard));

    std::function<void()> cycle;
    std::function<void(std::int64_t, int)> try_once;
    auto on_lock = [&](std::int64_t call, int attempts, std::error_code error, const redlock::Lock& l) {
      std::int64_t acquired = now_ns();
      if (error) {
        if (error == redlock::errc::closed) {
          ++closed;  // the guard closed the client after the window
        } else {
          ++errors;
          last_error = error.message();
        }
        return cycle();
      }
      spin_until(acquired + std::int64_t{a.work_us} * 1000);
      std::int64_t work_end = now_ns();
      client.unlock(l, [&, call, acquired, work_end, attempts](std::error_code unlock_error) {
        std::int64_t released = now_ns();
        if (unlock_error) ++unlock_errors;
        cycles.push_back({call, acquired, work_end, released, attempts});
        cycle();
      });
    };
    // redlock-polling: try, and after a refusal sleep the peers' retry pause.
    try_once = [&](std::int64_t call, int attempts) {
      client.try_lock(a.resource, lock_ttl,
                      [&, call, attempts](std::error_code error, const redlock::Lock& l) {
                        if (error == redlock::errc::not_acquired && !closing) {
                          poll_next = [&, call, attempts] { try_once(call, attempts + 1); };
                          uv_timer_start(
                              &poll_timer,
                              [](uv_timer_t* t) {
                                // Moved out first: the try may set the next one.
                                auto next = std::move(*static_cast<std::function<void()>*>(t->data));
                                next();
                              },
                              static_cast<std::uint64_t>(poll_pause(rng)), 0);
                          return;
                        }
                        on_lock(call, attempts, error, l);
                      });
    };
    cycle = [&] {
      if (closing || now_ns() >= end || cycles.size() >= max_cycles_per_worker) return close();
      std::int64_t call = now_ns();
      if (polling) return try_once(call, 1);
      client.lock(a.resource, lock_ttl, lock_wait,
                  [&, call](std::error_code error, const redlock::Lock& l) { on_lock(call, 0, error, l); });
    };
    cycle();
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_timer_stop(&poll_timer);  // a poll pause pending at close
    uv_close(reinterpret_cast<uv_handle_t*>(&poll_timer), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  int loop_status = uv_loop_close(&loop);

  std::string header =
      "impl=" + a.impl + " pid=" + std::to_string(::getpid()) + " errors=" + std::to_string(errors) +
      " unlock_errors=" + std::to_string(unlock_errors) + " closed=" + std::to_string(closed) +
      " loop_close=" + std::to_string(loop_status) + " last_error=" + (last_error.empty() ? "-" : last_error);
  return write_cycles(a.out, header, cycles) ? 0 : 1;
}

// ---- the parent -------------------------------------------------------------

struct Settings {
  std::vector<int> ns{1, 3, 5};
  std::vector<int> ks{1, 2, 8};
  std::vector<std::string> impls{"redlock", "redlock-polling"};
  std::chrono::milliseconds duration{10000};
  std::chrono::milliseconds serial_duration{5000};
  int work_us = 100;
  int repeat = 1;
  int rep_label = 0;  // --rep: the repetition number to print (the script runs one at a time)
  std::vector<int> ports;
  std::string node_worker = BENCH_NODE_WORKER;
  std::string node_modules;
  std::string self;
  bool smoke = false;
};

Settings parse(int argc, char** argv) {
  Settings s;
  s.self = argv[0];
  if (const char* dir = std::getenv("REDLOCK_PEERS_DIR")) s.node_modules = dir;
  if (s.node_modules.empty()) s.node_modules = "/tmp/redlock-peers";
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
    } else if (arg == "--processes") {
      s.ks = parse_ints(value());
    } else if (arg == "--impls") {
      s.impls = parse_words(value());
    } else if (arg == "--duration-ms") {
      s.duration = std::chrono::milliseconds(std::stoi(value()));
    } else if (arg == "--serial-duration-ms") {
      s.serial_duration = std::chrono::milliseconds(std::stoi(value()));
    } else if (arg == "--work-us") {
      s.work_us = std::stoi(value());
    } else if (arg == "--repeat") {
      s.repeat = std::stoi(value());
    } else if (arg == "--rep") {
      s.rep_label = std::stoi(value());
    } else if (arg == "--node-worker") {
      s.node_worker = value();
    } else if (arg == "--node-modules") {
      s.node_modules = value();
    } else if (arg == "--smoke") {
      s.smoke = true;
      s.ns = {5};
      s.ks = {2, 8};
      s.duration = 1000ms;
      s.serial_duration = 1000ms;
    } else {
      throw std::invalid_argument("unknown argument " + arg);
    }
  }
  int most = *std::max_element(s.ns.begin(), s.ns.end());
  if (!s.ports.empty() && most > static_cast<int>(s.ports.size())) {
    throw std::invalid_argument("--masters asks for more masters than --ports gives");
  }
  for (const auto& impl : s.impls) {
    if (impl != "redlock" && impl != "redlock-polling" && impl != "node-redlock" &&
        impl != "node-redlock-10ms" && impl != "floor") {
      throw std::invalid_argument("unknown impl " + impl);
    }
  }
  return s;
}

class Masters {
 public:
  Masters(const Settings& s, bool pinned) {
    if (!s.ports.empty()) {
      ports_ = s.ports;
      return;
    }
    int n = *std::max_element(s.ns.begin(), s.ns.end());
    for (int i = 0; i < n; ++i) {
      servers_.push_back(std::make_unique<redlock::test::RedisServer>());
      ports_.push_back(servers_.back()->port());
      if (pinned) pin_all_threads(servers_.back()->pid(), 1);
    }
  }
  std::vector<int> ports(int n) const { return {ports_.begin(), ports_.begin() + n}; }

 private:
  std::vector<std::unique_ptr<redlock::test::RedisServer>> servers_;
  std::vector<int> ports_;
};

// Blocking commands to the masters for the statistics, outside the window.
std::string command_text(int port, const char* command) {
  timeval timeout{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeout);
  if (!c || c->err) {
    if (c) redisFree(c);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  redisSetTimeout(c, timeout);
  auto* reply = static_cast<redisReply*>(redisCommand(c, command));
  std::string text;
  if (reply && (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)) {
    text.assign(reply->str, reply->len);
  }
  if (reply) freeReplyObject(reply);
  redisFree(c);
  return text;
}

// cmdstat_NAME:calls=X,... summed over the masters (commands run inside
// scripts count under their own names).
std::map<std::string, long long> command_calls(const std::vector<int>& ports) {
  std::map<std::string, long long> calls;
  for (int port : ports) {
    std::istringstream info(command_text(port, "INFO commandstats"));
    for (std::string line; std::getline(info, line);) {
      if (line.rfind("cmdstat_", 0) != 0) continue;
      auto colon = line.find(':');
      auto at = line.find("calls=");
      if (colon == std::string::npos || at == std::string::npos) continue;
      calls[line.substr(8, colon - 8)] += std::atoll(line.c_str() + at + 6);
    }
  }
  return calls;
}

struct Spawned {
  pid_t pid = -1;
  int go_fd = -1;
  std::string out;
};

// fork + exec, pinned to CPU 0, dying with the parent. `argv` is prepared
// before fork; between fork and exec only async-signal-safe calls.
Spawned spawn(const std::vector<std::string>& args, int ready_write, const std::string& out, bool pinned) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<char*> c_args;
  c_args.reserve(args.size() + 1);
  for (const auto& x : args) c_args.push_back(const_cast<char*>(x.c_str()));
  c_args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (pinned) pin(0, 0);
    ::dup2(go[0], STDIN_FILENO);  // dup2 clears O_CLOEXEC on the copy
    int flags = ::fcntl(ready_write, F_GETFD);
    ::fcntl(ready_write, F_SETFD, flags & ~FD_CLOEXEC);
    ::execvp(c_args[0], c_args.data());
    ::_exit(127);
  }
  ::close(go[0]);
  return {pid, go[1], out};
}

struct RunResult {
  std::vector<std::vector<Cycle>> per_worker;
  std::vector<std::string> headers;
  std::map<std::string, long long> calls;
  std::int64_t start = 0, end = 0;
  int killed = 0;
  double foreign_cpu = 0;    // share of the machine's CPU time used by processes other than ours
  double steal_cpu = 0;      // share stolen by the hypervisor
  double busy_cpu = 0;       // share of the machine's CPU time spent in any process
  double interrupt_cpu = 0;  // share spent in interrupts
  double context_switches_per_s = 0;
  int failed = 0;
};

// ---- other load on the machine ----------------------------------------------
// CPU time (clock ticks) of every CPU from /proc/stat: spent in processes
// (user, nice, system; interrupts cannot be told apart by owner) and stolen
// by the hypervisor (this machine is a VM: its vCPUs wait while others run).
// Also the time in interrupts (irq, softirq: loopback TCP is processed
// there) and the context switches so far (the "ctxt" line).
struct MachineTicks {
  long long busy = 0, steal = 0, interrupts = 0, context_switches = 0;
};
MachineTicks machine_ticks() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  MachineTicks ticks{user + nice + system, steal, irq + softirq, 0};
  std::string line;
  while (std::getline(stat, line)) {
    if (line.rfind("ctxt ", 0) == 0) ticks.context_switches = std::atoll(line.c_str() + 5);
  }
  return ticks;
}

// utime + stime of one process (clock ticks); 0 when it is gone.
long long process_ticks(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return utime + stime;
}

long long rusage_ticks(int who) {
  rusage u{};
  getrusage(who, &u);
  auto us = [](const timeval& t) { return static_cast<long long>(t.tv_sec) * 1'000'000 + t.tv_usec; };
  return (us(u.ru_utime) + us(u.ru_stime)) * sysconf(_SC_CLK_TCK) / 1'000'000;
}

std::vector<pid_t> master_pids(const std::vector<int>& ports) {
  std::vector<pid_t> pids;
  for (int port : ports) {
    std::string info = command_text(port, "INFO server");
    auto at = info.find("process_id:");
    if (at != std::string::npos) pids.push_back(static_cast<pid_t>(std::atol(info.c_str() + at + 11)));
  }
  return pids;
}

std::vector<std::string> worker_command(const Settings& s, const std::string& impl,
                                        const std::vector<int>& ports, const std::string& resource,
                                        int ready_fd, const std::string& out) {
  if (impl.rfind("node-redlock", 0) == 0) {
    std::vector<std::string> args{"node",       s.node_worker,
                                  "--ports",    join(ports),
                                  "--resource", resource,
                                  "--out",      out,
                                  "--ready-fd", std::to_string(ready_fd),
                                  "--work-us",  std::to_string(s.work_us),
                                  "--ttl-ms",   std::to_string(lock_ttl.count()),
                                  "--modules",  s.node_modules,
                                  "--impl",     impl};
    if (impl == "node-redlock-10ms") args.insert(args.end(), {"--retry-delay", "10"});
    return args;
  }
  return {s.self,       "--worker",
          "--impl",     impl,
          "--ports",    join(ports),
          "--resource", resource,
          "--out",      out,
          "--ready-fd", std::to_string(ready_fd),
          "--work-us",  std::to_string(s.work_us)};
}

RunResult run_once(const Settings& s, const std::string& impl, const std::vector<int>& ports, int k,
                   std::chrono::milliseconds duration, const std::string& resource, bool pinned) {
  RunResult r;
  char dir_template[] = "/tmp/bench-contended.XXXXXX";
  if (!::mkdtemp(dir_template)) throw std::runtime_error("mkdtemp failed");
  std::string dir = dir_template;
  for (int port : ports) command_text(port, "CONFIG RESETSTAT");

  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<Spawned> workers;
  auto kill_all = [&] {
    for (auto& w : workers) {
      if (w.pid > 0) {
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, nullptr, 0);
        w.pid = -1;
      }
    }
  };
  try {
    for (int i = 0; i < k; ++i) {
      std::string out = dir + "/worker-" + std::to_string(i);
      workers.push_back(
          spawn(worker_command(s, impl, ports, resource, ready[1], out), ready[1], out, pinned));
    }
    ::close(ready[1]);
    ready[1] = -1;
    // Every worker connected and warmed up.
    int ready_count = 0;
    auto ready_deadline = std::chrono::steady_clock::now() + ready_timeout;
    while (ready_count < k) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(ready_deadline -
                                                                        std::chrono::steady_clock::now());
      if (left <= 0ms) throw std::runtime_error(impl + ": workers not ready in time");
      pollfd p{ready[0], POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        for (auto& w : workers) {
          if (::waitpid(w.pid, nullptr, WNOHANG) == w.pid) {
            w.pid = -1;
            throw std::runtime_error(impl + ": a worker exited before it was ready");
          }
        }
        continue;
      }
      char buf[16];
      ssize_t got = ::read(ready[0], buf, sizeof buf);
      if (got <= 0) throw std::runtime_error(impl + ": a worker exited before it was ready");
      ready_count += static_cast<int>(got);
    }
    ::close(ready[0]);
    ready[0] = -1;
    // Other load: the machine's busy CPU time during the run less what the
    // masters, this process and the workers (from now on) used.
    auto masters = master_pids(ports);
    auto ours_ticks = [&] {
      long long t = rusage_ticks(RUSAGE_SELF) + rusage_ticks(RUSAGE_CHILDREN);
      for (pid_t m : masters) t += process_ticks(m);
      return t;
    };
    long long workers_before = 0;
    for (const auto& w : workers) workers_before += process_ticks(w.pid);
    MachineTicks machine_before = machine_ticks();
    long long ours_before = ours_ticks() + workers_before;
    auto measured_from = now_ns();
    r.start = now_ns() + 50'000'000;
    r.end = r.start + std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count();
    std::string go = std::to_string(r.start) + " " + std::to_string(r.end) + "\n";
    for (auto& w : workers) {
      if (::write(w.go_fd, go.data(), go.size()) != static_cast<ssize_t>(go.size())) {
        throw std::runtime_error("cannot start a worker");
      }
      ::close(w.go_fd);
      w.go_fd = -1;
    }
    // Every worker exits by itself shortly after the window; bounded wait.
    std::int64_t kill_at = r.end + std::chrono::duration_cast<std::chrono::nanoseconds>(exit_grace).count();
    int running = k;
    while (running > 0) {
      for (auto& w : workers) {
        if (w.pid <= 0) continue;
        int status = 0;
        pid_t done = ::waitpid(w.pid, &status, WNOHANG);
        if (done == w.pid) {
          if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++r.failed;
          w.pid = -1;
          --running;
        }
      }
      if (running == 0) break;
      if (now_ns() >= kill_at) {
        for (auto& w : workers) {
          if (w.pid > 0) ++r.killed;
        }
        kill_all();
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    MachineTicks machine_after = machine_ticks();
    long long foreign = (machine_after.busy - machine_before.busy) - (ours_ticks() - ours_before);
    double available = static_cast<double>(now_ns() - measured_from) / 1e9 *
                       static_cast<double>(sysconf(_SC_CLK_TCK)) *
                       static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));
    r.foreign_cpu = available > 0 ? std::max(0.0, static_cast<double>(foreign) / available) : 0;
    r.steal_cpu =
        available > 0 ? static_cast<double>(machine_after.steal - machine_before.steal) / available : 0;
    r.busy_cpu =
        available > 0 ? static_cast<double>(machine_after.busy - machine_before.busy) / available : 0;
    r.interrupt_cpu =
        available > 0 ? static_cast<double>(machine_after.interrupts - machine_before.interrupts) / available
                      : 0;
    r.context_switches_per_s =
        static_cast<double>(machine_after.context_switches - machine_before.context_switches) /
        (static_cast<double>(now_ns() - measured_from) / 1e9);
  } catch (...) {
    kill_all();
    for (int fd : ready) {
      if (fd >= 0) ::close(fd);
    }
    fs::remove_all(dir);
    throw;
  }
  r.calls = command_calls(ports);
  for (const auto& w : workers) {
    std::ifstream in(w.out);
    std::vector<Cycle> cycles;
    std::string header;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind('#', 0) == 0) {
        header = line;
        continue;
      }
      Cycle c{};
      std::istringstream fields(line);
      if (fields >> c.call >> c.acquired >> c.work_end >> c.released >> c.attempts) cycles.push_back(c);
    }
    r.per_worker.push_back(std::move(cycles));
    r.headers.push_back(header);
  }
  fs::remove_all(dir);
  return r;
}

// What a header line says: "# key=value key=value ...".
long long header_value(const std::string& header, const std::string& key) {
  auto at = header.find(" " + key + "=");
  return at == std::string::npos ? 0 : std::atoll(header.c_str() + at + key.size() + 2);
}

// The smoke run fails above this (see report()).
constexpr double max_smoke_votes_per_acquisition = 20;

struct Summary {
  double cycles_per_s = 0;
};

// One acquisition, times in ns.
struct Acq {
  std::int64_t call, acquired, work_end, released;
  int worker, attempts;
};

// The handoff as the waiters see it, in us: for each release that found a
// process already waiting (its lock call made before the holder called
// unlock), the release answered -> the first such waiter answered. A holder
// that takes the lock again meanwhile (barging) lengthens it; with strict
// turns it is the plain handoff. `all` is in order of acquisition. One pass
// from the end keeps the candidates (the later acquisitions whose call is
// earlier than every acquisition's between) on a stack, calls ascending.
std::vector<double> waiter_handoffs(const std::vector<Acq>& all) {
  std::vector<double> out;
  std::vector<std::size_t> candidates;  // indexes; from the top, the earliest acquired
  for (std::size_t i = all.size(); i-- > 0;) {
    auto waiting = std::partition_point(candidates.begin(), candidates.end(),
                                        [&](std::size_t j) { return all[j].call < all[i].work_end; });
    if (waiting != candidates.begin()) {
      const Acq& next = all[*std::prev(waiting)];
      out.push_back(static_cast<double>(next.acquired - all[i].released) / 1000.0);
    }
    while (!candidates.empty() && all[candidates.back()].call >= all[i].call) candidates.pop_back();
    candidates.push_back(i);
  }
  return out;
}

// The smoke run's check of waiter_handoffs on a known history: process 0
// releases (answered at 10 us) and barges (again at 20 us) while process 1,
// waiting since 5 us, gets the lock at 25 us: 15 and 5 us.
void check_waiter_handoffs() {
  std::vector<Acq> history{{0, 1'000, 9'000, 10'000, 0, 0},
                           {11'000, 12'000, 19'000, 20'000, 0, 0},
                           {5'000, 25'000, 30'000, 31'000, 1, 0}};
  std::vector<double> got = waiter_handoffs(history);
  std::sort(got.begin(), got.end());
  if (got != std::vector<double>{5.0, 15.0})
    throw std::runtime_error("waiter_handoffs: wrong on a known history");
}

Summary report(const Settings& s, const std::string& impl, int n, int k, int rep, const RunResult& r,
               const std::string& placement, double serial_bound) {
  std::vector<Acq> all;
  std::vector<long long> per_worker(static_cast<std::size_t>(k), 0);
  long long total_records = 0, attempts_seen = 0, attempts_cycles = 0;
  for (int w = 0; w < static_cast<int>(r.per_worker.size()); ++w) {
    for (const auto& c : r.per_worker[w]) {
      ++total_records;
      if (c.acquired < r.start || c.acquired >= r.end) continue;
      all.push_back({c.call, c.acquired, c.work_end, c.released, w, c.attempts});
      ++per_worker[static_cast<std::size_t>(w)];
      if (c.attempts > 0) {
        attempts_seen += c.attempts;
        ++attempts_cycles;
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const Acq& a, const Acq& b) { return a.acquired < b.acquired; });
  // handoff: the previous holder's unlock answered -> this lock answered. It
  // can be negative: a waiter woken by the release may be answered before the
  // releasing process runs its own unlock callback (both on CPU 0).
  // from_unlock_call: the previous holder called unlock -> this lock answered
  // (always positive; includes the unlock's round trip).
  // other_handoff: handoffs to another process only (not the releaser re-taking it).
  std::vector<double> handoff, other_handoff, from_unlock_call, waits;
  long long retakes = 0, overlaps = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    waits.push_back(static_cast<double>(all[i].acquired - all[i].call) / 1000.0);
    if (i == 0) continue;
    const Acq& prev = all[i - 1];
    double us = static_cast<double>(all[i].acquired - prev.released) / 1000.0;
    handoff.push_back(us);
    from_unlock_call.push_back(static_cast<double>(all[i].acquired - prev.work_end) / 1000.0);
    if (all[i].worker == prev.worker) {
      ++retakes;
    } else {
      other_handoff.push_back(us);
    }
    // The next holder can only be answered after the previous one's unlock
    // was sent, which is after its work ended.
    if (all[i].acquired < prev.work_end) ++overlaps;
  }
  std::vector<double> waiter_handoff = waiter_handoffs(all);
  double seconds = static_cast<double>(r.end - r.start) / 1e9;
  double cycles_per_s = static_cast<double>(all.size()) / seconds;
  double mean = static_cast<double>(all.size()) / k;
  double least = static_cast<double>(*std::min_element(per_worker.begin(), per_worker.end()));
  double most = static_cast<double>(*std::max_element(per_worker.begin(), per_worker.end()));
  auto h = bench::summarize(handoff);
  auto oh = bench::summarize(other_handoff);
  auto fu = bench::summarize(from_unlock_call);
  auto wt = bench::summarize(waits);
  auto wh = bench::summarize(waiter_handoff);
  long long errors = 0, unlock_errors = 0, fallbacks = 0;
  for (const auto& header : r.headers) {
    errors += header_value(header, "errors");
    unlock_errors += header_value(header, "unlock_errors");
    fallbacks += header_value(header, "fallbacks");
  }

  // Master-side counters per acquisition (every acquisition of the run,
  // including each worker's warm-up and those outside the window).
  auto calls = [&](const char* name) {
    auto it = r.calls.find(name);
    return it == r.calls.end() ? 0LL : it->second;
  };
  double acquisitions = static_cast<double>(total_records + k) * n;
  bool node = impl.rfind("node-redlock", 0) == 0;
  // Acquire votes asked for: ours SET (inside the acquire script or plain SET NX);
  // node-redlock's script asks EXISTS first and SETs only when free.
  double votes_asked = static_cast<double>(node ? calls("exists") : calls("set"));
  double votes_refused = node ? static_cast<double>(calls("exists") - calls("set"))
                              : (impl == "redlock" ? static_cast<double>(calls("pttl")) : -1);

  bench::JsonLine line;
  line.add("bench", k == 1 ? "serial_bound" : "contended")
      .add("impl", impl)
      .add("masters", n)
      .add("processes", k);
  if (rep > 0) line.add("rep", rep);
  line.add("duration_s", seconds)
      .add("work_us", s.work_us)
      .add("cycles", all.size())
      .add("cycles_per_s", cycles_per_s);
  if (serial_bound > 0) line.add("vs_serial_bound", cycles_per_s / serial_bound);
  line.add("least_served_ratio", mean > 0 ? least / mean : 0)
      .add("most_served_ratio", mean > 0 ? most / mean : 0)
      .add("handoff_p50_us", h.p50)
      .add("handoff_p90_us", h.p90)
      .add("handoff_p99_us", h.p99)
      .add("handoff_mean_us", h.mean)
      .add("from_unlock_call_p50_us", fu.p50)
      .add("from_unlock_call_p99_us", fu.p99)
      .add("other_handoffs", other_handoff.size())
      .add("other_handoff_p50_us", oh.p50)
      .add("other_handoff_p99_us", oh.p99)
      .add("retake_ratio",
           all.size() > 1 ? static_cast<double>(retakes) / static_cast<double>(all.size() - 1) : 0)
      .add("waiter_handoffs", waiter_handoff.size())
      .add("waiter_handoff_p50_us", wh.p50)
      .add("waiter_handoff_p99_us", wh.p99)
      .add("wait_p50_us", wt.p50)
      .add("wait_p99_us", wt.p99)
      .add("errors", errors)
      .add("unlock_errors", unlock_errors)
      .add("overlaps", overlaps)
      .add("votes_asked_per_acquisition", acquisitions > 0 ? votes_asked / acquisitions : 0)
      .add("votes_refused_per_acquisition",
           votes_refused >= 0 && acquisitions > 0 ? votes_refused / acquisitions : -1)
      .add("deletes_per_acquisition", acquisitions > 0 ? static_cast<double>(calls("del")) / acquisitions : 0)
      .add("publishes_per_acquisition",
           acquisitions > 0 ? static_cast<double>(calls("publish")) / acquisitions : 0);
  if (impl == "floor") line.add("fallbacks", fallbacks);
  if (attempts_cycles > 0) {
    line.add("attempts_per_acquisition",
             static_cast<double>(attempts_seen) / static_cast<double>(attempts_cycles));
  }
  line.add("foreign_cpu", r.foreign_cpu)
      .add("steal_cpu", r.steal_cpu)
      .add("busy_cpu", r.busy_cpu)
      .add("interrupt_cpu", r.interrupt_cpu)
      .add("context_switches_per_s", r.context_switches_per_s)
      .add("killed", r.killed)
      .add("failed_workers", r.failed)
      .add("placement", placement)
      .print();

  bool broken = overlaps > 0 || r.failed > 0 || r.killed > 0 || all.empty();
  if (broken) {
    throw std::runtime_error(impl + ": " + std::to_string(overlaps) + " overlaps, " +
                             std::to_string(r.failed) + " failed and " + std::to_string(r.killed) +
                             " killed workers, " + std::to_string(all.size()) + " cycles");
  }
  // A count, not a time, so it holds on a busy machine: waiters woken
  // together once split the votes in a storm (150 votes per acquisition and
  // master at K = 8, N = 5); through the gate they ask about 4.
  double votes_per_acquisition = acquisitions > 0 ? votes_asked / acquisitions : 0;
  if (s.smoke && impl == "redlock" && votes_per_acquisition > max_smoke_votes_per_acquisition) {
    throw std::runtime_error(impl + ": " + std::to_string(votes_per_acquisition) +
                             " votes per acquisition and master with " + std::to_string(k) +
                             " processes: the waiters stampede");
  }
  return {cycles_per_s};
}

int run(const Settings& s) {
  bool pinned = std::thread::hardware_concurrency() >= 2 && pin(0, 0);
  std::string placement = !pinned           ? "unpinned"
                          : s.ports.empty() ? "masters cpu1, workers cpu0"
                                            : "workers cpu0, masters as given";
  ::signal(SIGPIPE, SIG_IGN);
  if (s.smoke) check_waiter_handoffs();
  Masters masters(s, pinned);
  int run_number = 0;
  for (int rep = 1; rep <= s.repeat; ++rep) {
    int label = s.rep_label > 0 ? s.rep_label : (s.repeat > 1 ? rep : 0);
    for (int n : s.ns) {
      for (const auto& impl : s.impls) {
        double serial = 0;
        for (int k : s.ks) {
          auto duration = k == 1 ? s.serial_duration : s.duration;
          std::string resource =
              "bench:contended:" + std::to_string(::getpid()) + ":" + std::to_string(++run_number);
          auto r = run_once(s, impl, masters.ports(n), k, duration, resource, pinned);
          auto sum = report(s, impl, n, k, label, r, placement, k == 1 ? 0 : serial);
          if (k == 1) serial = sum.cycles_per_s;
        }
      }
    }
  }
  return 0;
}

int worker(int argc, char** argv) {
  WorkerArgs a;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--impl") {
      a.impl = value();
    } else if (arg == "--ports") {
      a.ports = parse_ints(value());
    } else if (arg == "--resource") {
      a.resource = value();
    } else if (arg == "--out") {
      a.out = value();
    } else if (arg == "--ready-fd") {
      a.ready_fd = std::stoi(value());
    } else if (arg == "--work-us") {
      a.work_us = std::stoi(value());
    } else if (arg == "--poll-delay-ms") {
      a.poll_delay_ms = std::stoi(value());
    } else if (arg == "--poll-jitter-ms") {
      a.poll_jitter_ms = std::stoi(value());
    } else {
      throw std::invalid_argument("unknown worker argument " + arg);
    }
  }
  return worker_main(a);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "--worker") return worker(argc, argv);
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_contended: %s\n", e.what());
    return 1;
  }
}
