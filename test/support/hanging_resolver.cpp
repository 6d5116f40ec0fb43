#include "hanging_resolver.hpp"

#include "timeouts.hpp"

#include <dlfcn.h>
#include <netdb.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace {

using namespace std::chrono_literals;

constexpr std::string_view hanging_suffix = ".hang.test";
constexpr auto safety_cap = 30s;

struct Count {
  int calls = 0;
  int in_flight = 0;
  int max_in_flight = 0;
};

struct Switch {
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;               // guarded by mutex
  std::map<std::string, Count> names;  // guarded by mutex
  int in_flight = 0;                   // all names; guarded by mutex
};

// Never destroyed: a lookup thread the library abandoned may still be blocked
// here while the process exits, and must not wait on a destroyed condition
// variable.
Switch& the_switch() {
  static Switch* s = new Switch;  // NOLINT(cppcoreguidelines-owning-memory)
  return *s;
}

using GetAddrInfo = int (*)(const char*, const char*, const addrinfo*, addrinfo**);

// Under ASan this is ASan's interceptor, which calls libc's.
GetAddrInfo real_getaddrinfo() {
  static const auto real = reinterpret_cast<GetAddrInfo>(dlsym(RTLD_NEXT, "getaddrinfo"));
  return real;
}

bool hangs(std::string_view name) {
  return name.size() >= hanging_suffix.size() &&
         name.substr(name.size() - hanging_suffix.size()) == hanging_suffix;
}

}  // namespace

extern "C" int getaddrinfo(const char* name, const char* service, const addrinfo* hints, addrinfo** result) {
  Switch& s = the_switch();
  const std::string key = name ? name : "";
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    Count& c = s.names[key];
    ++c.calls;
    ++c.in_flight;
    c.max_in_flight = std::max(c.max_in_flight, c.in_flight);
    ++s.in_flight;
  }
  int status = EAI_NONAME;
  if (hangs(key)) {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (!s.changed.wait_for(lock, safety_cap, [&s] { return s.released; })) status = EAI_AGAIN;
  } else if (GetAddrInfo real = real_getaddrinfo()) {
    status = real(name, service, hints, result);
  } else {
    status = EAI_SYSTEM;
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    --s.names[key].in_flight;
    --s.in_flight;
  }
  s.changed.notify_all();
  return status;
}

namespace redlock::test {

HangingNames::HangingNames() {
  Switch& s = the_switch();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.released = false;
  // Calls still inside (from an earlier test) keep their entries consistent.
  for (auto& [name, count] : s.names) count = Count{0, count.in_flight, count.in_flight};
}

HangingNames::~HangingNames() {
  release();
  Switch& s = the_switch();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.changed.wait_for(lock, scaled(5s), [&s] { return s.in_flight == 0; });
}

void HangingNames::release() {
  Switch& s = the_switch();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.released = true;
  }
  s.changed.notify_all();
}

namespace {

template <class Field>
int read(const std::string& name, Field field) {
  Switch& s = the_switch();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.names.find(name);
  return it == s.names.end() ? 0 : it->second.*field;
}

}  // namespace

int HangingNames::calls(const std::string& name) const {
  return read(name, &Count::calls);
}

int HangingNames::in_flight(const std::string& name) const {
  return read(name, &Count::in_flight);
}

int HangingNames::max_in_flight(const std::string& name) const {
  return read(name, &Count::max_in_flight);
}

}  // namespace redlock::test
