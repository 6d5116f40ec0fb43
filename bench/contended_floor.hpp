#pragma once

// The floor of a handoff between processes: the least a client on libuv +
// hiredis does to pass a lock on N masters to a waiter in another process.
// Raw SET NX PX to every master, a majority decides; the release is a
// compare-and-delete that PUBLISHes the released value; a waiter subscribed
// on every master tries again at the first message of a release it has not
// seen. No gate master, no deadlines, no validity, no PTTL. Processes take
// strict turns: a releaser that others heard waits for the next release
// before it tries again. bench_contended runs it as the impl "floor", so a
// handoff of the library is compared with this one in the same run.

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "floor.hpp"

namespace bench {

class HandoffFloor {
 public:
  /// One cycle, in CLOCK_MONOTONIC ns: wanting the lock, holding it, work
  /// done, release answered; and the attempts it took.
  struct Cycle {
    std::int64_t call, acquired, work_end, released;
    int attempts;
  };

  HandoffFloor(uv_loop_t* loop, const std::vector<int>& ports, std::string resource, int work_us);
  HandoffFloor(const HandoffFloor&) = delete;
  HandoffFloor& operator=(const HandoffFloor&) = delete;
  ~HandoffFloor();

  /// Runs the loop until both connections to every master are up and the
  /// subscriber listens; false on failure.
  bool ready();
  /// Takes turns until `end`, calling `record` for every cycle; runs the loop
  /// until the last cycle is released and the connections are closed.
  void run(std::int64_t end, std::function<void(const Cycle&)> record);
  /// Ends the run where it is (a bound for a master that stopped answering).
  void stop();
  /// Times a waiter fell back to its timer instead of a message.
  long long fallbacks() const { return fallbacks_; }

 private:
  enum class State { attempting, holding, releasing, waiting, done };

  void attempt();
  void on_attempt(bool granted);
  void release();
  void on_released(bool heard);
  void wait();
  void on_message(const std::string& released_value);
  bool seen(const std::string& value) const;
  void remember(const std::string& value);

  uv_loop_t* loop_;
  Floor commands_;
  Floor subscriber_;
  std::string key_;
  std::string channel_;
  int work_us_;
  std::string release_script_;
  std::unique_ptr<uv_timer_t> fallback_;  // freed in its close callback
  State state_ = State::waiting;
  std::string value_;
  std::uint64_t next_value_ = 0;
  bool woken_ = false;  // a release came while an attempt was in flight
  std::deque<std::string> seen_;
  std::int64_t end_ = 0;
  Cycle cycle_{};
  std::function<void(const Cycle&)> record_;
  long long fallbacks_ = 0;
};

}  // namespace bench
