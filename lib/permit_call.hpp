#pragma once

// One Client::lock_permit call: a semaphore of `permits` across the masters.
//
// Each permit is a Redlock lock of its own (keys::permit), so the quorum
// argument holds per permit and no more than `permits` holders can hold at
// once. (A counter per master would not: with 2 permits on 3 masters,
// clients {A,B}, {B,C} and {A,C} can each win a majority of counters.)
//
// A call scans the permits with one attempt each, from a random one on, and
// takes the first it wins. When every permit is held it waits on one of
// them, as lock() with a wait does (woken by its release), for at most
// retry_delay + retry_jitter, then scans again, until its deadline.

#include <redlock/lock.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

namespace redlock {

/// What a PermitCall needs of its Client (Client::Impl provides it).
class PermitHost {
 public:
  using Answer = std::function<void(std::error_code, Lock)>;
  virtual ~PermitHost() = default;
  /// One acquire of `lock` (resource, value, permit): one attempt when `wait`
  /// is zero, else waiting up to `wait`. Not counted in the stats. Its id.
  virtual std::uint64_t acquire_permit(Lock lock, std::chrono::milliseconds ttl,
                                       std::chrono::milliseconds wait, Answer answer) = 0;
  /// Client::cancel of that acquire.
  virtual void cancel_permit(std::uint64_t id) = 0;
  /// uv_now() of the loop.
  virtual std::uint64_t now_ms() const = 0;
  /// retry_delay + a random share of retry_jitter.
  virtual std::chrono::milliseconds pause() = 0;
  /// A random number in [0, n).
  virtual int random_below(int n) = 0;
  /// The call is answered (once): count it, forget it.
  virtual void permit_call_done(std::uint64_t id, std::error_code error) = 0;
  /// Expires with the host: answers of acquires can run after it is gone
  /// (a Client destroyed while waiting answers errc::closed on a later turn).
  virtual std::weak_ptr<const bool> host_alive() const = 0;
};

class PermitCall : public std::enable_shared_from_this<PermitCall> {
 public:
  PermitCall(PermitHost& host, std::uint64_t id, Lock lock, int permits, std::chrono::milliseconds ttl,
             std::chrono::milliseconds wait, PermitHost::Answer answer);

  void start();
  /// Client::cancel: answered errc::canceled once the attempt in flight ends
  /// (what it wins is released by that attempt's own cancel).
  void cancel();

 private:
  void attempt(std::chrono::milliseconds wait);
  void on_answer(std::error_code error, Lock lock, bool waited);
  void answer(std::error_code error, Lock lock);
  std::uint64_t left_ms() const;

  PermitHost& host_;
  std::weak_ptr<const bool> alive_;  // host_ still exists
  std::uint64_t id_;
  Lock lock_;  // resource and value; permit set per attempt
  int permits_;
  std::chrono::milliseconds ttl_;
  std::uint64_t deadline_;  // uv_now() ms
  PermitHost::Answer answer_;
  int next_ = 0;     // the permit the next attempt tries
  int scanned_ = 0;  // permits tried in this scan
  std::error_code last_;
  std::uint64_t in_flight_ = 0;  // the acquire's id, 0 when none
  bool canceled_ = false;
};

}  // namespace redlock
