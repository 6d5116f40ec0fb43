#pragma once

/// @file
/// Mutex: a standard TimedLockable over a Redlock.

#include <redlock/blocking.hpp>
#include <redlock/export.hpp>
#include <redlock/lock.hpp>
#include <redlock/options.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <system_error>

namespace redlock {

/// A standard TimedLockable over a Redlock: std::lock_guard,
/// std::unique_lock and std::scoped_lock take it as they take a std::mutex.
///
/// lock() takes the resource across the masters and keeps it alive
/// (Redlock::keep) until unlock(). Threads of one process that share a Mutex
/// queue on a local mutex first, so one of them at a time holds the resource;
/// other processes (and other Mutex objects) are excluded by the masters.
///
/// A distributed lock can end while held: if the masters stop renewing it,
/// lost() turns true and the work must stop (check it, or use
/// valid_until(), before each step that needs exclusion; pass lock_held()'s
/// fencing token to the resource). unlock() never throws: a lost lock's
/// unlock only releases the local side.
class REDLOCK_API Mutex {
 public:
  /// `redlock` must outlive the Mutex. Throws std::invalid_argument for an
  /// empty resource, a ttl outside 1 ms to 2^31-1 ms, or negative keep
  /// options. A ttl the Redlock's options refuse (eaten by the drift
  /// allowance, longer than restart_quarantine) makes lock() throw
  /// errc::invalid_argument.
  Mutex(Redlock& redlock, std::string resource, milliseconds ttl, KeepOptions keep = {});
  /// Unlocks if held.
  ~Mutex();
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  /// Waits until held, without end. Throws std::system_error: errc::closed
  /// when the Redlock is being destroyed, errc::invalid_argument, and
  /// std::errc::resource_deadlock_would_occur when this thread holds it already.
  void lock();
  /// One attempt; false if another holder has it or the masters could not
  /// say (error() says why).
  bool try_lock();
  /// Waits at most `wait`; false when it ran out (error() says why). A wait
  /// of a century or more is a wait without end.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    // In long double milliseconds first: no duration overflows on the way.
    const std::chrono::duration<long double, std::milli> ms = wait;
    return try_lock_within(ms.count());
  }
  /// Waits until `deadline` at most (by its own clock).
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    const auto now = Clock::now();
    if (deadline <= now) return try_lock_within(0);
    return try_lock_for(deadline - now);
  }
  /// Releases the resource on the masters, then the local side. Never
  /// throws. Any thread may call it (std::unique_lock moved to another
  /// thread); when the Mutex is not held it does nothing.
  void unlock() noexcept;

  /// The hold ended other than by unlock(): the lock must not be relied on.
  /// Any thread, any time.
  bool lost() const;
  /// Why the hold was lost, or why this thread's last lock attempt failed;
  /// empty otherwise.
  std::error_code error() const;
  /// The end of the current validity, moved on by every renewal; the epoch
  /// when not held.
  std::chrono::steady_clock::time_point valid_until() const;
  /// The lock as taken (fencing token, ttl); only while held, by the holder.
  const Lock& lock_held() const;
  /// The resource it locks.
  const std::string& resource() const noexcept { return resource_; }

  /// The local side, the holder and its LockGuard, defined in the .cpp, so
  /// that this header brings no <mutex> (whose std::try_lock would join the
  /// overload sets of users' own unqualified try_lock calls).
  struct State;

 private:
  bool try_lock_within(long double wait_ms);

  std::string resource_;
  std::unique_ptr<State> state_;
};

}  // namespace redlock
