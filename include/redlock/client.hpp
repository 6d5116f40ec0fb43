#pragma once

/// @file
/// The asynchronous API on your own libuv loop: Client.

#include <redlock/error.hpp>
#include <redlock/export.hpp>
#include <redlock/inspect.hpp>
#include <redlock/lock.hpp>
#include <redlock/options.hpp>
#include <redlock/stats.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

struct uv_loop_s;
/// libuv's loop, as uv.h declares it: this header needs no uv.h.
typedef struct uv_loop_s uv_loop_t;  // NOLINT(modernize-use-using): matches uv.h

namespace redlock {

struct ClientAccess;

/// The asynchronous API, on the caller's libuv loop.
///
/// Threading: a Client belongs to the thread that runs its loop. Construct it,
/// call it and destroy it on that thread only (use Redlock from other threads).
///
/// Callbacks: each callback is called exactly once, on the loop thread, and
/// never from inside the call that took it: always on a later loop turn, even
/// for an invalid argument. Unlike libuv's "error means no callback", every
/// call here is answered. Errors are redlock::errc values.
///
/// Lifetime: the Client starts connecting to every master when constructed.
/// close() and the destructor are safe with operations in flight: their
/// callbacks get errc::closed. Either releases every libuv handle the Client
/// opened; run the loop until uv_run() returns so they finish closing, and then
/// uv_loop_close() succeeds.
///
/// Signals: commands are written with send(MSG_NOSIGNAL). Only when a socket's
/// buffer is full does libuv write the rest, and that write can raise SIGPIPE
/// if the master died meanwhile: like any libuv program, ignore SIGPIPE.
class REDLOCK_API Client {
 public:
  /// Answers lock, try_lock, extend and continue_lock: an error, or the Lock.
  using LockCallback = std::function<void(std::error_code, Lock)>;
  /// Names a lock() call for cancel(); never 0, never reused by a Client.
  using CallId = std::uint64_t;
  /// Answers unlock.
  using UnlockCallback = std::function<void(std::error_code)>;
  /// Told once why a keep() hold ended.
  using LostCallback = std::function<void(std::error_code)>;
  /// Answers holder(): errc::unavailable when fewer than a majority could say.
  using HolderCallback = std::function<void(std::error_code, ResourceReport)>;
  /// Told the new validity after each successful keep() renewal.
  using RenewedCallback = std::function<void(std::chrono::steady_clock::time_point valid_until)>;

  /// Throws std::invalid_argument when the options are invalid.
  Client(uv_loop_t* loop, Options options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  /// Acquires `resource` for `ttl`, retrying Options::retry_count times.
  /// Between attempts it waits as the form below does, for at most
  /// retry_delay + jitter each time.
  /// Returns the call's id for cancel().
  CallId lock(std::string resource, milliseconds ttl, LockCallback cb);
  /// Attempts until acquired or until `wait` has passed since this call
  /// (0: one attempt). Between attempts it sleeps until the first of: a
  /// release of `resource` heard from any master, the moment the holder's
  /// keys expire on enough masters, retry_delay + jitter, the deadline.
  /// Within this Client, waiters on one resource go first come, first served.
  /// errc::timeout when the wait ran out while others held the lock; the
  /// last attempt's error otherwise.
  /// Returns the call's id for cancel().
  CallId lock(std::string resource, milliseconds ttl, milliseconds wait, LockCallback cb);
  /// A semaphore: takes one of `permits` permits of `resource` (1 to
  /// 10,000), waiting at most `wait`, so that at most `permits` holders hold
  /// one at once, across processes. Each permit is a lock of its own on the
  /// masters (key_prefix + {resource} + ":permit:" + N), so the quorum rule
  /// holds per permit. The Lock's `permit` says which; extend, keep, unlock
  /// and continue_lock take it as any Lock. errc::timeout when every permit
  /// stayed held until the deadline. Returns the call's id for cancel().
  CallId lock_permit(std::string resource, int permits, milliseconds ttl, milliseconds wait, LockCallback cb);
  /// One attempt, no retries.
  void try_lock(std::string resource, milliseconds ttl, LockCallback cb);
  /// A shared (read) lock of `resource`: held beside any number of other
  /// shared holders, never beside an exclusive holder (lock() and try_lock()
  /// of the same resource). Waits as lock() does, for at most `wait`. A
  /// writer waiting (a lock() with a wait refused by shared holders) keeps
  /// new shared holders out until it has had the lock, so a stream of
  /// readers cannot starve it; the cost is that readers wait behind writers.
  /// The Lock has `shared` set; extend, continue_lock, keep, unlock and
  /// fencing take it as any Lock. Returns the call's id for cancel().
  CallId lock_shared(std::string resource, milliseconds ttl, milliseconds wait, LockCallback cb);
  /// One attempt at a shared lock, no retries.
  void try_lock_shared(std::string resource, milliseconds ttl, LockCallback cb);
  /// Several resources at once (1 to 1,000, each named once), all or none,
  /// waiting at most `wait` (0: one attempt). Each master sets all of their
  /// keys or none in one script, so no caller ever holds some of them while
  /// it waits for the others: callers naming the same resources in any order
  /// never deadlock. The Lock's `resources` lists them in the order given,
  /// and `resource` is the first; extend, continue_lock, keep, unlock and
  /// fencing (one token, above every earlier token of each resource) cover
  /// all of them. Between attempts it sleeps until a release of any of them,
  /// the holders' keys expiring on enough masters, retry_delay + jitter or
  /// the deadline; it neither joins this Client's lines per resource nor
  /// queues at their gates, so under steady contention single-resource
  /// waiters go first. The names with key_prefix are 64 KiB at most in all. errc::timeout when some
  /// stayed held until the deadline (errc::not_acquired for wait 0, a
  /// single attempt). Returns the call's id for cancel().
  CallId lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait, LockCallback cb);
  /// Sets the remaining time to `ttl` on a quorum where the value is still
  /// ours. Never re-creates a vanished key. On failure the lock is lost.
  void extend(const Lock& lock, milliseconds ttl, LockCallback cb);
  /// Renews where the value is ours and sets it where the key is absent; the
  /// new Lock says whether ownership was continuous. On failure the lock is lost.
  void continue_lock(const Lock& lock, milliseconds ttl, LockCallback cb);
  /// Keeps `lock` alive until unlock(lock): extends it to Lock::ttl every
  /// KeepOptions::every (default ttl / 3), with extend()'s rules. `on_lost`
  /// runs exactly once if the hold ends other than by unlock(): a refused
  /// renewal (errc::not_held, errc::unavailable; our value is then deleted
  /// everywhere), validity running out before a renewal succeeded
  /// (errc::expired, seen by a timer at valid_until, so a stalled loop reports
  /// it first thing; the lock is released), max_hold reached (errc::timeout;
  /// the lock is released), or close() (errc::closed). After unlock(lock),
  /// on_lost never runs and no renewal outlives the unlock. extend() and
  /// continue_lock() of a kept lock move its renewals to their ttl; a refused
  /// one ends the hold with its error.
  /// Renewals due within a tenth of their period of one another go to each
  /// master as one script call (up to 1,000 locks each).
  /// `on_renewed` (may be empty) is told the new valid_until after each
  /// renewal; it runs on the loop thread from inside the library: record and
  /// return, make no call on the Client from it.
  void keep(const Lock& lock, KeepOptions options, LostCallback on_lost,
            RenewedCallback on_renewed = nullptr);
  /// Deletes our value on every master; errc::not_held when a quorum no
  /// longer held it.
  void unlock(const Lock& lock, UnlockCallback cb);
  /// Fails pending operations with errc::closed, closes every connection and
  /// then calls `cb` (may be empty). Later calls are answered with errc::closed.
  /// What was issued before (an unlock) still goes to every connected master:
  /// a connection with commands in flight stays open, reading, until the
  /// master closes its side; it closes anyway once the master answered
  /// nothing for min(command_timeout, 500 ms), and after 5 s in all, so
  /// uv_run() may return that much later.
  void close(std::function<void()> cb);
  /// Ends the lock() call `id` if it has not been answered yet: it is
  /// answered errc::canceled on a later turn, it leaves its place in line
  /// (the next waiter goes on), and a lock its attempt in flight may still
  /// win is released at once. Does nothing for a call already answered, or
  /// an id this Client never gave.
  void cancel(CallId id);

  /// Who holds `resource`, from one read of every master over this Client's
  /// connections, changing nothing: `quorum` says a majority holds one value
  /// (so nobody else can take it now), `mode` "exclusive" or "shared", the
  /// `owner` and `since` its value carries, `ttl` the least time left among
  /// those masters, `fencing_token` the largest counter, `waiting` the
  /// Clients queued at its gate, `shared_holders` the live shared holds.
  /// errc::unavailable when fewer than a majority answered (a master in
  /// restart quarantine does not count). A snapshot: by the time it is read,
  /// the lock may have changed hands; only a lock call decides.
  void holder(std::string resource, HolderCallback cb);

  /// The masters that cannot vote now, or whose last answer was a failure,
  /// with the cause, in Options::masters order; empty when every master is
  /// fine (and after close()). Ask it when a call failed with
  /// errc::unavailable to learn which masters failed and why. Loop thread only.
  std::vector<MasterError> master_errors() const;
  /// A snapshot of this Client's counters: per master its state, role,
  /// votes, timeouts, reconnects and round-trip time; calls by kind and
  /// outcome; acquire and unlock latencies. After close(), every counter
  /// stays as it was, each master is down ("the client is closed"), and
  /// calls count as closed. Loop thread only.
  Stats stats() const;

  class Impl;

 private:
  friend struct ClientAccess;  // the library's own layers (lib/client_access.hpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock
