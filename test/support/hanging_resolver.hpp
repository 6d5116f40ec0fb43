#pragma once

// A getaddrinfo() interposer for tests of name resolution. Link
// support/hanging_resolver.cpp into one test executable only: it defines
// getaddrinfo itself, so every call in that process (libuv's, ours) goes
// through it.
//
// Names ending in ".hang.test" block, like a DNS server that never answers,
// until release() (then they fail with EAI_NONAME) or a 30 s safety cap.
// Other names go to the real getaddrinfo. Every call is counted per name.

#include <string>

namespace redlock::test {

/// The interposer's switch and counters for one test. Only one may exist at a
/// time. Thread-safe.
class HangingNames {
 public:
  /// Zeroes the counters; ".hang.test" names block from now on.
  HangingNames();
  /// release(), then waits (5 s, scaled) until no call is inside the
  /// interposer, so no lookup thread is still blocked when the test ends.
  ~HangingNames();
  HangingNames(const HangingNames&) = delete;
  HangingNames& operator=(const HangingNames&) = delete;

  /// Blocked calls return EAI_NONAME now, and so do later ones for such names.
  void release();

  /// getaddrinfo calls for `name` since the constructor.
  int calls(const std::string& name) const;
  /// Calls for `name` inside getaddrinfo right now.
  int in_flight(const std::string& name) const;
  /// The most calls for `name` that were inside getaddrinfo at once.
  int max_in_flight(const std::string& name) const;
};

}  // namespace redlock::test
