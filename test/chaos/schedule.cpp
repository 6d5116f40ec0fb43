#include "schedule.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

extern char** environ;

namespace redlock::chaos {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr auto tick = 5ms;
// The library's reconnect backoff is capped at 1 s (MasterConfig::reconnect_cap),
// so a master that was unreachable for a while may wait that long before a
// client tries it again: it is not counted healthy before then.
constexpr auto reconnect_cap = 1000ms;
// A bound besides the deadline.
constexpr std::size_t max_faults = 100'000;
constexpr auto fault_command_timeout = 60s;

struct ModeName {
  Mode mode;
  const char* text;
};
constexpr ModeName mode_names[] = {
    {Mode::none, "none"},
    {Mode::stop, "stop"},
    {Mode::kill, "kill"},
    {Mode::restart, "restart"},
    {Mode::latency, "latency"},
    {Mode::blackhole, "blackhole"},
    {Mode::reply_drop, "reply-drop"},
    {Mode::mixed, "mixed"},
    {Mode::clock, "clock"},
    {Mode::clock_large, "clock-large"},
    {Mode::pause_client, "pause-client"},
    {Mode::partition, "partition"},
};

int majority(int n) {
  return n / 2 + 1;
}

milliseconds ceil_seconds(milliseconds d) {
  return std::chrono::ceil<std::chrono::seconds>(d);
}

}  // namespace

std::optional<Mode> parse_mode(std::string_view text) {
  for (const auto& m : mode_names) {
    if (text == m.text) return m.mode;
  }
  return std::nullopt;
}

const char* name(Mode mode) {
  for (const auto& m : mode_names) {
    if (m.mode == mode) return m.text;
  }
  return "?";
}

bool needs_proxies(Mode mode) {
  switch (mode) {
    case Mode::latency:
    case Mode::blackhole:
    case Mode::reply_drop:
    case Mode::mixed:
      return true;
    case Mode::none:
    case Mode::stop:
    case Mode::kill:
    case Mode::restart:
    case Mode::clock:
    case Mode::clock_large:
    case Mode::pause_client:
    case Mode::partition:  // the clients' own links (Masters::add_client_links)
      return false;
  }
  return false;
}

bool needs_clock_shim(Mode mode) {
  return mode == Mode::clock || mode == Mode::clock_large;
}

const char* name(FaultKind kind) {
  switch (kind) {
    case FaultKind::stop:
      return "stop";
    case FaultKind::kill:
      return "kill";
    case FaultKind::restart:
      return "restart";
    case FaultKind::latency:
      return "latency";
    case FaultKind::blackhole:
      return "blackhole";
    case FaultKind::reply_drop:
      return "reply-drop";
    case FaultKind::error_reply:
      return "error-reply";
    case FaultKind::reset:
      return "reset";
    case FaultKind::clock_jump:
      return "clock-jump";
    case FaultKind::pause_client:
      return "pause-client";
    case FaultKind::partition:
      return "partition";
    case FaultKind::slow_link:
      return "slow-link";
  }
  return "?";
}

// noeviction: a lock key must never be evicted to make room (it would be a
// silent unlock). Persistence is off (the RedisServer default), as in the
// compose file: a restart loses every key, which is what the quarantine is for.
// Keyspace notifications are on, so kept locks and leaders also listen for
// their keys' losses (LossWatch) through every fault.
Masters::Masters(int n, bool proxies, const std::string& clock_shim) : clock_shim_(!clock_shim.empty()) {
  test::ServerOptions options;
  options.args = {"--maxmemory-policy", "noeviction", "--notify-keyspace-events", "Kgx"};
  if (clock_shim_) options.env = {"LD_PRELOAD=" + clock_shim, "REDLOCK_CLOCK_SHIFT_FILE={dir}/clock-shift"};
  cluster_.emplace(n, options);
  for (int i = 0; i < n; ++i) ports_.push_back((*cluster_)[static_cast<std::size_t>(i)].port());
  add_proxies_and_endpoints(proxies);
  started_ = Clock::now();
}

Masters::Masters(std::vector<int> ports, std::string fault_command, bool proxies)
    : ports_(std::move(ports)), fault_command_(std::move(fault_command)) {
  add_proxies_and_endpoints(proxies);
  started_ = Clock::now();
}

void Masters::add_proxies_and_endpoints(bool proxies) {
  for (int port : ports_) {
    if (proxies) proxies_.push_back(std::make_unique<test::FaultProxy>(port));
    // A restarted server keeps its port, so these stay right for the whole run.
    Endpoint e;
    e.host = "127.0.0.1";
    e.port = proxies ? proxies_.back()->port() : port;
    endpoints_.push_back(e);
  }
}

void Masters::pause(const std::vector<int>& targets) {
  if (!cluster_) return run_fault_command("pause", targets);
  for (int t : targets) (*cluster_)[static_cast<std::size_t>(t)].pause();
}

void Masters::resume(const std::vector<int>& targets) {
  if (!cluster_) return run_fault_command("resume", targets);
  for (int t : targets) (*cluster_)[static_cast<std::size_t>(t)].resume();
}

void Masters::kill(const std::vector<int>& targets) {
  if (!cluster_) return run_fault_command("kill", targets);
  for (int t : targets) (*cluster_)[static_cast<std::size_t>(t)].kill9();
}

void Masters::start(const std::vector<int>& targets) {
  if (!cluster_) return run_fault_command("start", targets);
  for (int t : targets) (*cluster_)[static_cast<std::size_t>(t)].restart(false);
}

void Masters::restart(const std::vector<int>& targets) {
  if (!cluster_) return run_fault_command("restart", targets);
  // All killed first, then all started: the burst is as short as redis-server's start-up.
  kill(targets);
  start(targets);
}

void Masters::add_client_links(int clients) {
  for (int c = 0; c < clients; ++c) {
    std::vector<std::unique_ptr<test::FaultProxy>> row;
    for (const Endpoint& e : endpoints_) row.push_back(std::make_unique<test::FaultProxy>(e.port));
    links_.push_back(std::move(row));
  }
}

test::FaultProxy* Masters::link(int c, int m) {
  if (c < 0 || c >= clients()) return nullptr;
  return links_[static_cast<std::size_t>(c)][static_cast<std::size_t>(m)].get();
}

std::vector<Endpoint> Masters::client_endpoints(int c) const {
  if (c < 0 || c >= clients()) return endpoints_;
  std::vector<Endpoint> mine;
  for (const auto& proxy : links_[static_cast<std::size_t>(c)]) mine.push_back(proxy->endpoint());
  return mine;
}

void Masters::shift_clock(const std::vector<int>& targets, milliseconds offset) {
  if (!cluster_ || !clock_shim_)
    throw std::logic_error("clock faults need local masters with the clock shim");
  const std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(offset).count();
  for (int t : targets) {
    const std::string path = (*cluster_)[static_cast<std::size_t>(t)].dir() + "/clock-shift";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
    struct stat st {};
    bool written = ::fstat(fd, &st) == 0 &&
                   (st.st_size >= static_cast<off_t>(sizeof ns) || ::ftruncate(fd, sizeof ns) == 0);
    // One 8-byte store into the page the shim maps: it never reads half of it.
    void* map = written ? ::mmap(nullptr, sizeof ns, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd);
    written = map != MAP_FAILED;
    if (written) {
      __atomic_store_n(static_cast<std::int64_t*>(map), ns, __ATOMIC_RELAXED);
      ::munmap(map, sizeof ns);
    }
    if (!written) throw std::runtime_error("write " + path);
  }
}

void Masters::run_fault_command(const char* action, const std::vector<int>& targets) {
  std::vector<std::string> args = {fault_command_, action};
  for (int t : targets) args.push_back(std::to_string(t + 1));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // docker and the shell need none of our sockets.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, fault_command_.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(fault_command_ + ": " + std::strerror(rc));
  // docker compose can be slow, but not this slow: a hung command must not hang the run.
  const auto deadline = Clock::now() + fault_command_timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      throw std::runtime_error(fault_command_ + " " + action + " did not finish in time");
    }
    std::this_thread::sleep_for(tick);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error(fault_command_ + " " + action + " failed (status " + std::to_string(status) +
                             ")");
  }
}

FaultSchedule::FaultSchedule(Masters& masters, ScheduleConfig config)
    : masters_(masters), config_(config), rng_(config.seed), healed_(config.end) {
}

milliseconds FaultSchedule::uniform(milliseconds low, milliseconds high) {
  std::uniform_int_distribution<long long> pick(low.count(), std::max(low, high).count());
  return milliseconds{pick(rng_)};
}

FaultKind FaultSchedule::pick_kind() {
  switch (config_.mode) {
    case Mode::stop:
      return FaultKind::stop;
    case Mode::kill:
      return FaultKind::kill;
    case Mode::restart:
      return FaultKind::restart;
    case Mode::latency:
      return FaultKind::latency;
    case Mode::blackhole:
      return FaultKind::blackhole;
    case Mode::reply_drop:
      return FaultKind::reply_drop;
    case Mode::clock:
    case Mode::clock_large:
      return FaultKind::clock_jump;
    case Mode::pause_client:
      return FaultKind::pause_client;
    case Mode::partition: {
      std::bernoulli_distribution slow(0.3);
      return slow(rng_) ? FaultKind::slow_link : FaultKind::partition;
    }
    case Mode::none:
    case Mode::mixed:
      break;
  }
  // An empty restart is safe only behind the quarantine: without it, mixed
  // stays with faults that Redlock tolerates by design.
  std::vector<FaultKind> kinds = {FaultKind::stop,      FaultKind::kill,       FaultKind::latency,
                                  FaultKind::blackhole, FaultKind::reply_drop, FaultKind::error_reply,
                                  FaultKind::reset};
  if (config_.quarantine.count() > 0) kinds.push_back(FaultKind::restart);
  std::uniform_int_distribution<std::size_t> pick(0, kinds.size() - 1);
  return kinds[pick(rng_)];
}

std::vector<int> FaultSchedule::pick_targets(FaultKind kind, const std::vector<int>& free) {
  const int n = masters_.size();
  const int minority = n - majority(n);  // the most masters Redlock can lose and stay available
  int low = 1;
  int high = 1;
  switch (kind) {
    case FaultKind::stop:
    case FaultKind::kill:
      high = minority;
      break;
    case FaultKind::restart:
      // The restart mode hits a majority in one burst: the schedule that
      // breaks a lock without quarantine (the negative control).
      high = majority(n);
      if (config_.mode == Mode::restart) low = high;
      break;
    case FaultKind::latency:
      high = n;
      break;
    case FaultKind::blackhole:
    case FaultKind::reply_drop:
    case FaultKind::error_reply:
    case FaultKind::reset:
      high = majority(n);
      break;
    case FaultKind::clock_jump:
      // Within the drift allowance any number of masters may jump. Past it, a
      // majority, enough to break a lock: either the jump forward or the jump
      // back to the real time (forward again) expires what they hold early.
      high = config_.mode == Mode::clock ? n : majority(n);
      if (config_.mode == Mode::clock_large) low = high;
      break;
    case FaultKind::partition:
      // A minority, then a majority, and so on: a client cut from a majority
      // cannot lock, and one cut from a minority must still exclude the others.
      low = high = (partitions_++ % 2 == 0) ? std::max(1, minority) : majority(n);
      break;
    case FaultKind::slow_link:
      high = n;
      break;
    case FaultKind::pause_client: {
      if (config_.clients.empty()) return {};
      std::uniform_int_distribution<std::size_t> one(0, config_.clients.size() - 1);
      return {static_cast<int>(one(rng_))};
    }
  }
  high = std::min(high, static_cast<int>(free.size()));
  if (high < 1) return {};
  low = std::min(low, high);
  std::uniform_int_distribution<int> count(low, high);
  std::vector<int> targets = free;
  std::shuffle(targets.begin(), targets.end(), rng_);
  targets.resize(static_cast<std::size_t>(count(rng_)));
  std::sort(targets.begin(), targets.end());
  return targets;
}

void FaultSchedule::start(FaultKind kind, std::vector<int> targets) {
  const milliseconds ttl = config_.ttl;
  FaultEvent event;
  event.kind = kind;
  event.targets = std::move(targets);
  event.begin = Clock::now();
  milliseconds hold{0};
  bool needs_heal = true;
  switch (kind) {
    case FaultKind::stop:
      masters_.pause(event.targets);
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::kill:
      masters_.kill(event.targets);
      hold = uniform(min_kill_downtime(), 3 * ttl);
      break;
    case FaultKind::restart:
      masters_.restart(event.targets);
      needs_heal = false;
      break;
    case FaultKind::latency:
      event.delay = uniform(5ms, 2 * config_.command_timeout);
      for (int t : event.targets) masters_.proxy(t)->delay(event.delay);
      hold = uniform(ttl, 4 * ttl);
      break;
    case FaultKind::blackhole:
      for (int t : event.targets) masters_.proxy(t)->blackhole();
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::reply_drop:
      for (int t : event.targets) masters_.proxy(t)->drop_replies();
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::error_reply:
      for (int t : event.targets)
        masters_.proxy(t)->error_reply("-LOADING Redis is loading the dataset in memory");
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::reset:
      for (int t : event.targets) masters_.proxy(t)->reset();
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::clock_jump:
      event.delay = clock_offset();
      masters_.shift_clock(event.targets, event.delay);
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::pause_client:
      // Past the lock's validity: a GC pause that outlives the lease.
      ::kill(client(event.targets[0]), SIGSTOP);
      hold = uniform(3 * ttl / 2, 4 * ttl);
      break;
    case FaultKind::partition:
      event.clients = pick_clients();
      cut(event, false);
      hold = uniform(ttl / 2, 3 * ttl);
      break;
    case FaultKind::slow_link:
      event.clients = pick_clients();
      event.delay = uniform(config_.command_timeout, 3 * config_.command_timeout);
      cut(event, false);
      hold = uniform(ttl / 2, 3 * ttl);
      break;
  }
  event.end = Clock::now();
  events_.push_back(std::move(event));
  active_.push_back({events_.size() - 1, needs_heal ? Clock::now() + hold : Clock::time_point::min()});
}

void FaultSchedule::heal(Active& active) {
  FaultEvent& event = events_[active.event];
  switch (event.kind) {
    case FaultKind::stop:
      masters_.resume(event.targets);
      break;
    case FaultKind::kill:
      // Also when healing early (the schedule ends, or failed): an empty
      // master back sooner would be a restart without quarantine.
      std::this_thread::sleep_until(event.end + min_kill_downtime());
      masters_.start(event.targets);
      break;
    case FaultKind::restart:
      return;  // nothing to undo; end was set when the burst finished
    case FaultKind::latency:
    case FaultKind::blackhole:
    case FaultKind::reply_drop:
    case FaultKind::error_reply:
    case FaultKind::reset:
      for (int t : event.targets) masters_.proxy(t)->pass();
      break;
    case FaultKind::clock_jump:
      masters_.shift_clock(event.targets, milliseconds{0});  // the jump back
      break;
    case FaultKind::pause_client:
      ::kill(client(event.targets[0]), SIGCONT);
      break;
    case FaultKind::partition:
    case FaultKind::slow_link:
      cut(event, true);
      break;
  }
  event.end = Clock::now();
}

// Some of the clients but never all (with one client, that one).
std::vector<int> FaultSchedule::pick_clients() {
  const int total = masters_.clients();
  if (total <= 1) return {0};
  std::uniform_int_distribution<int> count(1, total - 1);
  std::vector<int> all(static_cast<std::size_t>(total));
  for (int c = 0; c < total; ++c) all[static_cast<std::size_t>(c)] = c;
  std::shuffle(all.begin(), all.end(), rng_);
  all.resize(static_cast<std::size_t>(count(rng_)));
  std::sort(all.begin(), all.end());
  return all;
}

void FaultSchedule::cut(const FaultEvent& event, bool heal) {
  for (int c : event.clients) {
    for (int m : event.targets) {
      test::FaultProxy* link = masters_.link(c, m);
      if (heal) {
        link->pass();
      } else if (event.kind == FaultKind::slow_link) {
        link->delay(event.delay);
      } else {
        link->blackhole();
      }
    }
  }
}

// Mode::clock: within half the drift allowance either way, so that a key's
// expiry moves by at most the allowance between two jumps (there and back).
// Mode::clock_large: one to four ttls, forward or back.
milliseconds FaultSchedule::clock_offset() {
  std::bernoulli_distribution forward(0.5);
  const int sign = forward(rng_) ? 1 : -1;
  if (config_.mode == Mode::clock) return sign * uniform(0ms, config_.drift / 2);
  return sign * uniform(config_.ttl, 4 * config_.ttl);
}

pid_t FaultSchedule::client(int index) const {
  return config_.clients[static_cast<std::size_t>(index)];
}

void FaultSchedule::run(const volatile std::sig_atomic_t& interrupted) {
  const std::size_t max_active = config_.mode == Mode::mixed ? 2 : 1;
  auto next_start = config_.begin;
  auto heal_all = [this] {
    for (Active& a : active_) heal(a);
    active_.clear();
  };
  try {
    while (interrupted == 0 && events_.size() < max_faults) {
      const auto now = Clock::now();
      if (now >= config_.end) break;
      for (Active& a : active_) {
        if (now >= a.heal_at) {
          heal(a);
          a.heal_at = Clock::time_point::max();  // marks it done
        }
      }
      active_.erase(std::remove_if(active_.begin(), active_.end(),
                                   [](const Active& a) { return a.heal_at == Clock::time_point::max(); }),
                    active_.end());
      if (config_.mode != Mode::none && now >= next_start && active_.size() < max_active) {
        std::vector<bool> busy(static_cast<std::size_t>(masters_.size()), false);
        for (const Active& a : active_) {
          if (!on_masters(events_[a.event].kind)) continue;
          for (int t : events_[a.event].targets) busy[static_cast<std::size_t>(t)] = true;
        }
        std::vector<int> free;
        for (int i = 0; i < masters_.size(); ++i) {
          if (!busy[static_cast<std::size_t>(i)]) free.push_back(i);
        }
        const FaultKind kind = pick_kind();
        std::vector<int> targets = pick_targets(kind, free);
        if (!targets.empty()) {
          start(kind, std::move(targets));
          // Give the cluster time to recover between faults, and with the
          // quarantine the restarted masters time to vote again; otherwise a
          // restart schedule only measures unavailability. Single modes leave
          // a quiet gap after each fault; mixed lets a second fault start
          // while the first is on.
          milliseconds gap = uniform(config_.ttl / 2, 2 * config_.ttl);
          if ((kind == FaultKind::restart || kind == FaultKind::kill) && config_.quarantine.count() > 0) {
            gap += config_.quarantine + 1s;
          }
          const Clock::time_point heal_at = active_.back().heal_at;
          const bool after_heal = config_.mode != Mode::mixed && heal_at != Clock::time_point::min();
          next_start = (after_heal ? heal_at : Clock::now()) + gap;
        }
      }
      std::this_thread::sleep_for(tick);
    }
  } catch (...) {
    try {
      heal_all();
    } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one to report
    }
    healed_ = Clock::now();
    throw;
  }
  heal_all();
  healed_ = Clock::now();
}

// Down for longer than the TTL: every key a killed master held has expired by
// the time it comes back empty, so no quarantine is needed.
milliseconds FaultSchedule::min_kill_downtime() const {
  return config_.ttl + 100ms;
}

bool on_masters(FaultKind kind) {
  return kind != FaultKind::pause_client;
}

bool FaultSchedule::counts_as_unhealthy(const FaultEvent& event) const {
  // A paused client leaves the masters whole; a clock jump leaves them
  // answering (what it breaks is the checker's to find, not availability's).
  if (event.kind == FaultKind::pause_client || event.kind == FaultKind::clock_jump) return false;
  // A delay counts once the round trip (the delay applies each way) nears the
  // command timeout, where that master's votes start to fail.
  if (event.kind == FaultKind::latency) return 2 * event.delay + 10ms >= config_.command_timeout;
  return true;
}

milliseconds FaultSchedule::recovery(const FaultEvent& event) const {
  milliseconds after = reconnect_cap;
  const bool empty_restart = event.kind == FaultKind::kill || event.kind == FaultKind::restart;
  if (empty_restart && config_.quarantine.count() > 0) {
    // The library counts uptime in the whole seconds INFO reports, plus one.
    after += ceil_seconds(config_.quarantine + 1s);
  }
  return after;
}

bool FaultSchedule::majority_healthy(Clock::time_point from, Clock::time_point to) const {
  const int n = masters_.size();
  const int tolerated = n - majority(n);
  // The number of unhealthy masters only rises where an unhealthy interval
  // begins, so checking `from` and every such beginning inside is enough.
  std::vector<Clock::time_point> points = {from};
  for (const FaultEvent& e : events_) {
    if (counts_as_unhealthy(e) && e.begin > from && e.begin <= to) points.push_back(e.begin);
  }
  for (const auto point : points) {
    std::vector<bool> unhealthy(static_cast<std::size_t>(n), false);
    for (const FaultEvent& e : events_) {
      if (!counts_as_unhealthy(e) || point < e.begin || point > e.end + recovery(e)) continue;
      for (int t : e.targets) unhealthy[static_cast<std::size_t>(t)] = true;
    }
    if (std::count(unhealthy.begin(), unhealthy.end(), true) > tolerated) return false;
  }
  return true;
}

}  // namespace redlock::chaos
