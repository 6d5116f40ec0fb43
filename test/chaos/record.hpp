#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace redlock::chaos {

using Clock = std::chrono::steady_clock;

// steady_clock is CLOCK_MONOTONIC on Linux, one clock for the whole host, so a
// time point written by one process means the same instant in another. Time
// points cross process boundaries (command line, record files) as integer
// nanoseconds since that clock's epoch.
inline std::int64_t to_ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
inline Clock::time_point from_ns(std::int64_t ns) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds{ns}));
}

/// One lock() call by one worker thread, as that thread saw it.
struct Record {
  int process = 0;
  int thread = 0;
  int resource = 0;
  Clock::time_point called{};    // lock() was called
  Clock::time_point returned{};  // lock() returned: the critical section starts here
  /// 0 when acquired; a redlock::errc value; -1 for an error of another category.
  int error = 0;
  // Acquired only.
  Clock::time_point left{};         // the holder left the critical section (before unlock)
  Clock::time_point valid_until{};  // Lock::valid_until
  Clock::time_point unlocked{};     // unlock() returned
  int unlock_error = 0;             // as `error`, for that unlock()
  std::uint64_t fencing_token = 0;  // Lock::fencing_token (workers run with Options::fencing)
  int permit = -1;                  // Lock::permit (--permits); -1 for a lock of the resource
  int shared = 0;                   // 1: a shared hold (--shared), beside which others may hold

  /// An observer's report (--election), not a lock call: `thread` is
  /// observer_thread, `resource` the election, `returned` when it was
  /// reported, `fencing_token` the term, `permit` 1 if someone led, else 0.
  static constexpr int observer_thread = -1;
  bool is_observation() const { return thread == observer_thread; }

  bool acquired() const { return error == 0; }
  /// Left after valid_until: exclusion was no longer promised at the end.
  bool overran() const { return acquired() && left > valid_until; }
  /// The part of the critical section during which the lock was still valid.
  Clock::time_point valid_end() const { return left < valid_until ? left : valid_until; }
};

/// One line of text, newline included; parse() reads it back.
inline std::string format(const Record& r) {
  char line[256];
  std::snprintf(line, sizeof line, "%d %d %d %lld %lld %d %lld %lld %lld %d %llu %d %d\n", r.process,
                r.thread, r.resource, static_cast<long long>(to_ns(r.called)),
                static_cast<long long>(to_ns(r.returned)), r.error, static_cast<long long>(to_ns(r.left)),
                static_cast<long long>(to_ns(r.valid_until)), static_cast<long long>(to_ns(r.unlocked)),
                r.unlock_error, static_cast<unsigned long long>(r.fencing_token), r.permit, r.shared);
  return line;
}

/// False for a line that is not a whole record (a worker killed mid-write).
inline bool parse(const std::string& line, Record& r) {
  long long called = 0, returned = 0, left = 0, valid_until = 0, unlocked = 0;
  unsigned long long token = 0;
  char end = 0;
  const int n = std::sscanf(line.c_str(), "%d %d %d %lld %lld %d %lld %lld %lld %d %llu %d %d%c", &r.process,
                            &r.thread, &r.resource, &called, &returned, &r.error, &left, &valid_until,
                            &unlocked, &r.unlock_error, &token, &r.permit, &r.shared, &end);
  if (n != 14 || end != '\n') return false;
  r.fencing_token = token;
  r.called = from_ns(called);
  r.returned = from_ns(returned);
  r.left = from_ns(left);
  r.valid_until = from_ns(valid_until);
  r.unlocked = from_ns(unlocked);
  return true;
}

/// One write of a holder to the fenced register (the resource the lock
/// protects), made with its fencing token when it enters its critical section
/// and again just before it leaves.
struct Write {
  int process = 0;
  int thread = 0;
  int resource = 0;
  int permit = -1;  // the holder's Lock::permit
  std::uint64_t token = 0;
  Clock::time_point invoked{};
  Clock::time_point completed{};
  /// 1 accepted, 0 refused (a higher token had written), -1 no answer.
  int accepted = -1;
  /// The register's order of writes (one counter for every resource).
  long long seq = 0;
};

inline std::string format(const Write& w) {
  char line[160];
  std::snprintf(line, sizeof line, "%d %d %d %d %llu %lld %lld %d %lld\n", w.process, w.thread, w.resource,
                w.permit, static_cast<unsigned long long>(w.token), static_cast<long long>(to_ns(w.invoked)),
                static_cast<long long>(to_ns(w.completed)), w.accepted, w.seq);
  return line;
}

inline bool parse(const std::string& line, Write& w) {
  unsigned long long token = 0;
  long long invoked = 0, completed = 0;
  char end = 0;
  const int n = std::sscanf(line.c_str(), "%d %d %d %d %llu %lld %lld %d %lld%c", &w.process, &w.thread,
                            &w.resource, &w.permit, &token, &invoked, &completed, &w.accepted, &w.seq, &end);
  if (n != 10 || end != '\n') return false;
  w.token = token;
  w.invoked = from_ns(invoked);
  w.completed = from_ns(completed);
  return true;
}

}  // namespace redlock::chaos
