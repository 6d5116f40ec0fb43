// Embedding the async Client in a daemon that already runs a libuv loop:
// take a lock, keep it alive with extend() from a timer while "working",
// release it and close, all without blocking the loop.
//
//   embed-libuv redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
//
// Exits 0 when it led and released the lock cleanly, 1 when it could not
// take or keep it, 64 on a bad command line.

#include <uv.h>
#include <redlock/redlock.hpp>

#include <cstdio>
#include <exception>

#include "args.hpp"

using namespace std::chrono_literals;

namespace {

const char* const usage_text =
    "usage: embed-libuv MASTER_URI...\n"
    "  Takes the lock daemon:leader on the masters (redis://[user:pass@]host[:port][/db]\n"
    "  or unix:///path), extends it three times from a libuv timer, releases it.\n"
    "  Exit status: 0 done, 1 the lock could not be taken or was lost, 64 bad arguments.\n";

struct Daemon {
  redlock::Client locks;
  uv_timer_t heartbeat{};
  redlock::Lock held;
  int beats = 0;
  bool failed = false;

  Daemon(uv_loop_t* loop, redlock::Options options) : locks(loop, std::move(options)) {
    uv_timer_init(loop, &heartbeat);
    heartbeat.data = this;
  }

  void start() {
    locks.lock("daemon:leader", 3s, [this](std::error_code error, redlock::Lock lock) {
      if (error) {
        std::printf("not the leader: %s\n", error.message().c_str());
        if (error == redlock::errc::unavailable) example::print_master_errors(locks);
        failed = true;
        return stop();
      }
      held = std::move(lock);
      std::printf("leader; valid for %lld ms\n", static_cast<long long>(held.validity().count()));
      // Extend at a third of the ttl, long before it runs out.
      uv_timer_start(
          &heartbeat, [](uv_timer_t* t) { static_cast<Daemon*>(t->data)->beat(); }, 1000, 1000);
    });
  }

  void beat() {
    if (++beats > 3) {
      uv_timer_stop(&heartbeat);
      locks.unlock(held, [this](std::error_code error) {
        std::printf("released: %s\n", error ? error.message().c_str() : "ok");
        failed = failed || error;
        stop();
      });
      return;
    }
    locks.extend(held, 3s, [this](std::error_code error, redlock::Lock lock) {
      if (error) {
        std::printf("lost the lock: %s\n", error.message().c_str());
        failed = true;
        uv_timer_stop(&heartbeat);
        return stop();
      }
      held = std::move(lock);
      std::printf("extended; valid for %lld ms\n", static_cast<long long>(held.validity().count()));
    });
  }

  void stop() {
    locks.close(nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&heartbeat), nullptr);
  }
};

}  // namespace

int main(int argc, char** argv) {
  redlock::Options options = example::masters_from(argc, argv, 1, usage_text);
  try {
    options.validate();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    example::usage(usage_text, example::usage_error);
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  bool failed = false;
  {
    Daemon daemon(&loop, options);
    daemon.start();
    uv_run(&loop, UV_RUN_DEFAULT);  // returns once the Client and the timer are closed
    failed = daemon.failed;
  }
  return uv_loop_close(&loop) == 0 && !failed ? 0 : 1;
}
