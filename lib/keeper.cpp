#include "keeper.hpp"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <utility>

namespace redlock {

struct Keeper::Hold {
  Keeper* keeper;
  Lock lock;
  milliseconds every;
  bool every_from_ttl;  // KeepOptions::every was 0: every is ttl / 3
  bool release_on_loss = true;
  OnLost on_lost;
  OnRenewed on_renewed;
  Timer expiry;
  Timer cap;
  std::uint64_t due = 0;            // the next renewal (uv_now() ms); 0 while out of due_
  std::shared_ptr<void> renewing;   // the batch whose answer this hold awaits
  int extending = 0;                // the caller's extensions in flight
  bool again = false;               // renew again once what is in flight is answered
  std::uint64_t epoch = 0;          // extensions issued so far
  std::uint64_t renewal_epoch = 0;  // epoch when the renewal in flight was written

  Hold(Keeper* k, Lock l, milliseconds e, bool from_ttl, OnLost lost)
      : keeper(k),
        lock(std::move(l)),
        every(e),
        every_from_ttl(from_ttl),
        on_lost(std::move(lost)),
        expiry(make_timer(k->loop_, this)),
        cap(make_timer(k->loop_, this)) {}
};

namespace {

std::uint64_t ms_until(std::chrono::steady_clock::time_point t) {
  auto left = std::chrono::ceil<milliseconds>(t - std::chrono::steady_clock::now()).count();
  return static_cast<std::uint64_t>(std::max<long long>(left, 0));
}

milliseconds default_every(milliseconds ttl) {
  return std::max(ttl / 3, milliseconds{1});
}

// How early a renewal may go to share a batch: a tenth of the hold's period.
std::uint64_t early_by(milliseconds every) {
  return static_cast<std::uint64_t>(every.count() / 10);
}

}  // namespace

Keeper::Keeper(uv_loop_t* loop, Hooks hooks) : loop_(loop), hooks_(std::move(hooks)) {
}

Keeper::~Keeper() = default;

void Keeper::keep(const Lock& lock, KeepOptions options, OnLost on_lost, OnRenewed on_renewed) {
  if (!on_lost) on_lost = [](std::error_code) {};
  bool bad = lock.value.empty() || lock.resource.empty() || lock.ttl.count() <= 0 ||
             options.every.count() < 0 || options.max_hold.count() < 0 || holds_.count(lock.value) != 0;
  if (bad) {
    hooks_.post([on_lost = std::move(on_lost)] { on_lost(make_error_code(errc::invalid_argument)); });
    return;
  }
  bool from_ttl = options.every.count() == 0;
  milliseconds every = from_ttl ? default_every(lock.ttl) : options.every;
  auto hold = std::make_unique<Hold>(this, lock, every, from_ttl, std::move(on_lost));
  hold->on_renewed = std::move(on_renewed);
  hold->release_on_loss = options.release_on_loss;
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
  Hold& added = *hold;
  holds_[lock.value] = std::move(hold);
  if (hooks_.watch) hooks_.watch(lock);
  schedule(added, uv_now(loop_) + static_cast<std::uint64_t>(every.count()));
  arm();
}

void Keeper::renew_now() {
  std::uint64_t now = uv_now(loop_);
  for (auto& [value, hold] : holds_) renew_soon(*hold, now);
  arm();
}

void Keeper::renew_now(const std::string& value) {
  auto it = holds_.find(value);
  if (it == holds_.end()) return;
  renew_soon(*it->second, uv_now(loop_));
  arm();
}

void Keeper::renew_soon(Hold& hold, std::uint64_t now) {
  if (hold.renewing || hold.extending > 0) hold.again = true;
  schedule(hold, now);
}

// After a renewal or extension succeeded: the next renewal, at once if a
// loss was heard while it was in flight. `again` stays set while another
// renewal or extension written before the loss is still in flight: the tick
// skips the hold until then, and that one's answer must renew again too.
void Keeper::schedule_next(Hold& hold) {
  std::uint64_t now = uv_now(loop_);
  bool again = hold.again;
  if (!hold.renewing && hold.extending == 0) hold.again = false;
  schedule(hold, again ? now : now + static_cast<std::uint64_t>(hold.every.count()));
  arm();
}

void Keeper::schedule(Hold& hold, std::uint64_t due) {
  if (hold.due != 0) due_.erase({hold.due, &hold});
  hold.due = std::max<std::uint64_t>(due, 1);
  due_.insert({hold.due, &hold});
}

// Points the shared timer at the earliest renewal.
void Keeper::arm() {
  if (due_.empty()) {
    if (tick_) uv_timer_stop(tick_.get());
    armed_for_ = 0;
    return;
  }
  std::uint64_t first = due_.begin()->first;
  if (first == armed_for_) return;
  if (!tick_) tick_ = make_timer(loop_, this);
  std::uint64_t now = uv_now(loop_);
  uv_timer_start(
      tick_.get(), [](uv_timer_t* t) { owner_of<Keeper>(t)->tick(); }, first - std::min(first, now), 0);
  armed_for_ = first;
}

void Keeper::tick() {
  armed_for_ = 0;
  std::uint64_t now = uv_now(loop_);
  std::vector<Hold*> taken;
  while (!due_.empty()) {
    auto [when, hold] = *due_.begin();
    if (when > now + early_by(hold->every)) break;
    due_.erase(due_.begin());
    hold->due = 0;
    taken.push_back(hold);
  }
  TimePoint clock_now = hooks_.now();
  std::vector<Hold*> batch;
  for (Hold* hold : taken) {
    schedule(*hold, now + static_cast<std::uint64_t>(hold->every.count()));
    if (hold->renewing) continue;       // the previous renewal has not answered yet
    if (hold->extending > 0) continue;  // the extension's answer will stand
    if (clock_now >= hold->lock.valid_until) {
      // extend's rule: too late to renew, someone else may hold it now.
      end(*hold, errc::expired, true);
      continue;
    }
    batch.push_back(hold);
  }
  send(batch);
  arm();
}

// Which renewal script a hold takes: holds of one kind share a batch, and
// a lock_all's is a batch of its own.
int Keeper::renewal_kind(const Hold& hold) {
  if (!hold.lock.resources.empty()) return 2;
  return hold.lock.shared ? 1 : 0;
}

void Keeper::send(std::vector<Hold*>& batch) {
  std::stable_sort(batch.begin(), batch.end(),
                   [](const Hold* a, const Hold* b) { return renewal_kind(*a) < renewal_kind(*b); });
  for (std::size_t from = 0; from < batch.size();) {
    const int kind = renewal_kind(*batch[from]);
    std::size_t to = std::min(batch.size(), from + (kind == 2 ? 1 : Renewal::max_locks));
    to = static_cast<std::size_t>(std::find_if(batch.begin() + static_cast<std::ptrdiff_t>(from),
                                               batch.begin() + static_cast<std::ptrdiff_t>(to),
                                               [kind](const Hold* h) { return renewal_kind(*h) != kind; }) -
                                  batch.begin());
    send_batch(batch, from, to);
    from = to;
  }
}

void Keeper::send_batch(std::vector<Hold*>& batch, std::size_t from, std::size_t to) {
  std::vector<Renewal::Item> items;
  items.reserve(to - from);
  for (std::size_t i = from; i < to; ++i) {
    const Lock& l = batch[i]->lock;
    items.push_back({l.resource, l.permit, l.shared, l.value, l.ttl, l.resources});
  }
  auto renewal =
      hooks_.renew(std::move(items), [this](const std::string& value, std::error_code error,
                                            TimePoint valid_until) { renewed(value, error, valid_until); });
  for (std::size_t i = from; i < to; ++i) {
    batch[i]->renewing = renewal;
    batch[i]->renewal_epoch = batch[i]->epoch;
  }
}

void Keeper::renewed(const std::string& value, std::error_code error, TimePoint valid_until) {
  auto it = holds_.find(value);
  if (it == holds_.end()) return;  // unlocked or ended meanwhile
  Hold& hold = *it->second;
  hold.renewing.reset();  // the master answering holds the batch until it returns
  // Written before an extension: the masters ran the extension after it.
  if (hold.renewal_epoch != hold.epoch) return;
  if (hooks_.now() >= hold.lock.valid_until) {
    // The answer came too late (a paused process reads it before its timers
    // run): the validity ran out before the renewal was known to succeed.
    end(hold, errc::expired, true);
    return;
  }
  if (error) {
    end(hold, static_cast<errc>(error.value()), true);
    return;
  }
  hold.lock.valid_until = valid_until;
  ++renewals_;
  arm_expiry(hold);
  if (hold.again) schedule_next(hold);
  if (hold.on_renewed) {
    auto told = hold.on_renewed;  // the callback may unlock, ending the hold
    told(valid_until);
  }
}

void Keeper::extending(const std::string& value) {
  auto it = holds_.find(value);
  if (it == holds_.end()) return;
  ++it->second->extending;
  ++it->second->epoch;
}

std::error_code Keeper::extension_decided(const Lock& lock, std::error_code error) {
  auto it = holds_.find(lock.value);
  if (it == holds_.end()) {
    auto ended = ended_extending_.find(lock.value);
    if (ended == ended_extending_.end()) return {};
    errc why = ended->second.why;
    if (--ended->second.extensions <= 0) ended_extending_.erase(ended);
    return error ? error : make_error_code(why);
  }
  Hold& hold = *it->second;
  hold.extending = std::max(hold.extending - 1, 0);
  if (error) {
    if (error != errc::closed) end(hold, static_cast<errc>(error.value()), true);
    return {};
  }
  hold.lock.ttl = lock.ttl;
  hold.lock.valid_until = lock.valid_until;
  if (hold.every_from_ttl) hold.every = default_every(lock.ttl);
  arm_expiry(hold);
  schedule_next(hold);
  if (hold.on_renewed) {
    auto told = hold.on_renewed;
    told(lock.valid_until);
  }
  return {};
}

std::optional<TimePoint> Keeper::valid_until(const std::string& value) const {
  auto it = holds_.find(value);
  if (it == holds_.end()) return std::nullopt;
  return it->second->lock.valid_until;
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

void Keeper::erase(std::unordered_map<std::string, std::unique_ptr<Hold>>::iterator it) {
  Hold& hold = *it->second;
  if (hold.due != 0) due_.erase({hold.due, &hold});
  if (hooks_.unwatch) hooks_.unwatch(hold.lock);
  holds_.erase(it);
}

void Keeper::end(Hold& hold, errc why, bool release) {
  auto it = holds_.find(hold.lock.value);
  if (it == holds_.end()) return;
  Lock lock = hold.lock;
  bool release_on_loss = hold.release_on_loss;
  lost_.count(make_error_code(why));
  if (hold.extending > 0) ended_extending_[lock.value] = Ended{why, hold.extending};
  // Until it runs, an unlock(lock) still cancels the notice (forget()).
  auto notice = std::make_shared<OnLost>(std::move(hold.on_lost));
  erase(it);
  if (release) {
    hooks_.lost(lock);
    if (release_on_loss) hooks_.release(lock);
  }
  forget_noticed();
  noticing_[lock.value] = notice;
  hooks_.post([notice, why] {
    OnLost on_lost = std::exchange(*notice, nullptr);
    if (on_lost) on_lost(make_error_code(why));
  });
}

void Keeper::forget(const std::string& value) {
  auto it = holds_.find(value);
  if (it != holds_.end()) erase(it);
  ended_extending_.erase(value);
  auto notice = noticing_.find(value);
  if (notice == noticing_.end()) return;
  if (auto pending = notice->second.lock()) *pending = nullptr;
  noticing_.erase(notice);
}

// Drops the notices that have run, once their number doubled since the last
// time: amortised constant work per loss.
void Keeper::forget_noticed() {
  if (noticing_.size() < prune_at_) return;
  for (auto it = noticing_.begin(); it != noticing_.end();) {
    it = it->second.expired() ? noticing_.erase(it) : std::next(it);
  }
  prune_at_ = std::max<std::size_t>(64, 2 * noticing_.size());
}

void Keeper::close() {
  while (!holds_.empty()) end(*holds_.begin()->second, errc::closed, false);
  noticing_.clear();
  ended_extending_.clear();
  tick_.close();
  armed_for_ = 0;
}

}  // namespace redlock
