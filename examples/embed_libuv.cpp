// Embedding the async Client in a daemon that already runs a libuv loop:
// take a lock, keep it alive with extend() from a timer while "working",
// release it and close, all without blocking the loop.
//
//   embed-libuv redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003

#include <uv.h>
#include <redlock/redlock.hpp>

#include <cstdio>

using namespace std::chrono_literals;

namespace {

struct Daemon {
  redlock::Client locks;
  uv_timer_t heartbeat{};
  redlock::Lock held;
  int beats = 0;

  Daemon(uv_loop_t* loop, redlock::Options options) : locks(loop, std::move(options)) {
    uv_timer_init(loop, &heartbeat);
    heartbeat.data = this;
  }

  void start() {
    locks.lock("daemon:leader", 3s, [this](std::error_code error, redlock::Lock lock) {
      if (error) {
        std::printf("not the leader: %s\n", error.message().c_str());
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
        stop();
      });
      return;
    }
    locks.extend(held, 3s, [this](std::error_code error, redlock::Lock lock) {
      if (error) {
        std::printf("lost the lock: %s\n", error.message().c_str());
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
  redlock::Options options;
  for (int i = 1; i < argc; ++i) options.masters.push_back(redlock::Endpoint::parse(argv[i]));
  if (options.masters.empty()) options.masters.push_back(redlock::Endpoint{});

  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    Daemon daemon(&loop, options);
    daemon.start();
    uv_run(&loop, UV_RUN_DEFAULT);  // returns once the Client and the timer are closed
  }
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}
