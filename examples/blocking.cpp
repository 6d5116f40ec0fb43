// The blocking facade from several threads: each takes the lock, does its
// work under a LockGuard, and the guard releases it.
//
//   blocking redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003

#include <redlock/redlock.hpp>

#include <cstdio>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  redlock::Options options;
  for (int i = 1; i < argc; ++i) options.masters.push_back(redlock::Endpoint::parse(argv[i]));
  if (options.masters.empty()) options.masters.push_back(redlock::Endpoint{});
  options.retry_count = 50;
  options.retry_delay = 10ms;
  options.retry_jitter = 20ms;

  redlock::Redlock redlock(options);
  std::vector<std::thread> workers;
  for (int id = 1; id <= 4; ++id) {
    workers.emplace_back([&redlock, id] {
      auto lock = redlock.lock("report:daily", 5s);
      if (!lock) {
        std::printf("worker %d: %s\n", id, lock.error().message().c_str());
        return;
      }
      redlock::LockGuard guard(redlock, std::move(*lock));
      std::printf("worker %d holds the lock for %lld ms more\n", id,
                  static_cast<long long>(guard.lock().validity().count()));
      std::this_thread::sleep_for(20ms);  // the work
    });
  }
  for (auto& w : workers) w.join();
  return 0;
}
