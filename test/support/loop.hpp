#pragma once

#include "timeouts.hpp"

#include <poll.h>
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>

namespace redlock::test {

/// A uv_loop_t owned by one test. End the test with `REQUIRE(loop.close());`
/// so that a handle left open fails it; the destructor closes the loop if the
/// test did not (a failed REQUIRE skipped it).
class LoopFixture {
 public:
  LoopFixture() : loop_(new uv_loop_t) {
    const int rc = uv_loop_init(loop_.get());
    if (rc != 0) throw std::runtime_error(std::string("uv_loop_init: ") + uv_strerror(rc));
  }

  ~LoopFixture() {
    if (closed_) return;
    // A failed close() already waited its deadline; do not wait again.
    if (!close_failed_ && close()) return;
    std::fprintf(stderr, "warning: LoopFixture: uv_loop_close failed; closing the handles left open\n");
    uv_walk(
        loop_.get(),
        [](uv_handle_t* h, void*) {
          if (uv_is_closing(h) == 0) uv_close(h, nullptr);
        },
        nullptr);
    for (int i = 0; i < 1000 && uv_run(loop_.get(), UV_RUN_NOWAIT) != 0; ++i) {
    }
    if (uv_loop_close(loop_.get()) != 0) {
      // Requests still in flight point into the loop: leak it rather than free it.
      std::fprintf(stderr, "warning: LoopFixture: loop still busy; leaking it\n");
      static_cast<void>(loop_.release());
    }
  }

  LoopFixture(const LoopFixture&) = delete;
  LoopFixture& operator=(const LoopFixture&) = delete;

  uv_loop_t* get() { return loop_.get(); }

  /// Runs the loop until pred() is true or `deadline` (times
  /// test_timeout_multiplier()) has passed; returns pred().
  template <class Pred>
  bool run_until(Pred pred, std::chrono::milliseconds deadline) {
    if (pred()) return true;
    const auto until = std::chrono::steady_clock::now() + scaled(deadline);
    // A repeating 1 ms tick bounds each UV_RUN_ONCE step, so a loop with no
    // events due cannot block past the deadline.
    auto* tick = new uv_timer_t;
    uv_timer_init(loop_.get(), tick);
    uv_timer_start(
        tick, [](uv_timer_t*) {}, 1, 1);
    bool tick_closed = false;
    tick->data = &tick_closed;
    struct CloseTick {
      uv_loop_t* loop;
      uv_timer_t* tick;
      bool& closed;
      ~CloseTick() {
        uv_close(reinterpret_cast<uv_handle_t*>(tick), [](uv_handle_t* h) {
          *static_cast<bool*>(h->data) = true;
          delete reinterpret_cast<uv_timer_t*>(h);
        });
        // Close callbacks run at the end of the next loop iteration.
        while (!closed) uv_run(loop, UV_RUN_NOWAIT);
      }
    };
    {
      CloseTick close_tick{loop_.get(), tick, tick_closed};
      while (!pred() && std::chrono::steady_clock::now() < until) {
        uv_run(loop_.get(), UV_RUN_ONCE);
      }
    }
    return pred();
  }

  /// Runs the loop until it has nothing left to do or `deadline` (times
  /// test_timeout_multiplier()) has passed, then closes it; true when
  /// uv_loop_close() succeeded. Prints the handles still open when it fails.
  bool close(std::chrono::milliseconds deadline = std::chrono::seconds(5)) {
    if (closed_) return true;
    const auto until = std::chrono::steady_clock::now() + scaled(deadline);
    while (uv_run(loop_.get(), UV_RUN_NOWAIT) != 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) break;
      // Sleep in the kernel until the loop has work (its backend fd is
      // readable or its next timer is due), never past the deadline.
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
      int timeout = uv_backend_timeout(loop_.get());
      if (timeout < 0 || timeout > left) timeout = static_cast<int>(left);
      pollfd backend{uv_backend_fd(loop_.get()), POLLIN, 0};
      ::poll(&backend, 1, timeout);
    }
    closed_ = uv_loop_close(loop_.get()) == 0;
    if (!closed_) {
      close_failed_ = true;
      std::fprintf(stderr, "LoopFixture::close: uv_loop_close failed; open handles:\n");
      uv_walk(
          loop_.get(),
          [](uv_handle_t* h, void*) {
            std::fprintf(stderr, "  %s%s%s\n", uv_handle_type_name(uv_handle_get_type(h)),
                         uv_is_active(h) != 0 ? " (active)" : "", uv_is_closing(h) != 0 ? " (closing)" : "");
          },
          nullptr);
    }
    return closed_;
  }

 private:
  std::unique_ptr<uv_loop_t> loop_;
  bool closed_ = false;
  bool close_failed_ = false;
};

}  // namespace redlock::test
