#pragma once

#include <chrono>
#include <thread>

#include "timeouts.hpp"

namespace redlock::test {

/// Polls `pred` until it holds or `deadline` (scaled) passes; returns pred().
/// For state the test reads from outside, such as a straggler master that has
/// not yet run a command whose round already decided.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds deadline = std::chrono::seconds(2)) {
  auto until = std::chrono::steady_clock::now() + scaled(deadline);
  for (int i = 0; i < 100000 && std::chrono::steady_clock::now() < until; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return pred();
}

}  // namespace redlock::test
