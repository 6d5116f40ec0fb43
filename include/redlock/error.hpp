#pragma once

/// @file
/// The outcomes a call ends with (errc, a std::error_code enum) and MasterError.

#include <redlock/export.hpp>

#include <string>
#include <system_error>

namespace redlock {

/// Outcomes a caller can act on. Per-master causes (a timeout, an I/O error, an
/// error reply) stay inside the library: a round turns N votes into one of these.
enum class errc {
  /// held by another owner: no quorum after all retries
  not_acquired = 1,
  /// too few masters reachable to form a quorum
  unavailable,
  /// the caller's own wait deadline passed
  timeout,
  /// extend/unlock: no longer held on a quorum
  not_held,
  /// empty resource, ttl out of range, bad options
  invalid_argument,
  /// the client is closed
  closed,
  /// keep: the lock's validity ran out before a renewal succeeded
  expired,
  /// Client::cancel of a lock() still waiting
  canceled,
};

/// The category of every redlock::errc; its name() is "redlock".
REDLOCK_API const std::error_category& category() noexcept;

/// `e` as a std::error_code of category(); found by argument-dependent
/// lookup, so `std::error_code ec = errc::timeout;` works.
REDLOCK_API std::error_code make_error_code(errc e) noexcept;

/// A master that cannot vote now, and why: what Client::master_errors() and
/// Redlock::master_errors() return after an errc::unavailable.
struct MasterError {
  /// The master as a URI, without the password (Endpoint::to_string()).
  std::string endpoint;
  /// The last cause, in the words of its Options::diagnostics line: "cannot
  /// connect: connection refused", "AUTH refused, it does not vote: WRONGPASS
  /// ...", "stopped answering: ...", "not connected yet".
  std::string cause;
};

}  // namespace redlock

namespace std {
template <>
struct is_error_code_enum<redlock::errc> : true_type {};
}  // namespace std
