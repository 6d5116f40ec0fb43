#pragma once

#include <uv.h>

#include <redlock/options.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "master.hpp"

namespace redlock {

/// A Client's waiters, per resource (by key): first come, first served, and
/// only the first in line attempts, so one attempt per resource is in flight.
/// A release message from any master wakes the first in line. Release
/// messages come over one subscriber connection per master, opened when the
/// first waiter arrives; a key is subscribed only while it has waiters.
///
/// Waiters never depend on a message alone: each also sleeps on its own
/// timer (the holder's expiry, retry_delay, its deadline), so a dropped or
/// lagging subscriber delays a waiter but never loses it.
class Waiters {
 public:
  /// What a waiting operation implements.
  class Waiter {
   public:
    /// A release of `value` was heard (empty: this waiter just became first
    /// in line).
    virtual void wake(std::string_view value) = 0;

   protected:
    ~Waiter() = default;
  };

  Waiters(uv_loop_t* loop, const Options& options);
  ~Waiters();
  Waiters(const Waiters&) = delete;
  Waiters& operator=(const Waiters&) = delete;

  /// Joins the line for `key` (subscribing its channel for the first waiter).
  void enlist(const std::string& key, Waiter& waiter);
  /// Leaves the line; the next one, if any, is woken. Unsubscribes after the last.
  void leave(const std::string& key, Waiter& waiter);
  bool first_in_line(const std::string& key, const Waiter& waiter) const;

  /// Our own unlock of `key` deleted `value` and told `listeners`
  /// subscribers on one master. If some of them were others (not this
  /// Client), this Client lets them try first: for four round trips of the
  /// unlock, 2 ms at least, or until another owner's release is heard (the
  /// others had their turn).
  void released_by_us(const std::string& key, std::string_view value, long long listeners,
                      std::chrono::microseconds round_trip);
  /// uv_now() milliseconds before which this Client should not try `key`.
  std::uint64_t yield_until(const std::string& key) const;

  /// The channel on which releases of `key` are published.
  static std::string channel(std::string_view key);

  /// Closes the subscriber connections (the Client is closing).
  void close();

 private:
  struct Line {
    std::deque<Waiter*> queue;
  };

  void open_subscribers();
  void subscribe(const std::string& key);
  void unsubscribe(const std::string& key);
  void on_message(std::string_view channel, std::string_view value);
  void resubscribe(Master& subscriber);

  uv_loop_t* loop_;
  const Options& options_;
  std::unordered_map<std::string, Line> lines_;
  struct Yield {
    std::uint64_t until;  // uv_now() ms
    std::string value;    // the value we released
  };
  std::unordered_map<std::string, Yield> yields_;
  std::vector<std::unique_ptr<Master>> subscribers_;  // empty until the first waiter
};

}  // namespace redlock
