#include <redlock/mutex.hpp>

#include <atomic>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

namespace redlock {
namespace {

// Client::lock treats a wait this long as a wait without end.
constexpr milliseconds forever = milliseconds::max();
constexpr milliseconds max_ttl{std::numeric_limits<std::int32_t>::max()};

}  // namespace

struct Mutex::State {
  State(Redlock& r, milliseconds t, KeepOptions k) : redlock(r), ttl(t), keep(k) {}

  // Takes `taken` (the holder's thread, local mutex held); false and the
  // error kept when it is an error.
  bool take(Result<Lock> taken) {
    std::lock_guard<std::mutex> lock(state_mutex);
    if (!taken) {
      error = taken.error();
      return false;
    }
    guard.emplace(redlock, std::move(*taken), keep);
    error = {};
    holder = std::this_thread::get_id();
    return true;
  }

  void fail(errc why) {
    std::lock_guard<std::mutex> lock(state_mutex);
    error = make_error_code(why);
  }

  bool held_by_this_thread() const { return holder.load() == std::this_thread::get_id(); }

  Redlock& redlock;
  const milliseconds ttl;
  const KeepOptions keep;
  // Threads of this process go one at a time.
  std::timed_mutex local;
  std::atomic<std::thread::id> holder{};
  // Written by the holder under state_mutex, so that lost() and valid_until()
  // may read them from any thread.
  mutable std::mutex state_mutex;
  std::optional<LockGuard> guard;
  std::error_code error;  // the last failure
};

Mutex::Mutex(Redlock& redlock, std::string resource, milliseconds ttl, KeepOptions keep)
    : resource_(std::move(resource)) {
  if (resource_.empty()) throw std::invalid_argument("redlock::Mutex: resource is empty");
  if (ttl.count() < 1 || ttl > max_ttl)
    throw std::invalid_argument("redlock::Mutex: ttl must be 1 ms to 2^31-1 ms");
  state_ = std::make_unique<State>(redlock, ttl, keep);
}

Mutex::~Mutex() {
  unlock();
}

void Mutex::lock() {
  if (state_->held_by_this_thread()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "redlock::Mutex: this thread holds '" + resource_ + "' already");
  }
  state_->local.lock();
  if (!state_->take(state_->redlock.lock(resource_, state_->ttl, forever))) {
    state_->local.unlock();
    throw std::system_error(error(), "redlock::Mutex: lock '" + resource_ + "'");
  }
}

bool Mutex::try_lock() {
  if (!state_->local.try_lock()) {
    // Another thread of this process holds it (or this one: no failure).
    if (!state_->held_by_this_thread()) state_->fail(errc::not_acquired);
    return false;
  }
  if (state_->take(state_->redlock.try_lock(resource_, state_->ttl))) return true;
  state_->local.unlock();
  return false;
}

bool Mutex::try_lock_within(milliseconds wait) {
  if (state_->held_by_this_thread()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "redlock::Mutex: this thread holds '" + resource_ + "' already");
  }
  const auto start = std::chrono::steady_clock::now();
  if (!state_->local.try_lock_for(wait)) {
    state_->fail(errc::timeout);
    return false;
  }
  const auto left = wait - std::chrono::ceil<milliseconds>(std::chrono::steady_clock::now() - start);
  Result<Lock> taken = left.count() > 0 ? state_->redlock.lock(resource_, state_->ttl, left)
                                        : state_->redlock.try_lock(resource_, state_->ttl);
  if (state_->take(std::move(taken))) return true;
  state_->local.unlock();
  return false;
}

void Mutex::unlock() noexcept {
  // Only the thread that locked it (std::lock_guard and std::unique_lock do so).
  if (!state_->held_by_this_thread()) return;
  std::optional<LockGuard> guard;
  {
    std::lock_guard<std::mutex> lock(state_->state_mutex);
    guard.emplace(std::move(*state_->guard));
    state_->guard.reset();
  }
  const std::error_code lost = guard->error();
  const std::error_code unlocked = guard->unlock();
  {
    std::lock_guard<std::mutex> lock(state_->state_mutex);
    state_->error = lost ? lost : unlocked;
  }
  state_->holder = std::thread::id{};
  state_->local.unlock();
}

bool Mutex::lost() const {
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  return state_->guard && state_->guard->lost();
}

std::error_code Mutex::error() const {
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  if (state_->guard && state_->guard->lost()) return state_->guard->error();
  return state_->error;
}

std::chrono::steady_clock::time_point Mutex::valid_until() const {
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  return state_->guard ? state_->guard->valid_until() : std::chrono::steady_clock::time_point{};
}

const Lock& Mutex::lock_held() const {
  static const Lock none{};
  return state_->guard ? state_->guard->lock() : none;
}

}  // namespace redlock
