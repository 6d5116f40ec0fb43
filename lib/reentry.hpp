#pragma once

#include <redlock/lock.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

namespace redlock {

/// Options::reentrant for the blocking facade: which thread holds which
/// resource through one Redlock, at how many levels, and who listens to its
/// keep. Thread-safe: callers' threads and the loop thread use it at once.
class Reentry {
 public:
  using Lost = std::function<void(std::error_code)>;
  using Renewed = std::function<void(std::chrono::steady_clock::time_point)>;

  struct Held {
    Lock lock;
    bool kept = false;  // a keep renews it: valid_until moves on by itself
  };

  /// This thread holds `resource` and the lock is still valid: one level
  /// more. Nothing otherwise (a dead entry is forgotten).
  std::optional<Held> enter(const std::string& resource);
  /// A lock this thread has just acquired on the masters: its first level.
  void acquired(const Lock& lock);
  /// The lock was extended on the masters (any level).
  void extended(const Lock& lock);
  /// enter() then failed to extend it: that level was not granted (the lock
  /// is lost, and lost_value() was told).
  void refused(const Lock& lock);
  /// The Client deleted our value of `lock` after a loss (loop thread): no
  /// later enter() hands it out.
  void lost_value(const Lock& lock);
  /// unlock(lock): one level less, and that level's listeners dropped. True
  /// when the masters must be released (the last level, or not tracked).
  bool leave(const Lock& lock);

  /// How a keep of `lock` goes on.
  enum class Keep {
    untracked,  // not held here: keep it with the caller's callbacks
    first,      // keep it with callbacks that call lost() and renewed()
    shared,     // kept already: the listener was added, nothing to start
  };
  /// Registers the caller's callbacks at the lock's current level.
  Keep keep(const Lock& lock, Lost on_lost, Renewed on_renewed);
  /// From the one keep of `lock` (loop thread): tells every listener.
  void lost(const Lock& lock, std::error_code error);
  void renewed(const Lock& lock, std::chrono::steady_clock::time_point valid_until);

 private:
  struct Listener {
    int level;
    Lost on_lost;
    Renewed on_renewed;
  };
  struct Entry {
    std::thread::id owner;
    Lock lock;
    int levels = 1;
    bool kept = false;
    bool lost = false;
    std::vector<Listener> listeners;
  };
  Entry* find(const Lock& lock);  // the entry holding lock.value; under mutex_

  std::mutex mutex_;
  std::unordered_map<std::string, Entry> held_;  // by resource; guarded by mutex_
};

}  // namespace redlock
