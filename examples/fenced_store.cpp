// A resource that rejects stale writers, and a writer that holds the lock
// with fencing tokens (docs/fencing.md; scripts/demo.sh runs it).
//
//   fenced-store write STORE TOKEN TEXT
//       The store: a file whose first line is the largest token it accepted.
//       Accepts TEXT only with TOKEN > that token (exit 0), else rejects it
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

namespace {

constexpr int rejected = 3;

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
  if (token > last) {
    std::rewind(f);
    if (ftruncate(fd, 0) != 0) status = 1;
    std::fprintf(f, "%llu\n%s\n", token, text.c_str());
    std::printf("store: accepted \"%s\" with token %llu (last was %llu)\n", text.c_str(), token, last);
  } else {
    std::printf("store: REJECTED \"%s\": token %llu is not above %llu\n", text.c_str(), token, last);
    status = rejected;
  }
  std::fclose(f);
  return status;
}

int hold(const std::string& path, const std::string& name, long hold_ms, int argc, char** uris) {
  redlock::Options options;
  for (int i = 0; i < argc; ++i) options.masters.push_back(redlock::Endpoint::parse(uris[i]));
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
  std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "write" && argc == 5)
      return write_store(argv[2], std::strtoull(argv[3], nullptr, 10), argv[4]);
    if (command == "hold" && argc >= 6) return hold(argv[2], argv[3], std::atol(argv[4]), argc - 5, argv + 5);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fenced-store: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: fenced-store write STORE TOKEN TEXT\n"
               "       fenced-store hold STORE NAME HOLD_MS URI...\n");
  return 1;
}
