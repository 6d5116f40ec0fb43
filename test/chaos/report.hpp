#pragma once

#include "record.hpp"
#include "schedule.hpp"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace redlock::chaos {

/// The run's parameters, for the report.
struct RunInfo {
  Mode mode = Mode::none;
  std::chrono::seconds seconds{0};
  int masters = 0;
  int processes = 0;
  int threads = 0;
  int resources = 0;
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds quarantine{0};
  std::uint64_t seed = 0;
  Clock::time_point start{};  // workers started; times in the report are relative to it
  int workers_failed = 0;     // exited non-zero, or killed past their deadline
  int permits = 0;            // --permits (0: the resources' locks)
};

/// Two critical sections on one resource that were both inside their
/// validity at the same time.
struct Overlap {
  Record first;  // the one that started first
  Record second;
  Clock::duration length{};
};

struct Summary {
  std::size_t calls = 0;
  std::size_t acquisitions = 0;
  std::map<std::string, std::size_t> errors;         // lock() failures by errc name
  std::map<std::string, std::size_t> unlock_errors;  // unlock() failures by errc name
  std::size_t overruns = 0;
  std::size_t expired_on_return = 0;  // lock() handed out a lock whose valid_until had passed
  std::size_t overlaps = 0;
  std::size_t shared_overlaps = 0;  // --shared: shared holders beside one another (allowed)
  Clock::duration longest_overlap{};
  std::vector<Overlap> examples;  // the first few, for the text report
  // Fencing: each acquisition's token against the one granted before it on
  // its resource (grant order: when lock() returned).
  std::size_t tokens_checked = 0;
  std::size_t token_inversions = 0;  // not greater than the previous grant's
  std::optional<std::chrono::microseconds> p50_acquire;
  std::optional<std::chrono::microseconds> p99_acquire;
  // unlock() is one round with no contention: the algorithm's own latency.
  std::optional<std::chrono::microseconds> p50_unlock;
  std::optional<std::chrono::microseconds> p99_unlock;
  std::optional<std::chrono::microseconds> max_unlock;
  std::size_t healthy_calls = 0;  // lock() calls made entirely while a majority was healthy
  std::size_t healthy_acquisitions = 0;
  std::optional<std::chrono::milliseconds> first_success_after_faults;
  // The register (Write records): what holders wrote with their tokens.
  std::size_t writes = 0;
  std::size_t writes_accepted = 0;
  std::size_t writes_refused = 0;     // a higher token had written: fencing at work
  std::size_t writes_unanswered = 0;  // no reply from the register
  /// Accepted although the register had taken a higher token before (in its
  /// own order of writes): the write fencing exists to stop.
  std::size_t stale_accepted = 0;
  /// Made after the holder's valid_until: acting on a lock it no longer had.
  std::size_t writes_after_validity = 0;
  /// Made after a later holder of the resource (a higher token) had been
  /// granted the lock, and how many of those the register refused.
  std::size_t superseded_writes = 0;
  std::size_t superseded_refused = 0;
  // --permits: the most holders of one resource at once (within validity),
  // and the grants that made them more than the permits.
  int most_holders = 0;
  std::size_t over_admissions = 0;
  // Liveness: spans longer than the stall threshold in which a resource had
  // no recorded holder while a call waited for it and a majority of masters
  // was healthy: a lock held by nobody who knows it (a stranded lock).
  // Not counted for --permits (each permit is its own lock).
  std::size_t stalls = 0;
  Clock::duration longest_stall{};
  struct Stall {
    int resource;
    Clock::time_point from, to;
  };
  std::vector<Stall> stall_spans;  // listed with the faults (--list-faults)
  // --election: observers' reports, and those with a lower term than one the
  // same observer reported before.
  std::size_t observations = 0;
  std::size_t observer_regressions = 0;
  // --election: reports of a leader that an observer still stood by longer
  // than `report_within` after that leader's tenure ended (resigned, or its
  // validity ran out) while a majority of masters was healthy: "no leader"
  // or a later term came too late, or never.
  std::size_t late_reports = 0;
  Clock::duration longest_late{};
};

/// Merges every worker's records and register writes and checks them.
/// `stall_after`: the liveness check's threshold (shorter than the ttl: a
/// stranded lock blocks its resource for up to the ttl). `report_within`:
/// how long after a leader's tenure ends an observer may still report it
/// (the ttl and a round trip).
Summary summarize(const std::vector<Record>& records, const std::vector<Write>& writes,
                  const FaultSchedule& schedule, int permits, Clock::duration stall_after,
                  Clock::duration report_within);

/// The human-readable lines.
void print_text(std::FILE* out, const RunInfo& run, const Summary& summary, const FaultSchedule& schedule,
                bool list_faults);
/// One JSON object on one line, for scripts.
std::string json_line(const RunInfo& run, const Summary& summary, const FaultSchedule& schedule);

}  // namespace redlock::chaos
