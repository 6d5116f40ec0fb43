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
#include "uv_handle.hpp"

namespace redlock {

/// A Client's waiters, per resource (by key): first come, first served, and
/// only the first in line attempts, so one attempt per resource is in flight.
/// A release message from any master wakes the first in line. Release
/// messages come over one subscriber connection per master, opened when a
/// waiter first has to wait; a key is subscribed on a majority of them, the
/// same masters in every Client. A key is subscribed only once an attempt on it
/// was refused (an uncontended lock costs no subscription), and unsubscribed
/// once it has had no waiters for a short linger, so a Client that locks the
/// same resource in a loop does not subscribe and unsubscribe every time.
///
/// Waiters never depend on a message alone: each also sleeps on its own
/// timer (the holder's expiry, retry_delay, its deadline), so a dropped or
/// lagging subscriber delays a waiter but never loses it.
class Waiters {
 public:
  /// What a waiting operation implements.
  class Waiter {
   public:
    /// A release `message` was heard (empty: this waiter just became first
    /// in line).
    virtual void wake(std::string_view message) = 0;
    /// The subscription was confirmed: a release may have come before it.
    virtual void recheck() = 0;

   protected:
    ~Waiter() = default;
  };

  Waiters(uv_loop_t* loop, const Options& options, std::shared_ptr<const TlsContext> tls);
  ~Waiters();
  Waiters(const Waiters&) = delete;
  Waiters& operator=(const Waiters&) = delete;

  /// Joins the line for `key`.
  void enlist(const std::string& key, Waiter& waiter);
  /// Leaves the line; the next one, if any, is woken. After the last, the
  /// key stays subscribed for the linger.
  void leave(const std::string& key, Waiter& waiter);
  /// An attempt on `key` was refused and its waiter will sleep: subscribe
  /// to its releases, unless subscribed already. A release that came between
  /// the refusal and the subscription would be missed, so once the first
  /// master confirms the subscription the first in line is woken to try again.
  void listen(const std::string& key);
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
  /// The message an unlock publishes is the value it deleted. A failed
  /// attempt's clean-up marks it: its keys were a minority, so a waiter
  /// refused by a majority (a holder) need not wake for it.
  static std::string partial_release(std::string_view value);
  static bool is_partial(std::string_view message);
  /// The value a release message names.
  static std::string_view released_value(std::string_view message);

  /// Closes the subscriber connections (the Client is closing).
  void close();

 private:
  struct Line {
    std::deque<Waiter*> queue;
  };
  struct Subscription {
    bool confirmed = false;        // a master answered the SUBSCRIBE
    std::uint64_t idle_since = 0;  // uv_now() ms the line emptied; 0 while it has waiters
  };
  class Confirmations;

  void open_subscribers();
  void subscribe(const std::string& key);
  bool carries(const std::string& key, const Master& subscriber) const;
  void unsubscribe_idle();
  void on_message(std::string_view channel, std::string_view message);
  void on_subscribed(std::string_view channel);
  void resubscribe(Master& subscriber);
  void wake_first(const std::string& key, std::string_view message);

  uv_loop_t* loop_;
  const Options& options_;
  const std::shared_ptr<const TlsContext> tls_;
  std::unordered_map<std::string, Line> lines_;
  struct Yield {
    std::uint64_t until;  // uv_now() ms
    std::string value;    // the value we released
  };
  std::unordered_map<std::string, Yield> yields_;
  std::unordered_map<std::string, Subscription> subscribed_;
  std::shared_ptr<Confirmations> confirmations_;
  Timer linger_;                                      // unsubscribes the keys idle for a linger
  std::vector<std::unique_ptr<Master>> subscribers_;  // empty until the first refusal
};

}  // namespace redlock
