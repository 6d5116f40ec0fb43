#pragma once

// Pure arithmetic of the Redlock algorithm: no I/O, no clock.

#include <chrono>
#include <cstddef>

namespace redlock::quorum {

/// Votes needed out of n: a strict majority.
constexpr int majority(int n) {
  return n / 2 + 1;
}

/// A round can still reach a majority while the yes votes plus the masters
/// that have not answered reach it.
constexpr bool still_possible(int yes, int against, int n) {
  return yes + (n - yes - against) >= majority(n);
}

/// More masters failed than a majority can spare: fewer than a majority could
/// answer, so the outcome is "unavailable" rather than "held by someone else".
constexpr bool too_few_answered(int failed, int n) {
  return failed > n - majority(n);
}

/// The allowance for clock drift between us and the masters:
/// ttl * drift_factor + drift_constant, rounded up to whole microseconds.
inline std::chrono::microseconds drift(std::chrono::milliseconds ttl, double factor,
                                       std::chrono::milliseconds constant) {
  auto scaled = static_cast<long long>(static_cast<double>(ttl.count()) * factor * 1000.0 + 0.999);
  return std::chrono::microseconds{scaled} + constant;
}

/// The end of validity for a lock whose round started at t0.
template <class TimePoint>
TimePoint valid_until(TimePoint t0, std::chrono::milliseconds ttl, std::chrono::microseconds drift) {
  return t0 + ttl - drift;
}

}  // namespace redlock::quorum
