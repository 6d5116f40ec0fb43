// redlock-chaos: a mutual-exclusion checker. Worker processes contend on a few
// resources through the public blocking API while a fault schedule runs on
// the masters; afterwards the parent merges what every critical section
// recorded and counts the ones that overlapped. Usage: redlock-chaos --help.
#include "record.hpp"
#include "report.hpp"
#include "schedule.hpp"
#include "worker.hpp"

#include <redlock/options.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace redlock::chaos {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr const char* usage_text = R"(usage: redlock-chaos --mode MODE [options]

Starts MASTERS redis-servers on 127.0.0.1, forks PROCESSES worker processes of
THREADS threads each that loop lock -> hold 30-70% of the validity -> unlock on
RESOURCES resources through redlock::Redlock, runs the fault schedule of MODE
meanwhile, then stops the faults, lets the workers run a few more seconds, and
checks every pair of critical sections on the same resource for an overlap
inside both holders' validity. Exit status: 0 when no overlap was found, 1 on
an overlap, 2 when the run itself failed (setup, a worker, no acquisition).

modes:
  none        no faults (baseline)
  stop        SIGSTOP a minority of masters, SIGCONT later
  kill        kill -9 a minority, restart it empty after longer than the TTL
  restart     kill -9 a majority in one burst and restart it empty at once:
              safe only with --quarantine-ms; without it, the negative control
  latency     delay the traffic of 1..N masters (through a TCP proxy)
  blackhole   a proxy swallows the traffic of up to a majority
  reply-drop  a proxy forwards requests but drops the replies, up to a majority
  mixed       up to two faults at once, of every kind above (restart only with
              --quarantine-ms) plus error replies (-LOADING) and TCP resets
  clock       jump the wall clocks of any masters forward or back by up to
              half the drift allowance, and back (an LD_PRELOAD shim)
  clock-large jump up to a majority's clocks by 1-4 TTLs: beyond what Redlock
              assumes, so overlaps may happen; the register must still
              refuse every stale write
  pause-client  SIGSTOP a worker process for 1.5-4 TTLs (a GC pause past
              its validity), then SIGCONT
  partition   each worker reaches each master through a proxy of its own;
              cut some workers (never all) from a minority, then from a
              majority, and heal; or delay their traffic to some masters past
              the command timeout

options:
  --seconds S          how long the workers run (default 10); faults stop
                       2 s before the end (plus the quarantine, if any)
  --masters N          default 5
  --processes P        default 3
  --threads T          default 4
  --resources R        default 2
  --ttl-ms MS          lock TTL (default 400)
  --quarantine-ms MS   Options::restart_quarantine (default 0 = off); must be
                       at least the TTL
  --retry-count N      lock() retries (default 60: under contention a
                       waiter may need a few seconds)
  --retry-delay-ms MS  lock() retry delay, and the jitter on it (default 40)
  --seed N             the fault schedule's seed (default random)
  --expect-overlap     negative control: exit 0 only if an overlap was found
  --holds timed|kept   timed (default): hold 30-70% of the validity; kept: a
                       LockGuard keeps the lock (Client::keep) for 0.5-4 TTLs,
                       working in 1 ms steps only while the guard is neither
                       lost nor past its valid_until (as renewals moved it)
  --register MODE      fenced (default): every holder writes its fencing token
                       to a register (a redis-server no fault touches) on
                       entering and before leaving, and the register refuses
                       a token below the last it took; unfenced: it takes
                       every write (a control); none
  --expect-stale       control: exit 0 only if the register accepted a stale
                       write (a token below one it had taken before)
  --permits P          take one of P permits of each resource (lock_permit)
                       instead of its lock; checked: no two holders of one
                       permit, never more than P holders of a resource
  --counter-semaphore  with --permits: the control's semaphore, a counter per
                       master, which over-admits (needs --holds timed)
  --expect-over-admission  control: exit 0 only if more than P held at once
  --shared             two acquisitions in three are shared (lock_shared), the
                       others exclusive (lock with a wait); checked: shared
                       holders overlap only one another
  --shared-apart       with --shared, the control: readers lock another name,
                       so writers overlap them (use with --expect-overlap)
  --all                half the acquisitions take two resources at once
                       (lock_all, named in a random order), the others one;
                       checked per resource, as any lock
  --all-first-only     with --all, the control: the two-resource calls lock
                       only the first (use with --expect-overlap)
  --election           campaign in elections (Leadership, one per resource)
                       and lead for 0.5-4 ttls; checked as the lock: one
                       leader at a time within validity, terms growing
  --election-acts-after-resign  with --election, the control: a leader acts
                       on for a ttl after resigning (use with --expect-overlap)
  --observer-misreports  with --election, the observers' control: every third
                       report of a leader is recorded with term 1
  --expect-observer-regression  control: exit 0 only if an observer was seen
                       reporting a lower term after a higher
  --observer-freezes   with --election, the other observers' control: nothing
                       is recorded after an observer's first leader, as if it
                       stopped hearing changes
  --expect-late-report control: exit 0 only if an observer was seen reporting
                       a leader past its tenure's end + ttl + a round trip
  --strand             the liveness control: one acquisition in four is kept
                       on the masters but recorded as canceled and never
                       unlocked (a cancel that did not release)
  --steal-markers      the markers' control: every few ms each worker deletes
                       the resources' listening markers on every master, so
                       releases wake nobody (use with a long --retry-delay-ms
                       and --expect-stall)
  --check-stalls       fail on a stall: a resource free of recorded holders
                       for over ttl/2 while a call waited and a majority was
                       healthy (always counted; without it only reported)
  --expect-stall       control: exit 0 only if a stall was found
  --cancel             waits through a Cancellation each (lock() with a wait),
                       and a thread per worker cancels one every 0.25-1 ttl
  --list-faults        print every fault
  --keep-records DIR   keep the workers' record files in DIR

external masters (scripts/chaos.sh --compose):
  --external-ports P,P,...  use the redis-servers already listening on these
                       127.0.0.1 ports instead of starting any (--masters is
                       ignored); the proxy modes still work (the proxies run here)
  --fault-command CMD  run `CMD ACTION N...` for each fault, N the 1-based
                       master numbers, ACTION pause|resume|kill|start|restart;
                       start and restart return once the masters answer PING
                       and must leave them empty
)";

volatile std::sig_atomic_t interrupted = 0;

extern "C" void on_signal(int) {
  interrupted = 1;
}

struct Args {
  std::optional<Mode> mode;
  std::chrono::seconds seconds{10};
  int masters = 5;
  int processes = 3;
  int threads = 4;
  int resources = 2;
  milliseconds ttl{400};
  milliseconds quarantine{0};
  int retry_count = 60;
  milliseconds retry_delay{40};
  std::optional<std::uint64_t> seed;
  bool expect_overlap = false;
  bool expect_stale = false;
  bool expect_over_admission = false;
  int permits = 0;
  bool counter_semaphore = false;
  bool cancel = false;
  bool shared = false;
  bool shared_apart = false;
  bool all = false;
  bool all_first_only = false;
  bool strand = false;
  bool steal_markers = false;
  bool election = false;
  bool election_acts_after_resign = false;
  bool observer_misreports = false;
  bool expect_observer_regression = false;
  bool observer_freezes = false;
  bool expect_late_report = false;
  bool check_stalls = false;
  bool expect_stall = false;
  std::string register_mode = "fenced";
  int register_port = 0;
  std::string writes;
  bool list_faults = false;
  std::string holds = "timed";
  std::string keep_records;
  std::vector<int> external_ports;
  std::string fault_command;
  // Worker processes only: what the parent passes down.
  bool worker = false;
  int process = 0;
  pid_t parent = 0;
  std::vector<Endpoint> endpoints;
  std::string key_prefix;
  std::int64_t until_ns = 0;
  std::string out;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "redlock-chaos: %s\n\n%s", message.c_str(), usage_text);
  std::exit(2);
}

template <class T>
T number(std::string_view option, std::string_view text, T low, T high) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < low || value > high) {
    usage_error(std::string(option) + " wants a number in [" + std::to_string(low) + ", " +
                std::to_string(high) + "], not '" + std::string(text) + "'");
  }
  return value;
}

std::vector<Endpoint> parse_endpoints(std::string_view list) {
  std::vector<Endpoint> endpoints;
  while (!list.empty()) {
    const auto comma = list.find(',');
    endpoints.push_back(Endpoint::parse(list.substr(0, comma)));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return endpoints;
}

Args parse_args(int argc, char** argv) {
  Args a;
  constexpr int big = 1'000'000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view opt = argv[i];
    if (opt == "--help" || opt == "-h") {
      std::fputs(usage_text, stdout);
      std::exit(0);
    }
    if (opt == "--expect-overlap") {
      a.expect_overlap = true;
      continue;
    }
    if (opt == "--expect-stale") {
      a.expect_stale = true;
      continue;
    }
    if (opt == "--expect-over-admission") {
      a.expect_over_admission = true;
      continue;
    }
    if (opt == "--counter-semaphore") {
      a.counter_semaphore = true;
      continue;
    }
    if (opt == "--cancel") {
      a.cancel = true;
      continue;
    }
    if (opt == "--shared") {
      a.shared = true;
      continue;
    }
    if (opt == "--shared-apart") {
      a.shared_apart = true;
      continue;
    }
    if (opt == "--all") {
      a.all = true;
      continue;
    }
    if (opt == "--strand") {
      a.strand = true;
      continue;
    }
    if (opt == "--steal-markers") {
      a.steal_markers = true;
      continue;
    }
    if (opt == "--election") {
      a.election = true;
      continue;
    }
    if (opt == "--election-acts-after-resign") {
      a.election_acts_after_resign = true;
      continue;
    }
    if (opt == "--observer-misreports") {
      a.observer_misreports = true;
      continue;
    }
    if (opt == "--expect-observer-regression") {
      a.expect_observer_regression = true;
      continue;
    }
    if (opt == "--observer-freezes") {
      a.observer_freezes = true;
      continue;
    }
    if (opt == "--expect-late-report") {
      a.expect_late_report = true;
      continue;
    }
    if (opt == "--check-stalls") {
      a.check_stalls = true;
      continue;
    }
    if (opt == "--expect-stall") {
      a.expect_stall = true;
      continue;
    }
    if (opt == "--all-first-only") {
      a.all_first_only = true;
      continue;
    }
    if (opt == "--list-faults") {
      a.list_faults = true;
      continue;
    }
    if (opt == "--worker") {
      a.worker = true;
      continue;
    }
    if (i + 1 >= argc) usage_error("missing value after " + std::string(opt));
    const std::string_view value = argv[++i];
    if (opt == "--mode") {
      a.mode = parse_mode(value);
      if (!a.mode) usage_error("unknown mode '" + std::string(value) + "'");
    } else if (opt == "--seconds") {
      a.seconds = std::chrono::seconds{number<long long>(opt, value, 1, 7 * 24 * 3600)};
    } else if (opt == "--masters") {
      a.masters = number(opt, value, 1, 15);
    } else if (opt == "--processes") {
      a.processes = number(opt, value, 1, 64);
    } else if (opt == "--threads") {
      a.threads = number(opt, value, 1, 256);
    } else if (opt == "--resources") {
      a.resources = number(opt, value, 1, 1000);
    } else if (opt == "--ttl-ms") {
      a.ttl = milliseconds{number(opt, value, 1, big)};
    } else if (opt == "--quarantine-ms") {
      a.quarantine = milliseconds{number(opt, value, 0, big)};
    } else if (opt == "--retry-count") {
      a.retry_count = number(opt, value, 0, 10'000);
    } else if (opt == "--retry-delay-ms") {
      a.retry_delay = milliseconds{number(opt, value, 0, big)};
    } else if (opt == "--seed") {
      a.seed = number<std::uint64_t>(opt, value, 0, UINT64_MAX);
    } else if (opt == "--holds") {
      if (value != "timed" && value != "kept") usage_error("--holds wants timed or kept");
      a.holds = std::string(value);
    } else if (opt == "--register") {
      if (value != "fenced" && value != "unfenced" && value != "none")
        usage_error("--register wants fenced, unfenced or none");
      a.register_mode = std::string(value);
    } else if (opt == "--permits") {
      a.permits = number(opt, value, 0, 1000);
    } else if (opt == "--register-port") {
      a.register_port = number(opt, value, 0, 65535);
    } else if (opt == "--writes") {
      a.writes = value;
    } else if (opt == "--keep-records") {
      a.keep_records = value;
    } else if (opt == "--external-ports") {
      for (std::string_view list = value; !list.empty();) {
        const auto comma = list.find(',');
        a.external_ports.push_back(number(opt, list.substr(0, comma), 1, 65535));
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      }
    } else if (opt == "--fault-command") {
      a.fault_command = value;
    } else if (opt == "--process") {
      a.process = number(opt, value, 0, 1000);
    } else if (opt == "--parent") {
      a.parent = number<pid_t>(opt, value, 1, INT32_MAX);
    } else if (opt == "--endpoints") {
      a.endpoints = parse_endpoints(value);
    } else if (opt == "--key-prefix") {
      a.key_prefix = value;
    } else if (opt == "--until-ns") {
      a.until_ns = number<std::int64_t>(opt, value, 0, INT64_MAX);
    } else if (opt == "--out") {
      a.out = value;
    } else {
      usage_error("unknown option " + std::string(opt));
    }
  }
  if (!a.worker && !a.mode) usage_error("--mode is required");
  if (a.shared_apart && !a.shared) usage_error("--shared-apart needs --shared");
  if (a.all_first_only && !a.all) usage_error("--all-first-only needs --all");
  if (a.all && (a.shared || a.permits > 0 || a.cancel || a.holds != "timed"))
    usage_error("--all goes with none of --shared, --permits, --cancel, --holds kept");
  if (a.shared && (a.permits > 0 || a.cancel))
    usage_error("--shared goes with neither --permits nor --cancel");
  if (a.counter_semaphore && (a.permits == 0 || a.holds != "timed"))
    usage_error("--counter-semaphore needs --permits and --holds timed");
  if (!a.external_ports.empty()) {
    if (a.fault_command.empty()) usage_error("--external-ports needs --fault-command");
    a.masters = static_cast<int>(a.external_ports.size());
  }
  return a;
}

int worker_main(const Args& a) {
  // Die with the parent, so that a parent killed mid-run leaves no worker behind;
  // a parent that died before this line is caught by the getppid() check.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != a.parent) return 2;
  WorkerConfig config;
  config.process = a.process;
  config.masters = a.endpoints;
  config.threads = a.threads;
  config.resources = a.resources;
  config.ttl = a.ttl;
  config.quarantine = a.quarantine;
  config.retry_count = a.retry_count;
  config.retry_delay = a.retry_delay;
  config.key_prefix = a.key_prefix;
  config.until = from_ns(a.until_ns);
  config.out_path = a.out;
  config.keep_holds = a.holds == "kept";
  config.register_port = a.register_port;
  config.register_fenced = a.register_mode == "fenced";
  config.writes_path = a.writes;
  config.permits = a.permits;
  config.counter_semaphore = a.counter_semaphore;
  config.cancel = a.cancel;
  config.shared = a.shared;
  config.shared_apart = a.shared_apart;
  config.all = a.all;
  config.all_first_only = a.all_first_only;
  config.strand = a.strand;
  config.steal_markers = a.steal_markers;
  config.election = a.election;
  config.election_acts_after_resign = a.election_acts_after_resign;
  config.observer_misreports = a.observer_misreports;
  config.observer_freezes = a.observer_freezes;
  return run_worker(config);
}

/// A worker process the parent started.
struct Worker {
  pid_t pid = -1;
  std::string out;
  std::string writes;
  bool running = true;
  bool failed = false;
};

std::string self_path() {
  return fs::read_symlink("/proc/self/exe").string();
}

pid_t spawn(const std::string& path, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // Not the servers' inspection sockets (hiredis opens them without CLOEXEC).
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
  return pid;
}

std::string join_endpoints(const std::vector<Endpoint>& endpoints) {
  std::string text;
  for (const auto& e : endpoints) text += (text.empty() ? "" : ",") + e.to_string();
  return text;
}

// Sleeps until `t` in short steps, so that Ctrl-C is noticed; false if interrupted.
bool sleep_until(Clock::time_point t) {
  while (interrupted == 0) {
    const auto now = Clock::now();
    if (now >= t) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(t - now, 20ms));
  }
  return false;
}

/// Reaps every worker by pid; kills the ones still running at `kill_at` (or
/// at once when interrupted) and reaps them too.
void wait_for_workers(std::vector<Worker>& workers, Clock::time_point kill_at) {
  for (;;) {
    bool any = false;
    for (Worker& w : workers) {
      if (!w.running) continue;
      int status = 0;
      const pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == w.pid || (r < 0 && errno == ECHILD)) {
        w.running = false;
        w.failed = r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (w.failed)
          std::fprintf(stderr, "redlock-chaos: worker pid %d failed (status %d)\n", w.pid, status);
        continue;
      }
      any = true;
      if (Clock::now() >= kill_at || interrupted != 0) {
        std::fprintf(stderr, "redlock-chaos: worker pid %d still running %s; killing it\n", w.pid,
                     interrupted != 0 ? "after an interrupt" : "past its deadline");
        ::kill(w.pid, SIGKILL);
        ::waitpid(w.pid, &status, 0);
        w.running = false;
        w.failed = true;
      }
    }
    if (!any) return;
    std::this_thread::sleep_for(10ms);
  }
}

template <class Line>
std::vector<Line> read_lines(const std::string& path, std::size_t& malformed) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::vector<Line> records;
  std::size_t begin = 0;
  // Only whole lines: a worker killed mid-write leaves a partial last one.
  for (std::size_t nl; (nl = all.find('\n', begin)) != std::string::npos; begin = nl + 1) {
    Line r;
    if (parse(all.substr(begin, nl + 1 - begin), r)) {
      records.push_back(r);
    } else {
      ++malformed;
    }
  }
  return records;
}

int parent_main(const Args& a) {
  const Mode mode = *a.mode;
  if (a.quarantine.count() > 0 && a.ttl > a.quarantine) {
    usage_error(
        "--ttl-ms must not exceed --quarantine-ms (the library refuses it: a restarted master could "
        "otherwise vote while a lock it forgot is still valid)");
  }
  // Faults stop this long before the end, so that the report can say how soon
  // the cluster served locks again: a quarantined master needs its quarantine
  // (counted in INFO's whole seconds, plus one) and a reconnect.
  const milliseconds settle =
      2s + (a.quarantine.count() > 0
                ? milliseconds{std::chrono::ceil<std::chrono::seconds>(a.quarantine + 1s)}
                : 0s);
  const milliseconds fault_lead = 500ms;
  if (mode != Mode::none && a.seconds < settle + fault_lead + 1s) {
    usage_error("--seconds must be at least " +
                std::to_string(std::chrono::ceil<std::chrono::seconds>(settle + fault_lead + 1s).count()) +
                " for this mode and quarantine");
  }
  const std::uint64_t seed = a.seed ? *a.seed : std::random_device{}();

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  std::string dir = (fs::temp_directory_path() / "redlock-chaos-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror("redlock-chaos: mkdtemp");
    return 2;
  }
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_dir{dir};

  // Masters are built here, on the main thread, and faulted from it: a
  // redis-server dies with the thread that started it (PR_SET_PDEATHSIG).
  std::optional<Masters> masters_storage;
  if (a.external_ports.empty()) {
    const std::string shim = needs_clock_shim(mode)
                                 ? (fs::path(self_path()).parent_path() / "redlock-clock-shift.so").string()
                                 : std::string();
    if (!shim.empty() && !fs::exists(shim)) usage_error("the clock shim is missing: " + shim);
    masters_storage.emplace(a.masters, needs_proxies(mode), shim);
  } else {
    if (needs_clock_shim(mode)) usage_error("clock modes need local masters");
    masters_storage.emplace(a.external_ports, a.fault_command, needs_proxies(mode));
  }
  Masters& masters = *masters_storage;
  if (mode == Mode::partition) masters.add_client_links(a.processes);
  // The resource the locks protect: a register no fault touches.
  std::optional<test::RedisServer> register_server;
  if (a.register_mode != "none") register_server.emplace();

  // With a quarantine a fresh cluster votes only once its servers have been up
  // that long (whole seconds in INFO, plus one); start the clock after that.
  if (a.quarantine.count() > 0 &&
      !sleep_until(masters.started() + std::chrono::ceil<std::chrono::seconds>(a.quarantine + 1s) + 100ms)) {
    std::printf("result: ERROR: interrupted\n");
    return 2;
  }

  RunInfo run;
  run.mode = mode;
  run.seconds = a.seconds;
  run.masters = a.masters;
  run.processes = a.processes;
  run.threads = a.threads;
  run.resources = a.resources;
  run.ttl = a.ttl;
  run.quarantine = a.quarantine;
  run.seed = seed;
  run.permits = a.permits;
  run.start = Clock::now();
  const Clock::time_point until = run.start + a.seconds;

  const std::string self = self_path();
  std::vector<Worker> workers;
  std::string error;
  try {
    for (int p = 0; p < a.processes; ++p) {
      Worker w;
      w.out = dir + "/worker-" + std::to_string(p) + ".records";
      w.writes = dir + "/worker-" + std::to_string(p) + ".writes";
      std::vector<std::string> args = {self,
                                       "--worker",
                                       "--process",
                                       std::to_string(p),
                                       "--parent",
                                       std::to_string(::getpid()),
                                       "--endpoints",
                                       join_endpoints(masters.client_endpoints(p)),
                                       "--threads",
                                       std::to_string(a.threads),
                                       "--resources",
                                       std::to_string(a.resources),
                                       "--ttl-ms",
                                       std::to_string(a.ttl.count()),
                                       "--quarantine-ms",
                                       std::to_string(a.quarantine.count()),
                                       "--retry-count",
                                       std::to_string(a.retry_count),
                                       "--retry-delay-ms",
                                       std::to_string(a.retry_delay.count()),
                                       "--key-prefix",
                                       "chaos-" + std::to_string(::getpid()) + ":",
                                       "--until-ns",
                                       std::to_string(to_ns(until)),
                                       "--out",
                                       w.out,
                                       "--holds",
                                       a.holds,
                                       "--register",
                                       a.register_mode,
                                       "--register-port",
                                       std::to_string(register_server ? register_server->port() : 0),
                                       "--writes",
                                       w.writes,
                                       "--permits",
                                       std::to_string(a.permits)};
      if (a.counter_semaphore) args.emplace_back("--counter-semaphore");
      if (a.cancel) args.emplace_back("--cancel");
      if (a.shared) args.emplace_back("--shared");
      if (a.shared_apart) args.emplace_back("--shared-apart");
      if (a.all) args.emplace_back("--all");
      if (a.all_first_only) args.emplace_back("--all-first-only");
      if (a.strand) args.emplace_back("--strand");
      if (a.steal_markers) args.emplace_back("--steal-markers");
      if (a.election) args.emplace_back("--election");
      if (a.election_acts_after_resign) args.emplace_back("--election-acts-after-resign");
      if (a.observer_misreports) args.emplace_back("--observer-misreports");
      if (a.observer_freezes) args.emplace_back("--observer-freezes");
      w.pid = spawn(self, args);
      workers.push_back(w);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }

  ScheduleConfig sc;
  sc.mode = mode;
  sc.ttl = a.ttl;
  sc.quarantine = a.quarantine;
  sc.command_timeout = Options{}.command_timeout;
  sc.begin = run.start + fault_lead;
  sc.end = until - settle;
  sc.seed = seed;
  sc.drift =
      std::chrono::duration_cast<milliseconds>(a.ttl * Options{}.drift_factor) + Options{}.drift_constant;
  for (const Worker& w : workers) sc.clients.push_back(w.pid);
  FaultSchedule schedule(masters, sc);
  if (error.empty()) {
    try {
      schedule.run(interrupted);
    } catch (const std::exception& e) {
      error = std::string("fault schedule: ") + e.what();
    }
  }

  // The longest a worker can legitimately take after `until`: one lock() call
  // with all its retries (each attempt bounded by the command timeout), one
  // hold, one unlock.
  WorkerConfig described;
  described.retry_count = a.retry_count;
  described.retry_delay = a.retry_delay;
  const Options options = worker_options(described);
  const auto longest_call = (options.retry_count + 1) * (options.command_timeout + 20ms) +
                            options.retry_count * (options.retry_delay + options.retry_jitter);
  wait_for_workers(workers, error.empty() ? until + longest_call + 2 * a.ttl + 5s : Clock::now());
  for (const Worker& w : workers) run.workers_failed += w.failed ? 1 : 0;

  std::vector<Record> records;
  std::vector<Write> writes;
  std::size_t malformed = 0;
  for (const Worker& w : workers) {
    auto mine = read_lines<Record>(w.out, malformed);
    records.insert(records.end(), mine.begin(), mine.end());
    auto written = read_lines<Write>(w.writes, malformed);
    writes.insert(writes.end(), written.begin(), written.end());
  }
  if (!a.keep_records.empty()) {
    std::error_code ec;
    fs::create_directories(a.keep_records, ec);
    for (const Worker& w : workers) {
      fs::copy_file(w.out, fs::path(a.keep_records) / fs::path(w.out).filename(),
                    fs::copy_options::overwrite_existing, ec);
      fs::copy_file(w.writes, fs::path(a.keep_records) / fs::path(w.writes).filename(),
                    fs::copy_options::overwrite_existing, ec);
    }
  }

  // An observer hears a release at once, and a leader that died when its
  // key runs out on the masters: within the ttl and a round trip (at its
  // command timeout both ways, and as long again for a loaded machine).
  const Clock::duration report_within = a.ttl + 4 * Options{}.command_timeout;
  const Summary summary = summarize(records, writes, schedule, a.permits, a.ttl / 2, report_within);
  print_text(stdout, run, summary, schedule, a.list_faults);
  if (malformed > 0) std::printf("malformed record lines: %zu\n", malformed);

  // Clock jumps past the drift allowance break Redlock's own assumption:
  // overlaps are its stated limit there, and only the register's verdict counts.
  const bool beyond_assumptions = mode == Mode::clock_large;
  int status = 0;
  std::string verdict;
  if (!error.empty()) {
    status = 2;
    verdict = "ERROR: " + error;
  } else if (interrupted != 0) {
    status = 2;
    verdict = "ERROR: interrupted";
  } else if (a.expect_over_admission) {
    status = summary.over_admissions > 0 ? 0 : 1;
    verdict = summary.over_admissions > 0
                  ? "PASS (negative control): the checker caught " + std::to_string(summary.over_admissions) +
                        " grants over the permit count (" + std::to_string(summary.most_holders) +
                        " holders of " + std::to_string(a.permits) + " permits)"
                  : "FAIL (negative control): never more holders than permits, so this run shows the checker "
                    "could miss it";
  } else if (a.expect_stale) {
    status = summary.stale_accepted > 0 ? 0 : 1;
    verdict =
        summary.stale_accepted > 0
            ? "PASS (negative control): the checker caught " + std::to_string(summary.stale_accepted) +
                  " stale writes accepted"
            : "FAIL (negative control): no stale write accepted, so this run shows the checker could miss "
              "one";
  } else if (a.expect_observer_regression) {
    status = summary.observer_regressions > 0 ? 0 : 1;
    verdict =
        summary.observer_regressions > 0
            ? "PASS (negative control): the checker caught " + std::to_string(summary.observer_regressions) +
                  " observer reports of a lower term"
            : "FAIL (negative control): no observer regression found, so this run shows the checker could "
              "miss one";
  } else if (a.expect_late_report) {
    status = summary.late_reports > 0 ? 0 : 1;
    verdict = summary.late_reports > 0
                  ? "PASS (negative control): the checker caught " + std::to_string(summary.late_reports) +
                        " reports of a leader past its tenure"
                  : "FAIL (negative control): no late report found, so this run shows the checker could miss "
                    "one";
  } else if (a.expect_stall) {
    status = summary.stalls > 0 ? 0 : 1;
    verdict =
        summary.stalls > 0
            ? "PASS (negative control): the checker caught " + std::to_string(summary.stalls) + " stalls"
            : "FAIL (negative control): no stall found, so this run shows the checker could miss one";
  } else if (a.expect_overlap) {
    status = summary.overlaps > 0 ? 0 : 1;
    verdict =
        summary.overlaps > 0
            ? "PASS (negative control): the checker caught " + std::to_string(summary.overlaps) + " overlaps"
            : "FAIL (negative control): no overlap found, so this run shows the checker could miss one";
  } else if (malformed > 0 && run.workers_failed == 0) {
    status = 2;
    verdict = "ERROR: " + std::to_string(malformed) + " record lines could not be read (a format bug)";
  } else if (a.register_mode != "none" && (summary.writes_unanswered > 0 || summary.writes_accepted == 0)) {
    status = 2;
    verdict = "ERROR: the register did not answer " + std::to_string(summary.writes_unanswered) + " of " +
              std::to_string(summary.writes) + " writes, so the run cannot say what it accepted";
  } else if (summary.expired_on_return > 0 && mode != Mode::pause_client) {
    // (A worker paused between the grant and reading the clock records it late.)
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.expired_on_return) +
              " locks were already expired when lock() returned them";
  } else if (summary.over_admissions > 0) {
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.over_admissions) + " grants over the permit count (" +
              std::to_string(summary.most_holders) + " holders of " + std::to_string(a.permits) + " permits)";
  } else if (summary.stale_accepted > 0) {
    status = 1;
    verdict = "FAIL: the register accepted " + std::to_string(summary.stale_accepted) + " stale writes";
  } else if (summary.overlaps > 0 && !beyond_assumptions) {
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.overlaps) + " overlapping critical sections";
    if (mode == Mode::restart && a.quarantine.count() == 0) {
      verdict += " (expected: empty restarts are safe only with --quarantine-ms)";
    }
  } else if (summary.observer_regressions > 0) {
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.observer_regressions) +
              " observer reports of a lower term after a higher";
  } else if (summary.late_reports > 0) {
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.late_reports) +
              " observer reports of a leader stood past its tenure's end + ttl + a round trip";
  } else if (a.check_stalls && summary.stalls > 0) {
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.stalls) + " stalls (a resource held by nobody who knew it)";
  } else if (summary.token_inversions > 0 && !beyond_assumptions) {
    status = 1;
    verdict = "FAIL: " + std::to_string(summary.token_inversions) +
              " fencing tokens not above the previous grant's";
  } else if (run.workers_failed > 0) {
    status = 2;
    verdict = "ERROR: " + std::to_string(run.workers_failed) + " workers failed";
  } else if (summary.acquisitions == 0) {
    status = 2;
    verdict = "ERROR: no lock was ever acquired, so the run proves nothing";
  } else if (a.shared && summary.shared_overlaps == 0) {
    status = 2;
    verdict = "ERROR: no two shared holders ever held at once, so the run proves nothing about sharing";
  } else if (beyond_assumptions && (summary.overlaps > 0 || summary.token_inversions > 0)) {
    verdict = "PASS (beyond Redlock's assumptions): " + std::to_string(summary.overlaps) + " overlaps and " +
              std::to_string(summary.token_inversions) +
              " token inversions, as clock jumps past the drift allowance allow; no stale write accepted";
  } else {
    verdict = "PASS: no overlap";
  }
  if (status == 0 && run.workers_failed > 0) {
    status = 2;
    verdict += "; but " + std::to_string(run.workers_failed) + " workers failed";
  }
  std::printf("result: %s\n", verdict.c_str());
  std::printf("%s\n", json_line(run, summary, schedule).c_str());
  std::fflush(stdout);
  return status;
}

}  // namespace
}  // namespace redlock::chaos

int main(int argc, char** argv) {
  using namespace redlock::chaos;
  // Writes to a master that just died must fail with EPIPE, not kill us.
  std::signal(SIGPIPE, SIG_IGN);
  const Args args = parse_args(argc, argv);
  try {
    return args.worker ? worker_main(args) : parent_main(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redlock-chaos: %s\n", e.what());
    return 2;
  }
}
