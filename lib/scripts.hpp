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
  int keys = 1;  // how many arguments are keys (KEYS[1..keys]); the rest are ARGV
  // The fencing scripts answer {result, counter}: the result as above and the
  // master's fencing counter, 0 when they refuse.
  bool with_counter = false;
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

// Fencing (Options::fencing). The counter key of a resource has no expiry;
// every script reads it as max(stored, the master's TIME in microseconds), so
// a master restarted without its data still answers above the tokens it gave
// while its clock is ahead of them. They refuse (an error reply, a failed
// vote) a counter that is not a number, before writing anything.

/// KEYS[1] key, KEYS[2] counter key, ARGV[1] value, ARGV[2] ttl in ms: the
/// acquire script that also answers the counter: {1, counter} when it set the
/// key or renewed our own value there (a waiter's gate), {-(the holder's
/// remaining ms + 1) or 0, 0} otherwise.
extern const Script acquire_fenced;

/// KEYS[1] key, KEYS[2] counter key, ARGV[1] value, ARGV[2] ttl in ms:
/// continue_lock that also answers the counter: {1, counter} renewed,
/// {2, counter} set, {0, 0} held by another value.
extern const Script continue_fenced;

/// KEYS[1] key, KEYS[2] counter key, ARGV[1] value, ARGV[2] token: where the
/// key holds our value, raises the counter to the token (never lowers it) and
/// returns 1; otherwise 0.
extern const Script fence;

/// Every script, in the order they are loaded on connect.
extern const std::array<const Script*, 8> all;

}  // namespace scripts
}  // namespace redlock
