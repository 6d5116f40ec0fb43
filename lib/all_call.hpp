#pragma once

// One Client::lock_all call: several resources at once, all or none.
//
// Each attempt is one round of scripts::acquire_all, which sets every key on
// a master or none there, so no caller ever holds some resources and waits
// for others: callers naming them in opposite orders cannot deadlock.
//
// Between attempts the call watches the release channels of its resources
// (Waiters::watch) and wakes on a release of any of them, at the moment the
// holders' keys expire on enough masters, after retry_delay + jitter, or at
// its deadline. It does not join the resources' lines in its Client: a
// single-resource waiter behind it on a free resource would wait for a call
// that waits for another resource.

#include <uv.h>

#include <redlock/lock.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "uv_handle.hpp"
#include "waiters.hpp"

namespace redlock {

/// What an AllCall needs of its Client (Client::Impl provides it).
class AllHost {
 public:
  using Answer = std::function<void(std::error_code, Lock)>;
  virtual ~AllHost() = default;
  /// One attempt at `lock` (resources, value), not counted in the stats;
  /// `marks_writer` for a call that waits. A refusal that knows when the
  /// holders' keys expire on enough masters tells `free_in_ms` first. Its id.
  virtual std::uint64_t attempt_all(Lock lock, std::chrono::milliseconds ttl, bool marks_writer,
                                    Answer answer, std::function<void(long long free_in_ms)> free_in_ms) = 0;
  /// Client::cancel of that attempt.
  virtual void cancel_attempt(std::uint64_t id) = 0;
  virtual Waiters& waiters_of_client() = 0;
  virtual uv_loop_t* event_loop() const = 0;
  /// retry_delay + a random share of retry_jitter.
  virtual std::chrono::milliseconds pause() = 0;
  /// Runs `fn` on a later loop turn.
  virtual void post_answer(std::function<void()> fn) = 0;
  /// The call is answered (once): count it, forget it.
  virtual void all_call_done(std::uint64_t id, std::error_code error) = 0;
  /// It stopped waiting without the lock: the writer-waiting marks its
  /// attempts set go (Operation::writer_gone).
  virtual void writer_gone(const std::string& key, const std::string& value) = 0;
};

class AllCall : public std::enable_shared_from_this<AllCall> {
 public:
  /// `keys`: the lock keys of lock.resources, in the same order.
  AllCall(AllHost& host, std::uint64_t id, Lock lock, std::vector<std::string> keys,
          std::chrono::milliseconds ttl, std::chrono::milliseconds wait, AllHost::Answer answer);
  ~AllCall();
  AllCall(const AllCall&) = delete;
  AllCall& operator=(const AllCall&) = delete;

  void start();
  /// Client::cancel: answered errc::canceled on a later turn (what an
  /// attempt in flight wins is released by that attempt's own cancel).
  void cancel();
  /// The Client is closing: answered errc::closed on a later turn.
  void close();

 private:
  // Hears the releases of one resource.
  struct Watch final : Waiters::Waiter {
    Watch(AllCall& call, std::string key) : call(call), key(std::move(key)) {}
    void wake(std::string_view message) override;
    void recheck() override { call.woken(); }
    AllCall& call;
    std::string key;
  };

  void woken();
  void attempt();
  void on_answer(std::error_code error, Lock lock);
  void sleep(std::uint64_t ms);
  /// `later`: post the answer (the caller's own call, cancel(), close());
  /// otherwise we are on a later turn already and answer now, so a lock is
  /// never handed over a turn after its validity was checked.
  void answer(std::error_code error, Lock lock, bool later = false);
  void unwatch();
  std::uint64_t left_ms() const;

  AllHost& host_;
  std::uint64_t id_;
  Lock lock_;
  std::chrono::milliseconds ttl_;
  std::uint64_t deadline_;  // uv_now() ms
  bool once_;               // wait 0: one attempt
  AllHost::Answer answer_;
  std::vector<std::unique_ptr<Watch>> watches_;
  Timer timer_;
  std::uint64_t in_flight_ = 0;  // the attempt's id, 0 when none
  bool woken_in_flight_ = false;
  long long free_in_ms_ = -1;  // the last refusal's: when the holders' keys expire
  bool canceled_ = false;
  bool tried_ = false;
  std::error_code last_;
};

}  // namespace redlock
