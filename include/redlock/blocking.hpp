#pragma once

/// @file
/// The blocking, thread-safe facade: Redlock, LockGuard and Cancellation.

#include <redlock/error.hpp>
#include <redlock/export.hpp>
#include <redlock/inspect.hpp>
#include <redlock/lock.hpp>
#include <redlock/options.hpp>
#include <redlock/result.hpp>
#include <redlock/stats.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace redlock {

class Client;

/// Ends blocking calls that wait (Redlock::lock with a wait, lock_permit)
/// from another thread: they return errc::canceled, having left their place
/// in line (Client::cancel). Give one to any number of calls; once
/// cancelled it stays cancelled, and a call given it then returns at once.
/// Thread-safe; it may outlive the Redlock.
class REDLOCK_API Cancellation {
 public:
  Cancellation();
  /// Cancels every call waiting with it now, and every later one.
  void cancel();
  /// cancel() was called.
  bool canceled() const;

  struct State;
  /// The shared state the calls given this register with.
  const std::shared_ptr<State>& state() const noexcept { return state_; }

 private:
  std::shared_ptr<State> state_;
};

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
  /// The same, ended early by `cancel` (errc::canceled). Not reentrant: a
  /// cancellable call always goes to the masters.
  Result<Lock> lock(std::string resource, milliseconds ttl, milliseconds wait, const Cancellation& cancel);
  /// See Client::try_lock.
  Result<Lock> try_lock(std::string resource, milliseconds ttl);
  /// See Client::lock_permit: one of `permits` permits of `resource`,
  /// waiting at most `wait`. Never reentrant: each call takes a permit.
  Result<Lock> lock_permit(std::string resource, int permits, milliseconds ttl, milliseconds wait);
  /// The same, ended early by `cancel` (errc::canceled).
  Result<Lock> lock_permit(std::string resource, int permits, milliseconds ttl, milliseconds wait,
                           const Cancellation& cancel);
  /// See Client::lock_shared: a shared (read) lock, waiting at most `wait`.
  /// Never reentrant: each call takes a shared hold of its own.
  Result<Lock> lock_shared(std::string resource, milliseconds ttl, milliseconds wait);
  /// The same, ended early by `cancel` (errc::canceled).
  Result<Lock> lock_shared(std::string resource, milliseconds ttl, milliseconds wait,
                           const Cancellation& cancel);
  /// See Client::try_lock_shared.
  Result<Lock> try_lock_shared(std::string resource, milliseconds ttl);
  /// See Client::lock_all: several resources at once, all or none.
  Result<Lock> lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait);
  /// The same, ended early by `cancel` (errc::canceled).
  Result<Lock> lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait,
                        const Cancellation& cancel);
  /// See Client::extend.
  Result<Lock> extend(const Lock& lock, milliseconds ttl);
  /// See Client::continue_lock.
  Result<Lock> continue_lock(const Lock& lock, milliseconds ttl);
  /// See Client::unlock.
  std::error_code unlock(const Lock& lock);
  /// See Client::master_errors; asked of the loop thread, so it waits for
  /// that thread's current work. Empty once the Redlock is being destroyed.
  std::vector<MasterError> master_errors();
  /// See Client::stats; asked of the loop thread, like master_errors().
  /// Empty once the Redlock is being destroyed.
  Stats stats();
  /// See Client::holder: who holds `resource`, from one read of every master.
  Result<ResourceReport> holder(std::string resource);
  /// Client::keep on the loop thread: renews `lock` until unlock(lock).
  /// `on_lost` (may be empty) runs on the loop thread, at most once, if the
  /// hold ends other than by unlock(); errc::closed at once on this thread
  /// when the Redlock is being destroyed. Returns without waiting.
  /// With Options::reentrant, keeping a lock this Redlock holds at several
  /// levels shares the first keep's renewals; a level's on_lost is dropped
  /// by the unlock() of that level (nested order).
  void keep(const Lock& lock, KeepOptions options, std::function<void(std::error_code)> on_lost,
            std::function<void(std::chrono::steady_clock::time_point)> on_renewed = nullptr);

  class Impl;

 private:
  friend class Leadership;  // runs its Election on this Redlock's loop thread
  /// Runs `task` on the loop thread; false once the Redlock is being destroyed.
  bool on_loop(std::function<void(Client&)> task);

  std::unique_ptr<Impl> impl_;
};

/// Holds a Lock and unlocks it when destroyed. The destructor never throws;
/// call unlock() yourself to see its error.
class REDLOCK_API LockGuard {
 public:
  /// Owns `lock`, taken from `redlock`, which must outlive the guard.
  LockGuard(Redlock& redlock, Lock lock) : redlock_(&redlock), lock_(std::move(lock)), held_(true) {}
  /// Also keeps the lock alive while the guard lives (Redlock::keep). The
  /// guard's state then follows the hold: lost(), error(), valid_until().
  /// `on_lost` (may be empty) runs once on the Redlock's loop thread if the
  /// hold ends other than by unlock(); it must not block, nor wait for a
  /// call on this Redlock.
  LockGuard(Redlock& redlock, Lock lock, KeepOptions options,
            std::function<void(std::error_code)> on_lost = nullptr);
  ~LockGuard() { (void)unlock(); }
  /// Takes over what `other` owned; `other` then owns nothing.
  LockGuard(LockGuard&& other) noexcept
      : redlock_(other.redlock_),
        lock_(std::move(other.lock_)),
        held_(std::exchange(other.held_, false)),
        kept_(std::move(other.kept_)) {}
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  LockGuard& operator=(LockGuard&&) = delete;

  /// The lock as taken (or last extended by extend()); see valid_until().
  const Lock& lock() const noexcept { return lock_; }
  /// Not yet unlocked or released (a kept lock may still have been lost).
  bool owns_lock() const noexcept { return held_; }

  // Thread-safe reads of a kept lock's state (any thread, any time).
  /// The hold ended other than by unlock(): the lock must not be relied on.
  bool lost() const;
  /// Why it was lost (see Client::keep); empty while held or when not kept.
  std::error_code error() const;
  /// The end of the current validity, moved on by every renewal.
  std::chrono::steady_clock::time_point valid_until() const;

  /// Extends the held lock; on failure the guard no longer owns it.
  std::error_code extend(milliseconds ttl);
  /// Unlocks now; later calls and the destructor do nothing.
  std::error_code unlock() noexcept;
  /// Gives up ownership without unlocking. A kept lock stays kept until
  /// Redlock::unlock(lock).
  Lock release() noexcept {
    held_ = false;
    return std::move(lock_);
  }

  struct Kept;

 private:
  Redlock* redlock_;
  Lock lock_;
  bool held_;
  std::shared_ptr<Kept> kept_;  // only when kept
};

}  // namespace redlock
