#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace redlock {

/// Reconnect delays: the first retry is immediate, then exponential from
/// `base` up to `cap`, each drawn uniformly from [d/2, d] so that clients
/// that lost the same master do not reconnect in lockstep.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap, std::uint64_t seed)
      : base_(base), cap_(cap), rng_(seed) {}

  std::chrono::milliseconds next() {
    int n = failures_++;
    if (n == 0) return std::chrono::milliseconds{0};
    auto d = base_ * (1LL << std::min(n - 1, 20));
    d = std::min<std::chrono::milliseconds>(d, cap_);
    std::uniform_int_distribution<long long> pick(d.count() / 2, d.count());
    return std::chrono::milliseconds{pick(rng_)};
  }

  void reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds cap_;
  std::mt19937_64 rng_;
  int failures_ = 0;
};

}  // namespace redlock
