// Takes a real lock with an installed redlock (scripts/deb-test.sh builds it
// against the Debian packages): lock_consumer MASTER_URI...
// Takes "deb-test" on the masters, checks that a second attempt is refused
// while it is held, releases it, and prints "locked, refused, unlocked".
#include <redlock/redlock.hpp>

#include <cstdio>
#include <exception>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: lock_consumer MASTER_URI...\n");
    return 64;
  }
  try {
    redlock::Options options;
    for (int i = 1; i < argc; ++i) options.masters.push_back(redlock::Endpoint::parse(argv[i]));
    redlock::Redlock redlock(options);

    auto lock = redlock.try_lock("deb-test", 10s);
    if (!lock) {
      std::fprintf(stderr, "lock: %s\n", lock.error().message().c_str());
      return 1;
    }
    auto again = redlock.try_lock("deb-test", 10s);
    if (again || again.error() != redlock::errc::not_acquired) {
      std::fprintf(stderr, "a second lock while held: %s\n",
                   again ? "granted" : again.error().message().c_str());
      return 1;
    }
    if (std::error_code error = redlock.unlock(*lock)) {
      std::fprintf(stderr, "unlock: %s\n", error.message().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("locked, refused, unlocked\n");
  return 0;
}
