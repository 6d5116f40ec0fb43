// The blocking facade from several threads: each takes the lock, does its
// work under a LockGuard, and the guard releases it.
//
//   blocking redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
//
// Exits 0 when every worker had its turn, 1 when one could not take the lock
// or release it, 64 on a bad command line.

#include <redlock/redlock.hpp>

#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "args.hpp"

using namespace std::chrono_literals;

namespace {

const char* const usage_text =
    "usage: blocking MASTER_URI...\n"
    "  Four threads take the lock report:daily in turn through the blocking API.\n"
    "  Exit status: 0 every worker had its turn, 1 one did not, 64 bad arguments.\n";

}  // namespace

int main(int argc, char** argv) {
  redlock::Options options = example::masters_from(argc, argv, 1, usage_text);
  options.retry_count = 50;
  options.retry_delay = 10ms;
  options.retry_jitter = 20ms;

  std::unique_ptr<redlock::Redlock> made;
  try {
    made = std::make_unique<redlock::Redlock>(options);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    example::usage(usage_text, example::usage_error);
  }
  redlock::Redlock& redlock = *made;
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int id = 1; id <= 4; ++id) {
    workers.emplace_back([&redlock, &failures, id] {
      auto lock = redlock.lock("report:daily", 5s);
      if (!lock) {
        std::printf("worker %d: %s\n", id, lock.error().message().c_str());
        if (lock.error() == redlock::errc::unavailable) example::print_master_errors(redlock);
        ++failures;
        return;
      }
      redlock::LockGuard guard(redlock, std::move(*lock));
      std::printf("worker %d holds the lock for %lld ms more\n", id,
                  static_cast<long long>(guard.lock().validity().count()));
      std::this_thread::sleep_for(20ms);  // the work
      if (std::error_code error = guard.unlock()) {
        std::printf("worker %d: unlock: %s\n", id, error.message().c_str());
        ++failures;
      }
    });
  }
  for (auto& w : workers) w.join();
  return failures == 0 ? 0 : 1;
}
