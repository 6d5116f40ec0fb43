#include "keeper.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

namespace redlock {

struct Keeper::Hold {
  Keeper* keeper;
  Lock lock;
  milliseconds every;
  OnLost on_lost;
  Timer renewal;
  Timer expiry;
  Timer cap;
  bool renewing = false;

  Hold(Keeper* k, Lock l, milliseconds e, OnLost lost)
      : keeper(k),
        lock(std::move(l)),
        every(e),
        on_lost(std::move(lost)),
        renewal(make_timer(k->loop_, this)),
        expiry(make_timer(k->loop_, this)),
        cap(make_timer(k->loop_, this)) {}
};

namespace {

std::uint64_t ms_until(std::chrono::steady_clock::time_point t) {
  auto left = std::chrono::ceil<milliseconds>(t - std::chrono::steady_clock::now()).count();
  return static_cast<std::uint64_t>(std::max<long long>(left, 0));
}

void start_repeating(uv_timer_t* timer, milliseconds every, uv_timer_cb cb) {
  auto ms = static_cast<std::uint64_t>(every.count());
  uv_timer_start(timer, cb, ms, ms);
}

}  // namespace

Keeper::Keeper(uv_loop_t* loop, Hooks hooks) : loop_(loop), hooks_(std::move(hooks)) {
}

Keeper::~Keeper() = default;

void Keeper::keep(const Lock& lock, KeepOptions options, OnLost on_lost) {
  if (!on_lost) on_lost = [](std::error_code) {};
  bool bad = lock.value.empty() || lock.ttl.count() <= 0 || options.every.count() < 0 ||
             options.max_hold.count() < 0 || holds_.count(lock.value) != 0;
  if (bad) {
    hooks_.post([on_lost = std::move(on_lost)] { on_lost(make_error_code(errc::invalid_argument)); });
    return;
  }
  milliseconds every = options.every.count() > 0 ? options.every : std::max(lock.ttl / 3, milliseconds{1});
  auto hold = std::make_unique<Hold>(this, lock, every, std::move(on_lost));
  start_repeating(hold->renewal.get(), every, [](uv_timer_t* t) {
    Hold& h = *owner_of<Hold>(t);
    h.keeper->renew(h);
  });
  arm_expiry(*hold);
  if (options.max_hold.count() > 0) {
    uv_timer_start(
        hold->cap.get(),
        [](uv_timer_t* t) {
          Hold& h = *owner_of<Hold>(t);
          h.keeper->end(h, errc::timeout, true);
        },
        static_cast<std::uint64_t>(options.max_hold.count()), 0);
  }
  holds_[lock.value] = std::move(hold);
}

void Keeper::arm_expiry(Hold& hold) {
  uv_timer_start(
      hold.expiry.get(),
      [](uv_timer_t* t) {
        Hold& h = *owner_of<Hold>(t);
        h.keeper->end(h, errc::expired, true);
      },
      ms_until(hold.lock.valid_until), 0);
}

void Keeper::renew(Hold& hold) {
  if (hold.renewing) return;  // the previous renewal has not answered yet
  hold.renewing = true;
  hooks_.extend(
      hold.lock, hold.lock.ttl,
      [this, alive = std::weak_ptr<const bool>(alive_), value = hold.lock.value](std::error_code e, Lock l) {
        if (!alive.expired()) renewed(value, e, l);
      });
}

void Keeper::renewed(const std::string& value, std::error_code error, const Lock& lock) {
  auto it = holds_.find(value);
  if (it == holds_.end()) return;  // unlocked or ended meanwhile
  Hold& hold = *it->second;
  hold.renewing = false;
  if (error) {
    // A failed extend already deleted our value everywhere.
    end(hold, static_cast<errc>(error.value()), false);
    return;
  }
  hold.lock.valid_until = lock.valid_until;
  hold.lock.ttl = lock.ttl;
  arm_expiry(hold);
}

void Keeper::end(Hold& hold, errc why, bool release) {
  auto it = holds_.find(hold.lock.value);
  if (it == holds_.end()) return;
  std::unique_ptr<Hold> ended = std::move(it->second);
  holds_.erase(it);
  if (release) hooks_.release(ended->lock);
  hooks_.post([on_lost = std::move(ended->on_lost), why] { on_lost(make_error_code(why)); });
}

void Keeper::forget(const std::string& value) {
  holds_.erase(value);
}

void Keeper::close() {
  while (!holds_.empty()) end(*holds_.begin()->second, errc::closed, false);
}

}  // namespace redlock
