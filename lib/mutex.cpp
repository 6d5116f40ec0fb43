#include <redlock/mutex.hpp>

#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

namespace redlock {
namespace {

using steady = std::chrono::steady_clock;

// Client::lock treats a wait this long as a wait without end.
constexpr milliseconds forever = milliseconds::max();
constexpr milliseconds max_ttl{std::numeric_limits<std::int32_t>::max()};
// Longer waits are waits without end (steady_clock's nanoseconds last 292 years).
constexpr long double century_ms = 100.0L * 365 * 24 * 3600 * 1000;

}  // namespace

struct Mutex::State {
  State(Redlock& r, milliseconds t, KeepOptions k) : redlock(r), ttl(t), keep(k) {}

  // The local side: threads of this process take turns. A flag under a
  // std::mutex and a condition variable rather than a std::timed_mutex, so
  // that any thread may release it and ThreadSanitizer follows the waits.
  // `until` empty: without end. False when the deadline passed first.
  bool enter(const std::optional<steady::time_point>& until) {
    std::unique_lock<std::mutex> lock(local_mutex);
    auto free = [this] { return !held; };
    if (!until) {
      turn.wait(lock, free);
    } else if (!turn.wait_until(lock, *until, free)) {
      return false;
    }
    held = true;
    return true;
  }

  void leave() {
    {
      std::lock_guard<std::mutex> lock(local_mutex);
      held = false;
    }
    turn.notify_one();
  }

  // The local side is ours: takes `taken` or records why not; its error.
  std::error_code take(Result<Lock> taken) {
    if (!taken) {
      fail(taken.error());
      return taken.error();
    }
    std::lock_guard<std::mutex> lock(state_mutex);
    guard.emplace(redlock, std::move(*taken), keep);
    holder = std::this_thread::get_id();
    if (error_thread == holder) error = {};  // this thread's last attempt succeeded
    return {};
  }

  void fail(std::error_code why) {
    std::lock_guard<std::mutex> lock(state_mutex);
    error = why;
    error_thread = std::this_thread::get_id();
  }

  bool held_by_this_thread() const {
    std::lock_guard<std::mutex> lock(state_mutex);
    return guard && holder == std::this_thread::get_id();
  }

  Redlock& redlock;
  const milliseconds ttl;
  const KeepOptions keep;

  std::mutex local_mutex;
  std::condition_variable turn;
  bool held = false;  // guarded by local_mutex

  // The holder's state, under state_mutex: lost() and valid_until() read it
  // from any thread.
  mutable std::mutex state_mutex;
  std::optional<LockGuard> guard;
  std::thread::id holder;
  std::error_code error;  // the last failure, or why the last hold was lost
  std::thread::id error_thread;
};

namespace {

// Releases the local side on the way out of a failed or throwing attempt.
class LocalTurn {
 public:
  explicit LocalTurn(Mutex::State& state) : state_(state) {}
  ~LocalTurn() {
    if (!kept_) state_.leave();
  }
  LocalTurn(const LocalTurn&) = delete;
  LocalTurn& operator=(const LocalTurn&) = delete;
  void keep() { kept_ = true; }

 private:
  Mutex::State& state_;
  bool kept_ = false;
};

}  // namespace

Mutex::Mutex(Redlock& redlock, std::string resource, milliseconds ttl, KeepOptions keep)
    : resource_(std::move(resource)) {
  if (resource_.empty()) throw std::invalid_argument("redlock::Mutex: resource is empty");
  if (ttl.count() < 1 || ttl > max_ttl)
    throw std::invalid_argument("redlock::Mutex: ttl must be 1 ms to 2^31-1 ms");
  if (keep.every.count() < 0 || keep.max_hold.count() < 0)
    throw std::invalid_argument("redlock::Mutex: KeepOptions every and max_hold must not be negative");
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
  state_->enter(std::nullopt);
  LocalTurn turn(*state_);
  if (std::error_code error = state_->take(state_->redlock.lock(resource_, state_->ttl, forever)))
    throw std::system_error(error, "redlock::Mutex: lock '" + resource_ + "'");
  turn.keep();
}

bool Mutex::try_lock() {
  if (!state_->enter(steady::now())) {
    // Another thread holds it (or this one: that is no failure).
    if (!state_->held_by_this_thread()) state_->fail(make_error_code(errc::not_acquired));
    return false;
  }
  LocalTurn turn(*state_);
  if (state_->take(state_->redlock.try_lock(resource_, state_->ttl))) return false;
  turn.keep();
  return true;
}

bool Mutex::try_lock_within(long double wait_ms) {
  if (state_->held_by_this_thread()) {
    throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur),
                            "redlock::Mutex: this thread holds '" + resource_ + "' already");
  }
  const bool without_end = !(wait_ms < century_ms);  // also NaN
  const auto wait =
      milliseconds{without_end ? 0 : static_cast<milliseconds::rep>(std::ceil(std::max(wait_ms, 0.0L)))};
  const auto start = steady::now();
  if (!state_->enter(without_end ? std::nullopt : std::optional<steady::time_point>(start + wait))) {
    state_->fail(make_error_code(errc::timeout));
    return false;
  }
  LocalTurn turn(*state_);
  Result<Lock> taken = [&] {
    if (without_end) return state_->redlock.lock(resource_, state_->ttl, forever);
    const auto left = wait - std::chrono::ceil<milliseconds>(steady::now() - start);
    return left.count() > 0 ? state_->redlock.lock(resource_, state_->ttl, left)
                            : state_->redlock.try_lock(resource_, state_->ttl);
  }();
  if (state_->take(std::move(taken))) return false;
  turn.keep();
  return true;
}

void Mutex::unlock() noexcept {
  std::optional<LockGuard> guard;
  {
    std::lock_guard<std::mutex> lock(state_->state_mutex);
    if (!state_->guard) return;  // not held
    guard.emplace(std::move(*state_->guard));
    state_->guard.reset();
    state_->holder = std::thread::id{};
  }
  const std::error_code lost = guard->error();
  const std::error_code unlocked = guard->unlock();
  if (lost || unlocked) state_->fail(lost ? lost : unlocked);
  state_->leave();
}

bool Mutex::lost() const {
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  return state_->guard && state_->guard->lost();
}

std::error_code Mutex::error() const {
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  if (state_->guard && state_->guard->lost()) return state_->guard->error();
  return state_->error_thread == std::this_thread::get_id() ? state_->error : std::error_code{};
}

std::chrono::steady_clock::time_point Mutex::valid_until() const {
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  return state_->guard ? state_->guard->valid_until() : std::chrono::steady_clock::time_point{};
}

const Lock& Mutex::lock_held() const {
  static const Lock none{};
  std::lock_guard<std::mutex> lock(state_->state_mutex);
  return state_->guard ? state_->guard->lock() : none;
}

}  // namespace redlock
