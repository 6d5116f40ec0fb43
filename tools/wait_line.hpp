#pragma once

// While `redlock run` or `acquire` waits for a lock, one line on stderr that
// says who holds it, how long it has left and how long we have waited,
// rewritten every second. Only when stderr is a terminal: nothing extra in
// logs and pipes.

#include <redlock/inspect.hpp>
#include <redlock/options.hpp>

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "uv_handle.hpp"

namespace redlock::cli {

class WaitLine {
 public:
  WaitLine(uv_loop_t* loop, Options options, std::string resource);
  ~WaitLine();
  WaitLine(const WaitLine&) = delete;
  WaitLine& operator=(const WaitLine&) = delete;

  /// Starts showing the line if stderr is a terminal.
  void start();
  /// Stops and erases the line; safe to call at any time, more than once.
  void stop();

  /// The line for a holder seen in `inspection` after waiting `waited`.
  static std::string render(const Inspection& inspection, std::chrono::milliseconds waited,
                            const std::string& resource);

 private:
  void tick();
  void show(const std::string& line);

  uv_loop_t* loop_;
  Options options_;
  std::string resource_;
  std::uint64_t started_ = 0;  // uv_now() at start()
  bool shown_ = false;
  bool asking_ = false;
  // Answers come on a later turn, perhaps after this object is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // inspector_ is destroyed after the timer; both close into the loop.
  std::unique_ptr<Inspector> inspector_;
  Timer timer_;
};

}  // namespace redlock::cli
