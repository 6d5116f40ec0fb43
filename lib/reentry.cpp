#include "reentry.hpp"

#include <algorithm>
#include <utility>

namespace redlock {

Reentry::Entry* Reentry::find(const Lock& lock) {
  auto it = held_.find(lock.resource);
  if (it == held_.end() || it->second.lock.value != lock.value) return nullptr;
  return &it->second;
}

std::optional<Reentry::Held> Reentry::enter(const std::string& resource) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = held_.find(resource);
  if (it == held_.end() || it->second.owner != std::this_thread::get_id()) return std::nullopt;
  Entry& e = it->second;
  if (e.lost || !e.lock.valid()) {
    held_.erase(it);  // dead: its last unlock goes to the masters and says not_held
    return std::nullopt;
  }
  ++e.levels;
  return Held{e.lock, e.kept};
}

void Reentry::acquired(const Lock& lock) {
  std::lock_guard<std::mutex> guard(mutex_);
  Entry& e = held_[lock.resource];
  e = Entry{};  // a dead entry of ours, or another thread's whose lock ran out
  e.owner = std::this_thread::get_id();
  e.lock = lock;
}

void Reentry::extended(const Lock& lock) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (Entry* e = find(lock)) e->lock = lock;
}

void Reentry::refused(const Lock& lock) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (Entry* e = find(lock)) {
    --e->levels;
    e->lost = true;
  }
}

void Reentry::lost_value(const Lock& lock) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (Entry* e = find(lock)) e->lost = true;
}

bool Reentry::leave(const Lock& lock) {
  std::lock_guard<std::mutex> guard(mutex_);
  Entry* e = find(lock);
  if (!e) return true;
  int level = e->levels;
  auto& l = e->listeners;
  l.erase(std::remove_if(l.begin(), l.end(), [level](const Listener& x) { return x.level >= level; }),
          l.end());
  if (--e->levels > 0) return false;
  held_.erase(lock.resource);
  return true;
}

Reentry::Keep Reentry::keep(const Lock& lock, Lost on_lost, Renewed on_renewed) {
  std::lock_guard<std::mutex> guard(mutex_);
  Entry* e = find(lock);
  if (!e || e->lost) return Keep::untracked;
  e->listeners.push_back({e->levels, std::move(on_lost), std::move(on_renewed)});
  return std::exchange(e->kept, true) ? Keep::shared : Keep::first;
}

void Reentry::lost(const Lock& lock, std::error_code error) {
  std::vector<Lost> told;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    Entry* e = find(lock);
    if (!e) return;
    e->lost = true;
    for (Listener& l : e->listeners) {
      if (l.on_lost) told.push_back(std::exchange(l.on_lost, nullptr));
    }
  }
  // Outside the mutex: a listener may read the guard or call the Redlock.
  for (Lost& fn : told) fn(error);
}

void Reentry::renewed(const Lock& lock, std::chrono::steady_clock::time_point valid_until) {
  std::vector<Renewed> told;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    Entry* e = find(lock);
    if (!e) return;
    e->lock.valid_until = valid_until;
    for (Listener& l : e->listeners) {
      if (l.on_renewed) told.push_back(l.on_renewed);
    }
  }
  for (Renewed& fn : told) fn(valid_until);
}

}  // namespace redlock
