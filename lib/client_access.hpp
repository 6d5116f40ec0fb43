#pragma once

#include <redlock/client.hpp>

#include <functional>

namespace redlock {

class Context;

/// What the library's own layers above a Client may ask of it that users
/// may not (the blocking facade's re-entry table).
struct ClientAccess {
  /// `listener` is told, on the loop thread, of every lock whose value the
  /// Client deletes because the lock was lost (a refused extend or
  /// continue_lock, a keep that ended, an extension answered too late),
  /// before that call's caller or on_lost hears of it.
  static void on_lost(Client& client, std::function<void(const Lock&)> listener);
  /// The Client's shared state: its masters, Waiters, options and loop
  /// (Election reads and writes beside its lock with them).
  static Context& context(Client& client);
};

}  // namespace redlock
