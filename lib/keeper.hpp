#pragma once

#include <uv.h>

#include <redlock/error.hpp>
#include <redlock/lock.hpp>
#include <redlock/options.hpp>
#include <redlock/stats.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clock.hpp"
#include "renewal.hpp"
#include "uv_handle.hpp"

namespace redlock {

/// The locks a Client keeps alive (Client::keep). Each hold has a timer at
/// its lock's valid_until (expiry) and, optionally, one for the max_hold cap;
/// renewals run from one timer shared by all holds. When it fires, every hold
/// whose renewal is due, or due within a tenth of its period, is renewed in
/// one batch (Renewal, up to Renewal::max_locks locks per call to a master).
/// Renewing a little early costs at most a tenth more renewals and never
/// delays one, so holds that fall due close together share a call.
/// libuv runs due timers before it reads sockets, so after a stall the expiry
/// is reported before a renewal answer that came too late could count.
class Keeper {
 public:
  using OnLost = std::function<void(std::error_code)>;
  using OnRenewed = std::function<void(TimePoint)>;
  /// renew(items, decided): starts a Renewal and returns it (kept alive while
  /// a hold waits for its answer). lost(lock): the hold of `lock` ended other
  /// than by forget() or close(). release(lock): deletes our value
  /// everywhere (after a loss, unless KeepOptions::release_on_loss is false).
  /// post(fn): runs fn on a later loop turn. now(): the Client's clock.
  /// watch(lock) / unwatch(lock): a hold of `lock` begins / ends (LossWatch
  /// listens for its keys meanwhile); either may be empty.
  struct Hooks {
    std::function<std::shared_ptr<void>(std::vector<Renewal::Item>, Renewal::Decided)> renew;
    std::function<void(const Lock&)> lost;
    std::function<void(const Lock&)> release;
    std::function<void(std::function<void()>)> post;
    std::function<TimePoint()> now;
    std::function<void(const Lock&)> watch;
    std::function<void(const Lock&)> unwatch;
  };

  Keeper(uv_loop_t* loop, Hooks hooks);
  ~Keeper();
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;

  /// Starts keeping `lock`; `on_lost` runs once, on a later loop turn, if the
  /// hold ends other than by forget().
  void keep(const Lock& lock, KeepOptions options, OnLost on_lost, OnRenewed on_renewed);
  /// unlock: stop keeping, silently, and cancel an on_lost not yet run. A
  /// renewal in flight was written before the unlock on every connection, so
  /// it cannot outlive it.
  void forget(const std::string& value);
  /// Renews every hold now: a master restarted, and a majority may no longer
  /// hold them (the loss is then heard at once, not at the next renewal). A
  /// hold whose renewal or extension is in flight, which the master may have
  /// run before the loss, is renewed again once that is answered.
  void renew_now();
  /// The same for the hold of the lock with `value` only (none: nothing): a
  /// master said one of its keys is gone (LossWatch).
  void renew_now(const std::string& value);
  /// The caller is extending (or continuing) the lock with `value`; its
  /// command is about to be written. While it is in flight no renewal of a
  /// kept lock goes out, and the answer of a renewal written before it is
  /// ignored: the masters run that renewal first, so the extension's answer
  /// is the one that stands.
  void extending(const std::string& value);
  /// That extension is decided, in the callback of the answer that decided
  /// it: a kept lock is renewed to the new ttl from now on (its period too,
  /// when it was the default ttl / 3) and takes the extension's validity, or
  /// its hold ends with the extension's error. Returns the error to answer
  /// the extension with instead of success when the hold ended while the
  /// extension was in flight (its validity ran out, max_hold): our value is
  /// then being released, after the extension, on every master.
  std::error_code extension_decided(const Lock& lock, std::error_code error);
  /// The validity of the kept lock with `value` now; nullopt when not kept.
  std::optional<TimePoint> valid_until(const std::string& value) const;
  /// The Client is closing: every hold ends with errc::closed.
  void close();

  /// Holds that ended other than by forget(), by the error on_lost got.
  const Outcomes& lost() const { return lost_; }
  /// Renewals that succeeded.
  std::uint64_t renewals() const { return renewals_; }
  /// Holds now.
  std::size_t kept() const { return holds_.size(); }

 private:
  struct Hold;
  using Due = std::pair<std::uint64_t, Hold*>;  // (uv_now() ms, hold)

  void tick();
  void schedule(Hold& hold, std::uint64_t due);
  void arm();
  void schedule_next(Hold& hold);
  void renew_soon(Hold& hold, std::uint64_t now);
  void send(std::vector<Hold*>& batch);
  void send_batch(std::vector<Hold*>& batch, std::size_t from, std::size_t to);
  static int renewal_kind(const Hold& hold);
  void renewed(const std::string& value, std::error_code error, TimePoint valid_until);
  void arm_expiry(Hold& hold);
  void end(Hold& hold, errc why, bool release);
  void erase(std::unordered_map<std::string, std::unique_ptr<Hold>>::iterator it);
  void forget_noticed();

  uv_loop_t* loop_;
  Hooks hooks_;
  std::unordered_map<std::string, std::unique_ptr<Hold>> holds_;  // by lock value
  std::set<Due> due_;                                             // the next renewal of every hold
  // Ended holds whose on_lost is posted but has not run, by lock value.
  std::unordered_map<std::string, std::weak_ptr<OnLost>> noticing_;
  // Holds that ended while the caller's extensions were in flight, by lock
  // value: each of those extensions is answered with the hold's error.
  struct Ended {
    errc why;
    int extensions;  // still to be answered
  };
  std::unordered_map<std::string, Ended> ended_extending_;
  std::size_t prune_at_ = 64;
  Timer tick_;
  std::uint64_t armed_for_ = 0;  // when tick_ fires; 0 when stopped
  Outcomes lost_;
  std::uint64_t renewals_ = 0;
};

}  // namespace redlock
