// An LD_PRELOAD shim that shifts a process's wall clock (CLOCK_REALTIME and
// its variants, gettimeofday, time) by an offset another process can change
// while it runs: the `clock` faults of redlock-chaos, which jump the masters'
// clocks. (libfaketime crashes redis-server at start-up under jemalloc.)
//
// The offset is a signed 64-bit count of nanoseconds, the first 8 bytes of
// the file REDLOCK_CLOCK_SHIFT_FILE names; the shim creates the file (zero)
// and maps it shared, so a write by the parent is seen at the next call.
// Without the variable, or if the file cannot be mapped, the offset is 0.
//
// The real clocks are read with the raw system call, not through dlsym:
// dlsym may allocate, and the allocator may read the clock. No allocation,
// no locks but pthread_once's, nothing from the C++ library.
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace {

constexpr std::int64_t ns_per_s = 1'000'000'000;

pthread_once_t once = PTHREAD_ONCE_INIT;
const volatile std::int64_t* shift = nullptr;

void map_shift_file() {
  const char* path = std::getenv("REDLOCK_CLOCK_SHIFT_FILE");
  if (path == nullptr || *path == '\0') return;
  const int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size < static_cast<off_t>(sizeof(std::int64_t))) {
    (void)!::ftruncate(fd, sizeof(std::int64_t));
  }
  void* map = ::mmap(nullptr, sizeof(std::int64_t), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map != MAP_FAILED) shift = static_cast<const volatile std::int64_t*>(map);
}

std::int64_t shift_ns() {
  ::pthread_once(&once, map_shift_file);
  return shift == nullptr ? 0 : __atomic_load_n(shift, __ATOMIC_RELAXED);
}

bool is_wall_clock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

int real_clock_gettime(clockid_t id, struct timespec* ts) {
  return static_cast<int>(::syscall(SYS_clock_gettime, id, ts));
}

void add_ns(struct timespec* ts, std::int64_t ns) {
  std::int64_t total = static_cast<std::int64_t>(ts->tv_nsec) + ns % ns_per_s;
  ts->tv_sec += static_cast<time_t>(ns / ns_per_s + total / ns_per_s);
  total %= ns_per_s;
  if (total < 0) {
    total += ns_per_s;
    ts->tv_sec -= 1;
  }
  ts->tv_nsec = static_cast<long>(total);
}

}  // namespace

extern "C" {

// NOLINTNEXTLINE(readability-inconsistent-declaration-parameter-name): libc's names
int clock_gettime(clockid_t id, struct timespec* ts) {
  const int rc = real_clock_gettime(id, ts);
  if (rc == 0 && is_wall_clock(id)) add_ns(ts, shift_ns());
  return rc;
}

int gettimeofday(struct timeval* tv, void* /*timezone*/) {
  struct timespec ts {};
  const int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == 0) {  // glibc declares tv nonnull
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = static_cast<suseconds_t>(ts.tv_nsec / 1000);
  }
  return rc;
}

time_t time(time_t* out) {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

}  // extern "C"
