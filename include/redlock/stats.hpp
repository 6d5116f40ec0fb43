#pragma once

/// @file
/// Counters and latency histograms (Client::stats), and their Prometheus text.

#include <redlock/export.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace redlock {

/// A latency distribution in fixed buckets: cheap to record (no allocation),
/// and what Prometheus histograms expect.
class REDLOCK_API LatencyHistogram {
 public:
  /// The buckets' upper bounds, in microseconds; one more bucket holds what
  /// is above the last.
  static constexpr std::array<std::uint32_t, 16> bounds_us{
      25,     50,     100,    250,     500,     1'000,   2'500,     5'000,
      10'000, 25'000, 50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000};
  /// The number of buckets: bounds_us.size() + 1.
  static constexpr std::size_t buckets = bounds_us.size() + 1;

  /// Counts one sample (negative durations count as 0).
  void record(std::chrono::microseconds latency) noexcept;
  /// Samples recorded.
  std::uint64_t count() const noexcept { return count_; }
  /// The sum of all samples.
  std::chrono::microseconds sum() const noexcept { return std::chrono::microseconds(sum_us_); }
  /// Samples in bucket `i` alone (not cumulative); i == bounds_us.size() is
  /// the bucket above the last bound. 0 for any other i.
  std::uint64_t bucket(std::size_t i) const noexcept { return i < buckets ? counts_[i] : 0; }
  /// An upper estimate of quantile `q` (0..1): the bound of the bucket it
  /// falls in. 0 without samples; above the last bound, the largest bound.
  std::chrono::microseconds quantile(double q) const noexcept;

 private:
  std::array<std::uint64_t, buckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_us_ = 0;
};

/// How calls of one kind ended, by their error (ok: no error).
struct REDLOCK_API Outcomes {
  /// Succeeded: acquired, extended, released (or, for Stats::lost, unused).
  std::uint64_t ok = 0;
  /// errc::not_acquired.
  std::uint64_t not_acquired = 0;
  /// errc::unavailable.
  std::uint64_t unavailable = 0;
  /// errc::timeout.
  std::uint64_t timeout = 0;
  /// errc::not_held.
  std::uint64_t not_held = 0;
  /// errc::invalid_argument.
  std::uint64_t invalid_argument = 0;
  /// errc::closed.
  std::uint64_t closed = 0;
  /// errc::expired.
  std::uint64_t expired = 0;
  /// errc::canceled.
  std::uint64_t canceled = 0;

  /// Counts one outcome; an error that is not a redlock::errc is not counted.
  void count(std::error_code error) noexcept;
  /// All outcomes counted.
  std::uint64_t total() const noexcept;
};

/// Where a master's connection stands.
enum class MasterState {
  /// Resolving, connecting or in the handshake, with no failure since the last good one.
  connecting,
  /// Connected and voting.
  up,
  /// Connected, but in restart quarantine (Options::restart_quarantine): no vote yet.
  quarantined,
  /// Not voting because something failed: see MasterStats::cause.
  down,
};

/// The name of `state`: "connecting", "up", "quarantined" or "down".
REDLOCK_API const char* to_string(MasterState state) noexcept;

/// What one master did for this Client since it was constructed.
struct REDLOCK_API MasterStats {
  /// The master as a URI, without the password (Endpoint::to_string()).
  std::string endpoint;
  /// Where its connection stands now.
  MasterState state = MasterState::connecting;
  /// Its role at the last handshake ("master", "slave", ...); empty before one.
  std::string role;
  /// Votes it gave: SET NX succeeded, a script acted on our value. A renewal
  /// batch counts one vote per lock.
  std::uint64_t votes_granted = 0;
  /// Votes it refused: another owner's value, or no key.
  std::uint64_t votes_refused = 0;
  /// Votes that failed: an error reply, no reply in time, the connection
  /// lost, or it did not vote (quarantine, not a master).
  std::uint64_t votes_failed = 0;
  /// Commands that got no reply within command_timeout, including those that
  /// waited for a connection that did not come in time.
  std::uint64_t timeouts = 0;
  /// Handshakes completed after the first: connections lost and made again.
  std::uint64_t reconnects = 0;
  /// Smoothed round-trip time of its recent replies (weight 1/8 per reply,
  /// as TCP's); 0 before the first reply.
  std::chrono::microseconds rtt{0};
  /// Why it does not vote, or what failed last (MasterError::cause); empty
  /// when it votes and its last answer was good.
  std::string cause;
};

/// A snapshot of a Client's counters: Client::stats(), Redlock::stats().
/// Counters only grow; compare two snapshots for rates.
struct REDLOCK_API Stats {
  /// One entry per master, in Options::masters order.
  std::vector<MasterStats> masters;
  /// lock() and try_lock() calls by outcome.
  Outcomes acquire;
  /// extend() calls by outcome.
  Outcomes extend;
  /// continue_lock() calls by outcome.
  Outcomes continue_lock;
  /// unlock() calls by outcome.
  Outcomes unlock;
  /// keep() holds that ended other than by unlock, by the error on_lost got.
  Outcomes lost;
  /// keep() renewals that succeeded.
  std::uint64_t renewals = 0;
  /// Locks kept now.
  std::uint64_t kept = 0;
  /// lock() and try_lock(), from the call to the answer, whatever it was.
  LatencyHistogram acquire_latency;
  /// unlock(), from the call to the answer.
  LatencyHistogram unlock_latency;
};

/// `stats` in the Prometheus text exposition format (version 0.0.4), every
/// metric named `prefix` + "_" + its name (a character a metric name cannot
/// hold becomes '_'); per-master series carry a `master` label (the endpoint,
/// no password; a byte that is not UTF-8 becomes U+FFFD).
REDLOCK_API std::string to_prometheus(const Stats& stats, std::string_view prefix = "redlock");

}  // namespace redlock
