#pragma once

#include <uv.h>

#include <redlock/lock.hpp>
#include <redlock/options.hpp>
#include <redlock/stats.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <system_error>
#include <vector>

#include "clock.hpp"
#include "master.hpp"
#include "round.hpp"
#include "uv_handle.hpp"
#include "waiters.hpp"

namespace redlock {

class Operation;

/// Calls by kind and outcome, and how long they took (Client::stats()).
struct CallStats {
  Outcomes acquire;
  Outcomes extend;
  Outcomes continue_lock;
  Outcomes unlock;
  LatencyHistogram acquire_latency;
  LatencyHistogram unlock_latency;
};

/// What operations share: the masters, the options, the clock, and the way
/// back to the caller. Client::Impl provides it.
class Context {
 public:
  Context(uv_loop_t* loop, Options options);
  virtual ~Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  /// Runs `fn` on a later loop turn.
  virtual void post(std::function<void()> fn) = 0;
  /// The operation has answered its caller: hands over its ownership, so
  /// that the posted answer can carry it and destroy it after running.
  virtual std::shared_ptr<Operation> retire(Operation& op) = 0;
  /// An extend or continue_lock is about to write its command.
  virtual void extension_issued(const Lock& lock) = 0;
  /// That extension is decided: `error`, or `lock` with its new validity.
  /// Told in the callback of the answer that decided it, before its caller is
  /// answered, so a keep of the lock applies it in the order the masters ran
  /// the commands. Returns the error to answer instead of success, if any.
  virtual std::error_code extension_decided(const Lock& lock, std::error_code error) = 0;
  /// Our value of `lock` is being deleted everywhere: the lock was lost.
  virtual void lost(const Lock& lock) = 0;

  /// Expires when the Context is destroyed: for answers that run after it.
  std::weak_ptr<const bool> alive() const { return alive_; }
  /// `listener` runs when the Client closes, if it still exists then (an
  /// Election answers what it has in flight errc::closed).
  void on_close(std::weak_ptr<std::function<void()>> listener) {
    close_listeners_.push_back(std::move(listener));
  }
  /// Runs the close listeners still alive, once.
  void closing() {
    auto listeners = std::move(close_listeners_);
    close_listeners_.clear();
    for (auto& l : listeners) {
      if (auto fn = l.lock()) (*fn)();
    }
  }

  uv_loop_t* const loop;
  const Options options;
  const ClockSource clock;
  std::mt19937_64 rng;
  CallStats calls;
  // For the rediss:// masters; null when none uses TLS.
  const std::shared_ptr<const TlsContext> tls;
  // masters is declared last among the shared state: a Master's callbacks
  // reach operations, which use everything above.
  std::vector<std::unique_ptr<Master>> masters;
  // After masters: its subscriber connections wake operations.
  Waiters waiters{loop, options, tls, masters};

 private:
  std::shared_ptr<const bool> alive_ = std::make_shared<const bool>(true);
  std::vector<std::weak_ptr<std::function<void()>>> close_listeners_;
};

/// One user call: lock (several attempts, or until a deadline), try_lock
/// (one), extend, continue_lock or unlock. Runs Rounds, releases our value
/// everywhere after a failed attempt, and answers the caller exactly once
/// through Context::post. A lock() waits in its resource's line (Waiters)
/// between attempts, until the first of: a release message, the holder's
/// keys expiring on enough masters, retry_delay + jitter, its deadline.
class Operation final : public Waiters::Waiter {
 public:
  enum class Kind { acquire, extend, continue_lock, unlock };
  using Callback = std::function<void(std::error_code, Lock)>;

  /// `lock` names the resource and value (and, for extend and continue_lock,
  /// the previous valid_until). `attempts` >= 1 applies to acquire.
  Operation(Context& context, Kind kind, Lock lock, milliseconds ttl, int attempts, Callback cb);
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  /// A lock() that waits: attempts until acquired or uv_now() passes
  /// `deadline`, then answers errc::timeout (`answer_timeout`, the form with
  /// a wait) or not_acquired (the retry-count form) while others held it.
  void wait_until(std::uint64_t deadline, bool answer_timeout);
  void start();
  /// Counts an answer of a call of `kind` in context.calls; `took` (from the
  /// call to the answer) goes to the latency histograms when given.
  static void count(Context& context, Kind kind, std::error_code answer,
                    std::optional<std::chrono::microseconds> took = std::nullopt);
  /// Where the owner keeps this operation (Client::Impl's registry).
  std::size_t registry_slot = 0;
  /// Client::CallId: what Client::cancel names it by.
  std::uint64_t id = 0;
  /// Counted in Context::calls: a user's call, not the library's own release.
  bool counted = true;
  /// A lock_all attempt of a call that waits between attempts: where shared
  /// holders refuse it, it marks a writer waiting.
  bool marks_writer = false;
  /// Told, before the answer, when a refused attempt learned how long until
  /// the holders' keys expire on enough masters (lock_all's own waiting).
  std::function<void(long long free_in_ms)> told_free_in;
  /// The client is closing: release what a round in flight may take, answer
  /// errc::closed, do nothing more.
  void cancel();
  /// Client::cancel: answers errc::canceled, leaving the line; what an
  /// attempt in flight may still win is released.
  void abandon();
  /// A waiting writer of `key` (value `value`) stopped waiting without the
  /// lock: its writer-waiting mark goes, and the shared waiters hear it.
  static void writer_gone(Context& context, const std::string& key, std::string_view value);

  void wake(std::string_view message) override;
  void recheck() override;

 private:
  std::shared_ptr<const Command> make_command() const;
  std::shared_ptr<const Command> make_shared_command() const;
  std::shared_ptr<const Command> make_multi_command() const;
  /// The lock keys' helper `name` (keys::fencing and the like), one per resource.
  std::vector<std::string> helpers(std::string (*name)(std::string_view)) const;
  bool multi() const { return !keys_.empty(); }
  std::string mark_ms() const;
  std::shared_ptr<const Command> make_gate_command(const Master& gate);
  long long others_told(long long answer) const;
  std::shared_ptr<const Command> unlock_command(std::string_view value, std::string_view message,
                                                bool subscribed, bool at_gate) const;
  void note_queue(const Outcome& outcome);
  void attempt();
  void on_gate(const Outcome& outcome);
  /// `gate_veto`: in a waiter's gated round, the gate's no fails the round.
  void start_round(TimePoint t0, bool gate_veto = true);
  bool gated_round() const;
  void on_decided(const Outcome& outcome);
  void fence(long long counter, TimePoint valid_until);
  void on_fenced(const Outcome& outcome, TimePoint valid_until);
  bool waits() const { return kind_ == Kind::acquire && deadline_ != 0; }
  bool extends() const { return kind_ == Kind::extend || kind_ == Kind::continue_lock; }
  void try_now();
  void attempt_failed(errc error, const Outcome* outcome, bool release = true);
  void sleep(std::uint64_t ms);
  bool out_of_time() const;
  void answer_waited(errc last);
  void lost(errc error);
  milliseconds release_patience() const;
  /// What a release of our keys is: a lock's, a failed attempt's minority
  /// (partial), or a lock's whose writer goes on waiting (it keeps its
  /// writer-waiting marks).
  enum class Release { lock, partial, still_waiting };
  void release_everywhere(std::string_view value, Release what = Release::lock);
  Release release_of_attempt(bool reached) const;
  void finish(std::error_code error);
  std::error_code check_on_arrival(const Lock& lock);
  void count(std::error_code answer);

  Context& context_;
  Kind kind_;
  std::chrono::steady_clock::time_point called_at_ = std::chrono::steady_clock::now();
  Lock lock_;
  milliseconds ttl_;
  int attempts_left_;
  Callback cb_;
  std::string key_;
  std::string counter_key_;        // fencing: the resource's counter; empty without fencing
  std::string holders_key_;        // a shared lock: the key's shared holders; empty otherwise
  std::vector<std::string> keys_;  // lock_all: every resource's lock key; empty otherwise
  std::uint64_t token_ = 0;        // fencing: the token the second round writes
  std::shared_ptr<const Command> command_;
  std::shared_ptr<Round> round_;
  Timer retry_timer_;
  // Waiting (lock): whether it is in its resource's line, an attempt is in
  // flight, a release was heard meanwhile, and its deadline (uv_now() ms; 0
  // for the retry-count form).
  bool waiting_ = false;
  bool enlisted_ = false;
  bool in_flight_ = false;
  bool woken_ = false;
  bool by_release_ = false;      // the next attempt was started by a release
  bool tried_ = false;           // an attempt was made: the next goes through the gate
  bool claiming_ = false;        // the attempt in flight claims a reservation
  bool reserved_ = false;        // the queue woke us: the gate keeps the key for us
  bool passed_gate_ = false;     // the attempt in flight passed the gate
  Master* gate_ = nullptr;       // the gate master of the last gated attempt
  bool asked_to_queue_ = false;  // that attempt asked the gate to queue our wake channel
  int gate_refusals_ = 0;        // in a row, with no release heard since
  // The last attempt passed the gate and a majority refused it: a holder has
  // the lock, and a failed attempt's clean-up does not free it.
  bool held_by_majority_ = false;
  bool answer_timeout_ = false;
  errc last_error_{};
  std::uint64_t deadline_ = 0;
};

}  // namespace redlock
