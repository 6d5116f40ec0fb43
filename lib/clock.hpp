#pragma once

#include <chrono>
#include <functional>

namespace redlock {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

/// The one place rounds read the time from: Options::clock when set, else
/// steady_clock. Validity is computed from these readings only.
class ClockSource {
 public:
  explicit ClockSource(std::function<TimePoint()> custom) : custom_(std::move(custom)) {}
  TimePoint now() const { return custom_ ? custom_() : Clock::now(); }

 private:
  std::function<TimePoint()> custom_;
};

}  // namespace redlock
