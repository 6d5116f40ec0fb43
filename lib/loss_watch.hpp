#pragma once

#include <uv.h>

#include <redlock/lock.hpp>
#include <redlock/options.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "master.hpp"

namespace redlock {

/// Hears, over keyspace notifications, that a kept lock's key was deleted,
/// expired, evicted, renamed or moved away on a master, so that the lock is
/// renewed at once and a loss is heard then rather than at the next renewal.
///
/// It has a subscriber connection per master of its own, opened at the first
/// watch() (Waiters' carry only a majority of the keys each). At every
/// connect it reads the master's notify-keyspace-events; only where that
/// sends keyspace events of generic commands, expiry or eviction (K with g,
/// x, e or A) are the keys subscribed. A master that refuses CONFIG GET (an
/// ACL, a renamed command) counts as sending none. A change of the setting
/// is seen at the next reconnect.
///
/// A notification only starts a renewal: the masters' answers decide, as
/// always, so a stray or late one costs a renewal, never a lock.
class LossWatch {
 public:
  /// `on_gone(value)`: a key of the watched lock with `value` is gone on
  /// some master, or a subscriber connection is back and may have missed it.
  LossWatch(uv_loop_t* loop, const Options& options, std::shared_ptr<const TlsContext> tls,
            std::function<void(const std::string& value)> on_gone);
  ~LossWatch();
  LossWatch(const LossWatch&) = delete;
  LossWatch& operator=(const LossWatch&) = delete;

  /// The keys `lock` is held on: its lock key (a permit's; for a shared lock
  /// also the shared holders' set: the lock key holds the mark every
  /// exclusive script reads), or every resource's for a lock_all.
  static std::vector<std::string> keys_of(std::string_view key_prefix, const Lock& lock);

  /// Listens for losses of `lock`'s keys until unwatch(lock).
  void watch(const Lock& lock);
  void unwatch(const Lock& lock);
  /// Closes the connections (the Client is closing).
  void close();

 private:
  class Settings;
  class Resubscribed;
  enum class Notices { unknown, off, on };

  void open();
  void on_ready(Master& subscriber);
  void on_settings(const Master& subscriber, const Reply& reply);
  void on_resubscribed(const Master& subscriber);
  void on_message(std::size_t master, std::string_view channel, std::string_view event);
  std::string channel(std::size_t master, std::string_view key) const;
  void send_to_listening(std::string_view verb, const std::string& key);

  uv_loop_t* loop_;
  const Options& options_;
  const std::shared_ptr<const TlsContext> tls_;
  std::function<void(const std::string&)> on_gone_;
  std::unordered_map<std::string, std::vector<std::string>>
      watched_;  // key -> values of the locks held on it
  std::shared_ptr<Settings> settings_;
  std::shared_ptr<Resubscribed> resubscribed_;
  std::vector<std::unique_ptr<Master>> subscribers_;  // empty until the first watch()
  std::vector<Notices> notices_;                      // per subscriber, from its last connect
  std::vector<std::string> channel_prefixes_;         // per master: "__keyspace@<db>__:"
};

}  // namespace redlock
