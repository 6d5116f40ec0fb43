#pragma once

/// @file
/// Inspector: what the masters say about themselves and who holds a resource.

#include <redlock/error.hpp>
#include <redlock/export.hpp>
#include <redlock/options.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

struct uv_loop_s;
/// libuv's loop, as uv.h declares it: this header needs no uv.h.
typedef struct uv_loop_s uv_loop_t;  // NOLINT(modernize-use-using): matches uv.h

namespace redlock {

/// One resource's key on one master.
struct KeyReport {
  /// The value stored there; empty when the key is absent.
  std::string value;
  /// Its remaining time (PTTL); 0 when absent, -1 ms when it has no expiry.
  std::chrono::milliseconds ttl{0};
  /// The key exists on this master.
  bool present = false;
  /// The resource's fencing counter here: the last token this master took
  /// part in handing out (Options::fencing); 0 when it has none.
  std::uint64_t fencing_counter = 0;
  /// Clients queued here to be woken when it is released (lock() callers
  /// with a wait; the queue lives on one master, the resource's gate).
  std::size_t waiting = 0;
  /// Shared holders recorded here (Client::lock_shared), live or not yet
  /// cleared; 0 when none.
  std::size_t shared_holders = 0;
};

/// What one master said about itself, in one inspection.
struct MasterReport {
  /// Endpoint::to_string(): the URI without the password.
  std::string endpoint;
  /// Answered PING within the deadline.
  bool reachable = false;
  /// Why not: what the connection said (connection refused, a DNS, TLS or
  /// AUTH failure: as MasterError::cause), else no answer within the
  /// deadline or the connection lost, or the master's error reply (NOAUTH,
  /// LOADING...). Empty when reachable.
  std::string error;
  /// INFO's role ("master", "slave"); only a master votes.
  std::string role;
  /// INFO's uptime_in_seconds.
  std::chrono::seconds uptime{0};
  /// Options::restart_quarantine is set and the master has not been up that
  /// long (+1 s, as INFO counts whole seconds): it does not vote yet.
  bool quarantined = false;
  /// Quarantined: how much longer.
  std::chrono::milliseconds quarantine_left{0};
  /// INFO's maxmemory_policy; anything but noeviction can evict a lock.
  std::string maxmemory_policy;
  /// One PING on the established connection.
  std::chrono::microseconds round_trip{0};
  /// One per resource asked about, in the same order.
  std::vector<KeyReport> keys;
};

/// One resource across the masters.
struct ResourceReport {
  /// The resource as asked (without Options::key_prefix).
  std::string resource;
  /// The value found on the most masters; empty when no master has the key.
  std::string value;
  /// How many masters hold `value`.
  std::size_t holders = 0;
  /// holders >= N/2+1: a quorum holds it, so nobody else can take it now.
  bool quorum = false;
  /// The least time left on those masters (0 when none).
  std::chrono::milliseconds ttl{0};
  /// Options::owner of the Client that took `value`; empty when the value
  /// carries none (taken by another library or an older redlock).
  std::string owner;
  /// When `value` was taken, by its holder's clock; the epoch when unknown.
  /// extend() and renewals keep it: it is how long the lock has been held.
  std::chrono::system_clock::time_point since{};
  /// "exclusive" or "shared" (held by lock_shared callers: `value` is then
  /// the mark the key holds, and `owner` is empty) while any master holds
  /// the key, else empty.
  std::string mode;
  /// Shared holders: the most any master records (0 unless shared).
  std::size_t shared_holders = 0;
  /// The largest fencing counter among the masters: the token of the holder
  /// if it took the lock with Options::fencing (a later holder without
  /// fencing leaves it as it was); 0 when fencing was never used.
  std::uint64_t fencing_token = 0;
  /// Clients queued for it: the most any master reports.
  std::size_t waiting = 0;
};

/// What one inspect() found: every master, and every resource asked about.
struct Inspection {
  /// In the order of Options::masters.
  std::vector<MasterReport> masters;
  /// In the order asked.
  std::vector<ResourceReport> resources;
};

/// Reads, without changing anything, what each master says about itself and
/// about some resources' keys: for operators and the `redlock status`
/// command, not for deciding who holds a lock (only a lock call decides).
///
/// Threading and callbacks as Client: one loop thread; every callback exactly
/// once, on a later turn. It keeps its own connection to each master (opened
/// at construction, kept across calls). Each master gets connect_timeout +
/// command_timeout to answer one inspect(); one that does not is reported
/// unreachable, and the callback waits for no one longer than that.
class REDLOCK_API Inspector {
 public:
  /// Answers inspect(): an error (closed, invalid_argument), or the inspection.
  using Callback = std::function<void(std::error_code, Inspection)>;

  /// Throws std::invalid_argument when the options are invalid.
  Inspector(uv_loop_t* loop, Options options);
  ~Inspector();
  Inspector(const Inspector&) = delete;
  Inspector& operator=(const Inspector&) = delete;

  /// Asks every master about itself and about the keys of `resources`
  /// (Options::key_prefix + resource). Errors: errc::invalid_argument for an
  /// empty resource, errc::closed after close().
  void inspect(std::vector<std::string> resources, Callback cb);
  /// Answers inspections in flight with errc::closed, closes every
  /// connection, then calls `cb` (may be empty).
  void close(std::function<void()> cb);

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock
