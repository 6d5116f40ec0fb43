#pragma once

#include "record.hpp"
#include "support/cluster.hpp"
#include "support/fault_proxy.hpp"

#include <redlock/options.hpp>

#include <sys/types.h>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::chaos {

/// What the fault schedule does to the masters (see FaultSchedule).
enum class Mode {
  none,
  stop,
  kill,
  restart,
  latency,
  blackhole,
  reply_drop,
  mixed,
  clock,
  clock_large,
  pause_client,
  partition,
};

std::optional<Mode> parse_mode(std::string_view text);
const char* name(Mode mode);
/// Modes that act on the network need a FaultProxy in front of every master.
bool needs_proxies(Mode mode);
/// Modes that jump the masters' clocks need them started with the clock shim.
bool needs_clock_shim(Mode mode);

enum class FaultKind {
  stop,
  kill,
  restart,
  latency,
  blackhole,
  reply_drop,
  error_reply,
  reset,
  clock_jump,    // masters' wall clocks set off by FaultEvent::delay (the clock shim)
  pause_client,  // a worker process SIGSTOPped (targets: worker numbers)
  partition,     // some clients cut from the target masters (their own proxies)
  slow_link,     // some clients' traffic to the targets delayed past command_timeout
};
const char* name(FaultKind kind);
/// False for faults on the clients.
bool on_masters(FaultKind kind);

/// One fault as it happened: which masters, from when to when. A restart is
/// instantaneous from the schedule's point of view: `end` is when the last
/// target answered PING again.
struct FaultEvent {
  FaultKind kind = FaultKind::stop;
  std::vector<int> targets;  // indexes into Masters
  Clock::time_point begin{};
  Clock::time_point end{};
  std::chrono::milliseconds delay{0};  // latency, slow_link: the delay; clock_jump: the offset (signed)
  std::vector<int> clients;            // partition, slow_link: the worker numbers cut off
};

/// The masters under test: N independent redis-servers on 127.0.0.1, each
/// behind a FaultProxy when asked. Either started here (local), or already
/// running elsewhere (external: docker compose) and faulted by an external
/// command. Same threading rule as test::RedisServer: build, fault and destroy
/// it on the thread that outlives the servers (main).
class Masters {
 public:
  /// Starts `n` local redis-servers; with `clock_shim` (the path of
  /// redlock-clock-shift.so) each runs with it preloaded, for shift_clock().
  Masters(int n, bool proxies, const std::string& clock_shim = {});
  /// Uses the servers on 127.0.0.1:`ports`; each fault runs
  /// `fault_command ACTION I...` with 1-based master numbers, ACTION one of
  /// pause, resume, kill, start (empty, and answering PING when it returns),
  /// restart (kill, then start).
  Masters(std::vector<int> ports, std::string fault_command, bool proxies);

  int size() const { return static_cast<int>(ports_.size()); }
  /// SIGSTOP, returns once stopped.
  void pause(const std::vector<int>& targets);
  void resume(const std::vector<int>& targets);
  /// SIGKILL.
  void kill(const std::vector<int>& targets);
  /// Starts killed masters again, empty; returns once they answer PING.
  void start(const std::vector<int>& targets);
  /// kill() and start() in one burst.
  void restart(const std::vector<int>& targets);
  /// Sets the targets' wall clocks `offset` away from the real one (local
  /// masters started with the clock shim only; throws otherwise).
  void shift_clock(const std::vector<int>& targets, std::chrono::milliseconds offset);
  /// A proxy of its own from each of `clients` worker processes to each
  /// master (after the shared proxy, if any), for faults that cut some
  /// clients off but not others.
  void add_client_links(int clients);
  /// Client `c`'s way to master `m`; nullptr without client links.
  test::FaultProxy* link(int c, int m);
  /// What worker `c` connects to: its links, or endpoints() without them.
  std::vector<Endpoint> client_endpoints(int c) const;
  int clients() const { return static_cast<int>(links_.size()); }
  /// nullptr without proxies.
  test::FaultProxy* proxy(int i) {
    return proxies_.empty() ? nullptr : proxies_[static_cast<std::size_t>(i)].get();
  }
  /// What clients connect to: the proxies when there are any.
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  /// When the masters were all up (local), or when this object was made (external).
  Clock::time_point started() const { return started_; }

 private:
  void run_fault_command(const char* action, const std::vector<int>& targets);
  void add_proxies_and_endpoints(bool proxies);

  // proxies_ is declared after cluster_, so the proxies close before the
  // servers they forward to are killed.
  std::optional<test::Cluster> cluster_;  // local only
  std::vector<int> ports_;
  std::string fault_command_;  // external only
  bool clock_shim_ = false;
  std::vector<std::unique_ptr<test::FaultProxy>> proxies_;
  std::vector<std::vector<std::unique_ptr<test::FaultProxy>>> links_;  // [client][master]
  std::vector<Endpoint> endpoints_;
  Clock::time_point started_;
};

struct ScheduleConfig {
  Mode mode = Mode::none;
  std::chrono::milliseconds ttl{400};
  std::chrono::milliseconds quarantine{0};
  std::chrono::milliseconds command_timeout{50};
  Clock::time_point begin{};  // first fault no earlier than this
  Clock::time_point end{};    // no fault starts after this; all are healed right after
  std::uint64_t seed = 0;
  /// The clients' drift allowance for a ttl: Mode::clock jumps stay within it.
  std::chrono::milliseconds drift{0};
  /// The worker processes, for Mode::pause_client.
  std::vector<pid_t> clients;
};

/// Runs the faults of one mode, on the calling thread, and remembers what it
/// did so that the report can tell when a majority of masters was healthy.
class FaultSchedule {
 public:
  FaultSchedule(Masters& masters, ScheduleConfig config);

  /// Returns once every fault is healed: at config.end, or soon after
  /// `interrupted` becomes non-zero. Throws what the servers or proxies throw.
  void run(const volatile std::sig_atomic_t& interrupted);

  const std::vector<FaultEvent>& events() const { return events_; }
  /// When the last fault was healed (config.end when there were none).
  Clock::time_point healed() const { return healed_; }
  /// A majority of masters stayed healthy during all of [from, to]. A master
  /// is unhealthy during a fault and for a while after it (recovery()).
  bool majority_healthy(Clock::time_point from, Clock::time_point to) const;
  /// How long after a fault on a master the library may reasonably need
  /// before that master votes again.
  std::chrono::milliseconds recovery(const FaultEvent& event) const;

 private:
  struct Active {
    std::size_t event;          // index into events_
    Clock::time_point heal_at;  // time_point::max() for faults that need no healing
  };

  FaultKind pick_kind();
  std::vector<int> pick_targets(FaultKind kind, const std::vector<int>& free);
  void start(FaultKind kind, std::vector<int> targets);
  void heal(Active& active);
  bool counts_as_unhealthy(const FaultEvent& event) const;
  std::chrono::milliseconds min_kill_downtime() const;
  std::chrono::milliseconds uniform(std::chrono::milliseconds low, std::chrono::milliseconds high);
  std::chrono::milliseconds clock_offset();
  pid_t client(int index) const;
  std::vector<int> pick_clients();
  void cut(const FaultEvent& event, bool heal);
  int partitions_ = 0;  // alternates minority and majority cuts

  Masters& masters_;
  ScheduleConfig config_;
  std::mt19937_64 rng_;
  std::vector<FaultEvent> events_;
  std::vector<Active> active_;
  Clock::time_point healed_{};
};

}  // namespace redlock::chaos
