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
///
/// Across Clients, waiters queue at the key's gate master (see Operation):
/// an attempt the gate refuses puts this Client's wake channel (a channel of
/// its own, which a queue's head is told the key on) in the key's queue
/// there, and an unlock that deletes there wakes the head of the queue only,
/// so one release wakes one Client. The wake channel is
/// subscribed on one subscriber connection per master, opened when a waiter
/// first has to wait. A waiter that is not queued (its gate was not reachable,
/// or answered too late) hears every release instead: its key is subscribed on
/// a majority of the subscriber connections, the same masters in every Client,
/// from such a refusal until nothing needed it for a short linger (so a Client
/// that locks the same resource in a loop does not subscribe every time).
///
/// Waiters never depend on a message alone: each also sleeps on its own
/// timer (the holder's expiry, retry_delay, its deadline), so a dropped or
/// lagging subscriber delays a waiter but never loses it.
class Waiters {
 public:
  /// What a waiting operation implements.
  class Waiter {
   public:
    /// A release `message` was heard, or the queue at the gate woke us
    /// (empty: this waiter just became first in line).
    virtual void wake(std::string_view message) = 0;
    /// The subscription was confirmed: a release may have come before it.
    virtual void recheck() = 0;

   protected:
    ~Waiter() = default;
  };

  /// `masters` are the command connections: a wake this Client cannot use
  /// is passed on over them, and a queue left is left there.
  Waiters(uv_loop_t* loop, const Options& options, std::shared_ptr<const TlsContext> tls,
          const std::vector<std::unique_ptr<Master>>& masters);
  ~Waiters();
  Waiters(const Waiters&) = delete;
  Waiters& operator=(const Waiters&) = delete;

  /// Joins the line for `key`.
  void enlist(const std::string& key, Waiter& waiter);
  /// Leaves the line; the next one, if any, is woken. After the last, the
  /// key stays subscribed for the linger. `woken_by_queue`: the gate woke
  /// this Client for `key` and kept the key for it, and no attempt used
  /// that; when no waiter of this Client is left to, the wake goes on to the
  /// next Client in the gate's queue (else it would wait for its timer).
  void leave(const std::string& key, Waiter& waiter, bool woken_by_queue = false);
  /// An attempt on `key` was refused, its waiter will sleep and is not
  /// queued: subscribe to its releases, unless subscribed already. A release that came between
  /// the refusal and the subscription would be missed, so once the first
  /// master confirms the subscription the first in line is woken to try again.
  /// `marked`: the key is a lock's, whose unlock publishes only where a
  /// listener marked it (not a record that always publishes).
  void listen(const std::string& key, bool marked = true);
  bool first_in_line(const std::string& key, const Waiter& waiter) const;
  /// Tells `watcher` of every release of `key` heard, outside the line (a
  /// lock_all, which waits for several keys and must not hold up the line
  /// of any), until unwatch(). It stays subscribed meanwhile once listen()ed.
  void watch(const std::string& key, Waiter& watcher);
  void unwatch(const std::string& key, Waiter& watcher);

  /// The gate master of `key`: the voting master ranked highest for it
  /// (rendezvous hashing); null when none votes.
  Master* gate(const std::string& key) const;
  /// gate(), and the gate when every master votes (the master ranked
  /// highest of all), which waiters that see it voting queue at while this
  /// Client does not (its connection there is not up yet).
  struct Gates {
    Master* voting = nullptr;
    Master* usual = nullptr;
  };
  Gates gates(const std::string& key) const;
  /// The wake channel to queue at `gate`: empty while it is not known to be
  /// subscribed there (a wake published to nobody is lost).
  std::string_view wake_channel_at(const Master& gate) const;
  /// An attempt on `key` asks `gate` to queue our wake channel if it refuses.
  /// Whatever this Client comes to believe of it (the round may be decided,
  /// or the call end, before the gate's answer), the line's entry there is
  /// taken out when the line empties (leave) or the Client closes.
  void asked(const std::string& key, const Master& gate);
  /// The gate master refused an attempt on `key` and queued our wake channel:
  /// until the queue wakes us, releases published to all are not for us.
  void queued(const std::string& key, const Master& gate);
  /// An attempt on `key` passed its gate, or may not be queued there.
  void unqueued(const std::string& key);
  /// Queued, at the master that is the key's gate now.
  bool is_queued(const std::string& key) const;
  /// An attempt on `key` was refused: for a while, this Client's next lock()
  /// of it asks the gate first (Operation), where the queue is kept.
  void refused(const std::string& key);
  bool contended(const std::string& key) const;
  /// Whether this Client hears `key`'s release channel (its unlock does not
  /// count itself among the others told).
  bool subscribed(const std::string& key) const { return subscribed_.count(key) != 0; }

  /// Our own unlock of `key` deleted `value` and told `others` other Clients
  /// on one master (subscribers, or the head of the queue). If it told any,
  /// the key counts as contended (see refused()); if it did not already, this
  /// Client also lets them try first: for four round trips of the unlock, 2 ms
  /// at least, or until another owner's release is heard.
  void released_by_us(const std::string& key, std::string_view value, long long others,
                      std::chrono::microseconds round_trip);
  /// uv_now() milliseconds before which this Client should not try `key`.
  std::uint64_t yield_until(const std::string& key) const;

  /// The message an unlock publishes is the value it deleted. A failed
  /// attempt's clean-up marks it: its keys were a minority, so a waiter
  /// refused by a majority (a holder) need not wake for it.
  static std::string partial_release(std::string_view value);
  static bool is_partial(std::string_view message);
  /// A release (a majority of keys, so not partial) by a writer that goes on
  /// waiting (its round came too late): the unlock keeps the writer's
  /// writer-waiting mark, which its own unlock of a held lock deletes.
  static std::string waiting_release(std::string_view value);
  /// What a waiter is woken with when the queue at its gate woke this Client
  /// (the gate keeps the key for it a moment): never a value (base64url) or
  /// a partial release.
  static constexpr std::string_view queue_wake = "*";
  /// The value a release message names.
  static std::string_view released_value(std::string_view message);

  /// Closes the subscriber connections (the Client is closing).
  void close();

 private:
  struct Line {
    std::deque<Waiter*> queue;
    const Master* queued_at = nullptr;    // the gate master whose queue has our wake channel
    const Master* woken_at = nullptr;     // the gate master whose queue woke us last
    std::vector<const Master*> asked_at;  // every gate asked to queue our wake channel (asked())
  };
  struct Subscription {
    bool confirmed = false;        // a master answered the SUBSCRIBE
    std::uint64_t idle_since = 0;  // uv_now() ms the line emptied; 0 while it has waiters
    bool marked = true;            // a lock's key: marked where subscribed (mark_listening)
  };
  class Confirmations;

  void open_subscribers();
  void subscribe(const std::string& key);
  bool carries(const std::string& key, const Master& subscriber) const;
  void unsubscribe_idle();
  bool listening(const std::string& key) const;
  void mark(const std::string& key, std::size_t master);
  void mark_carriers(const std::string& key);
  void mark_everywhere(const std::string& key);
  std::uint64_t marker_ms() const;
  milliseconds queue_life() const;
  void remark();
  void on_message(const Master& subscriber, std::string_view channel, std::string_view message);
  void on_wake(const Master& subscriber, const std::string& key);
  void idle(const std::string& key);
  void on_subscribed(std::string_view channel);
  void on_wake_subscribed(const Master& subscriber);
  void resubscribe(Master& subscriber);
  std::vector<std::string> unqueue_at(std::size_t master);
  void on_subscriber_dropped(std::size_t index);
  void wake_first(const std::string& key, std::string_view message);
  void tell_watchers(const std::string& key, std::string_view message);
  void pass_wake_on(const Master& gate, const std::string& key);
  void leave_queues(const std::string& key, const Line& line);
  void remember_left(const std::string& key, const Line& line);
  void watch_gate();
  void check_gates();

  uv_loop_t* loop_;
  const Options& options_;
  const std::shared_ptr<const TlsContext> tls_;
  const std::vector<std::unique_ptr<Master>>& masters_;
  std::vector<std::uint64_t> rendezvous_hashes_;  // of options_.masters, by Master::index()
  const std::string wake_channel_;
  std::unordered_map<std::string, Line> lines_;
  struct Left {
    std::vector<const Master*> gates;  // every gate the line asked to queue it, or that woke it
    std::uint64_t until = 0;           // uv_now() ms: the queues there have expired
  };
  std::unordered_map<std::string, Left> left_;  // lines that emptied lately (remember_left())
  std::unordered_map<std::string, std::vector<Waiter*>> watchers_;
  struct Yield {
    std::uint64_t until;  // uv_now() ms
    std::string value;    // the value we released
  };
  std::unordered_map<std::string, Yield> yields_;
  std::unordered_map<std::string, std::uint64_t>
      contended_;  // key -> uv_now() ms until which it counts as contended
  std::unordered_map<std::string, Subscription> subscribed_;
  std::shared_ptr<Confirmations> confirmations_;
  Timer linger_;                                      // unsubscribes the keys idle for a linger
  Timer remark_;                                      // marks the keys listened to again
  Timer gate_watch_;                                  // runs while a line is queued
  std::vector<std::unique_ptr<Master>> subscribers_;  // empty until the first refusal
  std::vector<bool> wake_confirmed_;                  // per subscriber: SUBSCRIBE of wake_channel_ answered
};

}  // namespace redlock
