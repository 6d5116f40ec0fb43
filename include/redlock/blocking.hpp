#pragma once

#include <redlock/error.hpp>
#include <redlock/export.hpp>
#include <redlock/lock.hpp>
#include <redlock/options.hpp>
#include <redlock/result.hpp>

#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace redlock {

/// The blocking API. Thread-safe: any number of threads may call it at once.
/// It owns one thread that runs a libuv loop with a Client; each call hands
/// its operation to that thread and waits for the answer.
class REDLOCK_API Redlock {
 public:
  /// Throws std::invalid_argument when the options are invalid.
  explicit Redlock(Options options);
  /// Fails calls still waiting with errc::closed and joins the loop thread.
  ~Redlock();
  Redlock(const Redlock&) = delete;
  Redlock& operator=(const Redlock&) = delete;

  /// See Client::lock.
  Result<Lock> lock(std::string resource, milliseconds ttl);
  /// See Client::lock with a wait.
  Result<Lock> lock(std::string resource, milliseconds ttl, milliseconds wait);
  /// See Client::try_lock.
  Result<Lock> try_lock(std::string resource, milliseconds ttl);
  /// See Client::extend.
  Result<Lock> extend(const Lock& lock, milliseconds ttl);
  /// See Client::continue_lock.
  Result<Lock> continue_lock(const Lock& lock, milliseconds ttl);
  /// See Client::unlock.
  std::error_code unlock(const Lock& lock);
  /// See Client::master_errors; asked of the loop thread, so it waits for
  /// that thread's current work. Empty once the Redlock is being destroyed.
  std::vector<MasterError> master_errors();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Holds a Lock and unlocks it when destroyed. The destructor never throws;
/// call unlock() yourself to see its error.
class REDLOCK_API LockGuard {
 public:
  /// Owns `lock`, taken from `redlock`, which must outlive the guard.
  LockGuard(Redlock& redlock, Lock lock) : redlock_(&redlock), lock_(std::move(lock)), held_(true) {}
  ~LockGuard() { (void)unlock(); }
  /// Takes over what `other` owned; `other` then owns nothing.
  LockGuard(LockGuard&& other) noexcept
      : redlock_(other.redlock_), lock_(std::move(other.lock_)), held_(std::exchange(other.held_, false)) {}
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  LockGuard& operator=(LockGuard&&) = delete;

  /// The lock, as last extended.
  const Lock& lock() const noexcept { return lock_; }
  /// False once unlocked, released, moved from, or after a failed extend().
  bool owns_lock() const noexcept { return held_; }

  /// Extends the held lock; on failure the guard no longer owns it.
  std::error_code extend(milliseconds ttl);
  /// Unlocks now; later calls and the destructor do nothing.
  std::error_code unlock() noexcept;
  /// Gives up ownership without unlocking.
  Lock release() noexcept {
    held_ = false;
    return std::move(lock_);
  }

 private:
  Redlock* redlock_;
  Lock lock_;
  bool held_;
};

}  // namespace redlock
