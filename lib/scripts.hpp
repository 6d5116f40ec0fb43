#pragma once

#include <array>
#include <string_view>

namespace redlock {

/// A Lua script run with EVALSHA; `sha1` is the SHA-1 of `body` as Redis
/// reports it from SCRIPT LOAD (test_master checks that they agree).
struct Script {
  std::string_view name;
  std::string_view body;
  std::string_view sha1;
  long long min_result;  // it answers an integer from min_result to max_result
  long long max_result;
};

namespace scripts {

/// KEYS[1] key, ARGV[1] value, ARGV[2] release channel, ARGV[3] message:
/// deletes the key only if it holds our value, and then publishes the
/// message on the channel (the value; a failed attempt's clean-up marks it,
/// see Waiters::partial_release). Returns 1 + the number of subscribers that
/// heard it when it deleted, 0 otherwise.
extern const Script unlock;

/// KEYS[1] key, ARGV[1] value, ARGV[2] ttl in ms: SET NX PX, for waiters.
/// Returns 1 when it set the key or the key already held our value (its ttl
/// renewed: a waiter's gate master is asked again in the full round);
/// otherwise -(the holder's remaining ms + 1), or 0 when the key has no
/// expiry, so a waiter knows when to try again.
extern const Script acquire;

/// KEYS[1] key, ARGV[1] value, ARGV[2] ttl in ms: sets the ttl only if the key
/// holds our value. Returns 1 when it did, 0 otherwise; never creates the key.
extern const Script extend;

/// KEYS[1] key, ARGV[1] value, ARGV[2] ttl in ms: renews the ttl where the key
/// holds our value (1), sets it where the key is absent (2), else 0.
extern const Script continue_lock;

/// KEYS[1..n] keys, ARGV[1..n] values, ARGV[n+1..2n] ttls in ms: extend for
/// n locks in one call (Client::keep's batched renewals). Answers a string of
/// n characters, '1' where the key held our value and its ttl was set, '0'
/// elsewhere; never creates a key. (min_result and max_result do not apply.)
extern const Script renew;

/// Every script, in the order they are loaded on connect.
extern const std::array<const Script*, 5> all;

}  // namespace scripts
}  // namespace redlock
