// Driving the async Client from an event loop that is not libuv: a plain
// poll() loop, as in a daemon built on its own loop (or on epoll, kqueue...).
// libuv exposes one file descriptor for everything it waits on
// (uv_backend_fd) and how long it may sleep (uv_backend_timeout); the host
// polls that descriptor with its own, and runs libuv without blocking
// (UV_RUN_NOWAIT) whenever it is readable or its time is up.
//
//   poll-loop [--hold MS] MASTER_URI...
//
// Takes the lock poll-loop:example, holds it --hold ms (default 500) while
// the host loop keeps ticking, releases it. Exit status: 0 done, 1 the lock
// could not be taken or released, 64 bad arguments.

#include <poll.h>
#include <uv.h>
#include <redlock/redlock.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "args.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const char* const usage_text =
    "usage: poll-loop [--hold MS] MASTER_URI...\n"
    "  Runs the Client from a plain poll() loop through libuv's backend fd: takes the\n"
    "  lock poll-loop:example, holds it MS milliseconds (default 500), releases it.\n"
    "  Exit status: 0 done, 1 the lock could not be taken or released, 64 bad arguments.\n";

// The host's own work: a tick every 100 ms, to show the loop is the host's.
constexpr auto tick_every = 100ms;

struct State {
  bool done = false;
  bool failed = false;
  bool holding = false;
  Clock::time_point release_at{};
  redlock::Lock lock;
};

int run(redlock::Options options, std::chrono::milliseconds hold) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  State state;
  {
    redlock::Client locks(&loop, std::move(options));
    locks.try_lock("poll-loop:example", 10s, [&](std::error_code error, redlock::Lock lock) {
      if (error) {
        std::printf("lock: %s\n", error.message().c_str());
        if (error == redlock::errc::unavailable) example::print_master_errors(locks);
        state.failed = true;
        return locks.close([&] { state.done = true; });
      }
      std::printf("holding the lock for %lld ms\n", static_cast<long long>(hold.count()));
      state.lock = std::move(lock);
      state.holding = true;
      state.release_at = Clock::now() + hold;
    });

    int backend = uv_backend_fd(&loop);
    auto next_tick = Clock::now() + tick_every;
    int ticks = 0;
    while (!state.done) {
      // libuv's share: whatever is ready now, without blocking.
      uv_run(&loop, UV_RUN_NOWAIT);
      auto now = Clock::now();
      if (now >= next_tick) {
        ++ticks;
        next_tick += tick_every;
      }
      if (state.holding && now >= state.release_at) {
        state.holding = false;
        locks.unlock(state.lock, [&](std::error_code error) {
          std::printf("released: %s\n", error ? error.message().c_str() : "ok");
          state.failed = state.failed || error;
          locks.close([&] { state.done = true; });
        });
        // Commands are written in libuv's prepare phase: after calling the
        // Client from outside a libuv callback, run libuv before sleeping.
        continue;
      }
      // Sleep until libuv has work, or the host's next timer.
      auto host_wait = std::chrono::ceil<std::chrono::milliseconds>(next_tick - now).count();
      if (state.holding)
        host_wait = std::min<long long>(
            host_wait, std::chrono::ceil<std::chrono::milliseconds>(state.release_at - now).count());
      int uv_wait = uv_backend_timeout(&loop);  // -1: nothing due
      int wait = static_cast<int>(uv_wait < 0 ? host_wait : std::min<long long>(uv_wait, host_wait));
      pollfd fds[1] = {{backend, POLLIN, 0}};
      if (poll(fds, 1, std::max(wait, 0)) < 0 && errno != EINTR) {
        std::perror("poll");
        std::abort();
      }
    }
    std::printf("the host loop ticked %d times meanwhile\n", ticks);
  }
  // The Client is closed: let libuv finish closing its handles.
  uv_run(&loop, UV_RUN_DEFAULT);
  return uv_loop_close(&loop) == 0 && !state.failed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::chrono::milliseconds hold = 500ms;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--hold") == 0) {
    char* end = nullptr;
    errno = 0;
    long ms = std::strtol(argv[2], &end, 10);
    if (errno != 0 || end == argv[2] || *end != '\0' || ms < 0 || ms > 3'600'000) {
      std::fprintf(stderr, "--hold takes milliseconds, 0 to 3600000, not '%s'\n", argv[2]);
      example::usage(usage_text, example::usage_error);
    }
    hold = std::chrono::milliseconds(ms);
    first = 3;
  }
  redlock::Options options = example::masters_from(argc, argv, first, usage_text);
  try {
    return run(std::move(options), hold);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return example::usage_error;
  }
}
