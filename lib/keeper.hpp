#pragma once

#include <uv.h>

#include <redlock/error.hpp>
#include <redlock/lock.hpp>
#include <redlock/options.hpp>

#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <unordered_map>

#include "uv_handle.hpp"

namespace redlock {

/// The locks a Client keeps alive (Client::keep). Each hold has three timers:
/// renewal (every KeepOptions::every), expiry (at the lock's valid_until) and
/// the optional max_hold cap. libuv runs due timers before it reads sockets,
/// so after a stall the expiry is reported before a renewal answer that came
/// too late could count.
class Keeper {
 public:
  using Answer = std::function<void(std::error_code, Lock)>;
  using OnLost = std::function<void(std::error_code)>;
  /// extend(lock, ttl, answer): Client::extend. release(lock): deletes our
  /// value everywhere. post(fn): runs fn on a later loop turn.
  struct Hooks {
    std::function<void(const Lock&, milliseconds, Answer)> extend;
    std::function<void(const Lock&)> release;
    std::function<void(std::function<void()>)> post;
  };

  Keeper(uv_loop_t* loop, Hooks hooks);
  ~Keeper();
  Keeper(const Keeper&) = delete;
  Keeper& operator=(const Keeper&) = delete;

  /// Starts keeping `lock`; `on_lost` runs once, on a later loop turn, if the
  /// hold ends other than by forget().
  void keep(const Lock& lock, KeepOptions options, OnLost on_lost);
  /// unlock: stop keeping, silently. A renewal in flight was written before
  /// the unlock on every connection, so it cannot outlive it.
  void forget(const std::string& value);
  /// The Client is closing: every hold ends with errc::closed.
  void close();

 private:
  struct Hold;

  void renew(Hold& hold);
  void renewed(const std::string& value, std::error_code error, const Lock& lock);
  void arm_expiry(Hold& hold);
  void end(Hold& hold, errc why, bool release);

  uv_loop_t* loop_;
  Hooks hooks_;
  std::unordered_map<std::string, std::unique_ptr<Hold>> holds_;  // by lock value
  // Expires with the Keeper: renewal answers that run after it are dropped.
  std::shared_ptr<const bool> alive_ = std::make_shared<const bool>(true);
};

}  // namespace redlock
