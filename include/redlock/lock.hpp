#pragma once

/// @file
/// Lock: what a successful lock call gives you.

#include <redlock/export.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace redlock {

/// A lock held on a quorum of masters. A plain value: copy it, keep it, pass it
/// back to extend(), continue_lock() or unlock().
struct REDLOCK_API Lock {
  /// The resource as the caller named it (without Options::key_prefix).
  std::string resource;
  /// The unique value stored on the masters: 128 random bits as 22 base64url
  /// characters, then ":", the time it was taken (Unix ms in base 36), ":"
  /// and Options::owner.
  std::string value;
  /// The moment the lock stops being safe to rely on: t0 + ttl - drift.
  std::chrono::steady_clock::time_point valid_until{};
  /// With Options::fencing: greater than every token handed out before for
  /// this resource while the masters' mutual exclusion held (docs/fencing.md);
  /// extend() and a continued continue_lock() keep it. 0 otherwise.
  std::uint64_t fencing_token = 0;
  /// continue_lock(): a majority renewed the existing value in a round that
  /// started before the previous valid_until, so the lock was held without a
  /// gap. Always true for lock() and extend().
  bool continued = true;
  /// The ttl it was taken or last extended with (Client::keep renews to it).
  std::chrono::milliseconds ttl{0};
  /// lock_permit: which of the semaphore's permits it holds, 0 <= permit <
  /// permits; -1 for a lock of the resource itself.
  int permit = -1;
  /// lock_shared / try_lock_shared: a shared hold, beside other shared
  /// holders and never beside an exclusive one.
  bool shared = false;
  /// lock_all: every resource it holds, in the order given (`resource` is
  /// the first). Empty for a lock of one resource.
  std::vector<std::string> resources{};

  /// Time left, rounded down; zero once expired.
  std::chrono::milliseconds validity() const;
  /// True while valid_until is in the future.
  bool valid() const;
};

}  // namespace redlock
