// A resource that rejects stale writers, and a writer that holds the lock
// with fencing tokens (docs/fencing.md; scripts/demo.sh runs it).
//
//   fenced-store write STORE TOKEN TEXT
//       The store: a file whose first line is the largest token it accepted.
//       Accepts TEXT with a TOKEN at least that token (exit 0): the holder's
//       own second write carries the same token. Rejects a smaller one
//       (exit 3). flock() keeps concurrent writers apart.
//   fenced-store hold STORE NAME HOLD_MS URI...
//       Takes the lock "store" (ttl 1 s, waiting up to 10 s) on the masters,
//       prints its token, works for HOLD_MS and then writes "NAME" to STORE
//       with its token, whether or not the lock is still valid: the store,
//       not the writer, decides.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <redlock/redlock.hpp>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "args.hpp"

namespace {

constexpr int rejected = 3;

constexpr const char* usage_text =
    "usage: fenced-store write STORE TOKEN TEXT\n"
    "       fenced-store hold STORE NAME HOLD_MS URI...\n"
    "A store that accepts a write only with a fencing token at least the last\n"
    "it accepted (exit 3 when it rejects one), and a holder that writes to it\n"
    "after HOLD_MS ms whether or not its lock is still valid. TOKEN is a\n"
    "positive number, HOLD_MS a number of milliseconds up to 600000.\n";

// A whole decimal number in [low, high], or the usage and exit 64.
unsigned long long number_arg(const char* text, const char* what, unsigned long long low,
                              unsigned long long high) {
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (*text == '\0' || *text == '-' || *end != '\0' || errno != 0 || value < low || value > high) {
    std::fprintf(stderr, "fenced-store: %s '%s' is not a number in %llu..%llu\n", what, text, low, high);
    example::usage(usage_text, example::usage_error);
  }
  return value;
}

int write_store(const std::string& path, unsigned long long token, const std::string& text) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT, 0644);
  std::FILE* f = fd < 0 ? nullptr : fdopen(fd, "r+");
  if (!f) {
    std::fprintf(stderr, "fenced-store: %s: %s\n", path.c_str(), std::strerror(errno));
    if (fd >= 0) close(fd);
    return 1;
  }
  flock(fd, LOCK_EX);  // released when the file is closed
  unsigned long long last = 0;
  if (std::fscanf(f, "%llu", &last) != 1) last = 0;
  int status = 0;
  if (token >= last) {
    std::rewind(f);
    if (ftruncate(fd, 0) != 0) status = 1;
    std::fprintf(f, "%llu\n%s\n", token, text.c_str());
    std::printf("store: accepted \"%s\" with token %llu (last was %llu)\n", text.c_str(), token, last);
  } else {
    std::printf("store: REJECTED \"%s\": token %llu is below %llu\n", text.c_str(), token, last);
    status = rejected;
  }
  std::fclose(f);
  return status;
}

int hold(const std::string& path, const std::string& name, long hold_ms, redlock::Options options) {
  options.fencing = true;
  redlock::Redlock redlock(options);
  auto lock = redlock.lock("store", std::chrono::seconds(1), std::chrono::seconds(10));
  if (!lock) {
    std::fprintf(stderr, "%s: no lock: %s\n", name.c_str(), lock.error().message().c_str());
    return 1;
  }
  std::printf("%s: holds the lock with token %llu\n", name.c_str(),
              static_cast<unsigned long long>(lock->fencing_token));
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
  std::printf("%s: writing (lock %s)\n", name.c_str(), lock->valid() ? "still valid" : "EXPIRED meanwhile");
  std::fflush(stdout);
  int status = write_store(path, lock->fencing_token, name);
  redlock.unlock(*lock);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (example::is_help(argv[i])) example::usage(usage_text, 0);
  }
  std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "write" && argc == 5)
      return write_store(argv[2], number_arg(argv[3], "TOKEN", 1, ~0ULL), argv[4]);
    if (command == "hold" && argc >= 6) {
      auto hold_ms = static_cast<long>(number_arg(argv[4], "HOLD_MS", 0, 600000));
      return hold(argv[2], argv[3], hold_ms, example::masters_from(argc, argv, 5, usage_text));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fenced-store: %s\n", e.what());
    return 1;
  }
  example::usage(usage_text, example::usage_error);
}
