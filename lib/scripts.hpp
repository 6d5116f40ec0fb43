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

/// KEYS[1] key, KEYS[2] its listening marker (see mark_listening), ARGV[1]
/// value, ARGV[2] the release message if not the value (a failed attempt's
/// clean-up marks it, see Waiters::partial_release): deletes the key only if
/// it holds our value, and the marker with it. Only where the marker was
/// there it publishes the message on the key's release channel, and marks the
/// key again while its wait queue lasts. Returns 0 when it did not delete, 1
/// when it deleted and nobody was marked as listening, otherwise 2 + the
/// number of subscribers that heard it (ourselves included).
extern const Script unlock;

/// KEYS[1] key, KEYS[2] its listening marker, ARGV[1] value, ARGV[2] ms,
/// ARGV[3] the release message if not the value: unlock for the key's gate
/// master, where waiting Clients queue (and mark the key). Where the marker
/// was there, after the release message it also wakes the head of the queue:
/// it pops members (wake channels) until a PUBLISH of the key on one is heard,
/// and reserves the key for that one for ARGV[2] ms (see acquire_or_queue);
/// and it marks the key again for as long as the queue lasts. The queue and
/// the reservation are the key's helpers (keys.hpp), not passed: on the path
/// where nobody listens, every argument costs. Returns as unlock, the head it
/// woke counted among those told.
extern const Script unlock_and_wake;

/// KEYS[1] key, KEYS[2] its writer-waiting mark, ARGV[1] value, ARGV[2] ttl
/// in ms, ARGV[3] ms: SET NX PX, for waiters. Returns 1 when it set the key
/// (and then deletes the mark) or the key already held our value (its ttl
/// renewed: a waiter's gate master is asked again in the full round);
/// otherwise -(the holder's remaining ms + 1), or 0 when the key has no
/// expiry, so a waiter knows when to try again. Refused by shared holders,
/// it sets the mark for ARGV[3] ms: no new shared holder is let in meanwhile.
extern const Script acquire;

/// KEYS[1] key, KEYS[2] its wait queue, KEYS[3] its reservation, KEYS[4] its
/// writer-waiting mark, KEYS[5] its listening marker, ARGV[1] value, ARGV[2] ttl in ms, ARGV[3] a wake
/// channel or "", ARGV[4] ms: the acquire script, for the gate master of a
/// waiter (the mark as there, for ARGV[4] ms). While the key is reserved
/// for another wake channel (the queue's head just woken) it refuses as if
/// held, for what is left of the reservation. Where it refuses with a known
/// expiry it also queues the wake channel (ZADD NX, scored by the master's
/// clock in ms, so a waiter keeps its place), keeps the queue at least
/// ARGV[4] ms and marks the key as listened to while the queue lasts; where it sets the key it takes the
/// channel out of the queue and ends the reservation. Same answers as acquire.
extern const Script acquire_or_queue;

/// KEYS[1] a key's listening marker, ARGV[1] ms: someone hears the key's
/// releases here for ARGV[1] ms at least (a Client subscribed to them marks
/// each master it listens on, and again while it listens): unlock publishes
/// only where the marker is. Sets it for ARGV[1] ms where it has less than
/// half of that left (listeners renew it every third: every other renewal
/// writes); never shortens it. Returns 0.
extern const Script mark_listening;

/// KEYS[1] key, KEYS[2] its wait queue, KEYS[3] its reservation, ARGV[1] ms,
/// ARGV[2] our wake channel: passes a wake on. If the key is free and not
/// reserved for another channel, pops members until a PUBLISH of the key on one
/// is heard and reserves the key for it, as unlock does (1); otherwise, or if
/// the queue ran out, 0. For a Client woken for a key it no longer waits for.
extern const Script wake_next;

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

// Fencing (Options::fencing). Every script reads the counter key of a
// resource as max(stored, the master's TIME in microseconds), so a master
// whose counter expired, or that restarted without its data, still answers
// above the tokens written to it while its clock is ahead of them. The
// counter expires a while after the last fence round that reached it (see
// fence). They refuse (an error reply, a failed vote) a counter that is not a
// number, before writing anything.

/// KEYS[1] key, KEYS[2] counter key, KEYS[3] writer-waiting mark, ARGV[1]
/// value, ARGV[2] ttl in ms, ARGV[3] ms, 0 for a caller that does not wait:
/// the acquire script that also answers the counter: {1, counter} when it
/// set the key or renewed our own value there (a waiter's gate), {-(the
/// holder's remaining ms + 1) or 0, 0} otherwise; the mark as acquire's.
extern const Script acquire_fenced;

/// KEYS[1] key, KEYS[2] counter key, ARGV[1] value, ARGV[2] ttl in ms:
/// continue_lock that also answers the counter: {1, counter} renewed,
/// {2, counter} set, {0, 0} held by another value.
extern const Script continue_fenced;

/// KEYS[1] key, KEYS[2] counter key, ARGV[1] value, ARGV[2] token, ARGV[3]
/// ms: where the key holds our value, raises the counter to the token (never
/// lowers it), makes it expire no sooner than ARGV[3] ms from now, and
/// returns 1; otherwise 0.
extern const Script fence;

// Shared locks (Client::lock_shared). While shared holders hold a resource,
// its lock key holds shared_mark (never a lock value, which has its first
// ':' after 22 characters), expiring when the last of them does, so every exclusive script
// treats it as a lock held by someone else. The holders are a sorted set, a
// helper of the key: value -> the master time (ms) its hold ends. Each
// script drops the holders whose time passed and sets both keys' expiry to
// the last one's. The fencing counter is read and raised as above.

/// What the lock key holds while shared holders hold it.
inline constexpr std::string_view shared_mark = "redlock:shared";

/// KEYS[1] key, KEYS[2] its shared holders, KEYS[3] counter key, KEYS[4]
/// writer-waiting mark, KEYS[5] reservation; ARGV[1] value, ARGV[2] ttl in
/// ms, ARGV[3] "1" to read the counter, ARGV[4] "1" at the gate master,
/// ARGV[5] our wake channel: adds or renews our hold, unless an exclusive
/// holder holds the key ({-(its remaining ms + 1) or 0, 0}) or, for a new
/// hold, a writer waits (the mark) or, at the gate, the key is reserved for
/// another wake channel ({0, 0}). {1, counter} when it holds (counter 0
/// without ARGV[3]); a reservation for our channel ends then.
extern const Script acquire_shared;

/// KEYS[1] key, KEYS[2] queue, KEYS[3] reservation, KEYS[4] shared holders,
/// ARGV[1..5] as unlock_and_wake's, ARGV[6] "1" at the gate master: removes
/// our hold; when it was the last, deletes the key, publishes the release
/// and, at the gate, wakes the queue's head as unlock_and_wake does.
/// Returns 0 when we held nothing live here (a hold whose time ran out is
/// removed all the same), 1 while other shared holders remain, else 1 + the
/// Clients told.
extern const Script unlock_shared;

/// KEYS[1] key, KEYS[2] shared holders, ARGV[1] value, ARGV[2] ttl in ms:
/// extend for a shared hold (1 when our hold was live and is renewed, else 0).
extern const Script extend_shared;

/// KEYS[1] key, KEYS[2] shared holders, KEYS[3] counter key, KEYS[4]
/// writer-waiting mark, KEYS[5] reservation, ARGV[1] value, ARGV[2] ttl in
/// ms, ARGV[3] "1" to read the counter: continue_fenced for a shared hold:
/// {1, counter} renewed, {2, counter} added (no live hold of ours was there),
/// {0, 0} held exclusively by another, or not live and a writer waits or
/// the key is reserved for its queue's head (as acquire_shared refuses).
extern const Script continue_shared;

/// KEYS[1] key, KEYS[2] counter key, KEYS[3] shared holders, ARGV[1..3] as
/// fence's: fence where our shared hold is live.
extern const Script fence_shared;

/// KEYS[1..n] keys, KEYS[n+1..2n] their shared holders, ARGV[1..n] values,
/// ARGV[n+1..2n] ttls: renew for shared holds (n characters, as renew's).
extern const Script renew_shared;

// Several resources at once (Client::lock_all). Their `keys` is 0: the key
// count varies (Command::script_over). KEYS[1..n] are the resources' lock
// keys, then helpers in blocks of n; each script acts on all of the lock keys
// or on none.

/// KEYS: n lock keys, their reservations, writer-waiting marks, counters;
/// ARGV[1] value, ARGV[2] ttl in ms, ARGV[3] mark ms or "0" (a caller that
/// does not wait), ARGV[4] "1" to read the counters: sets every key to our
/// value if each is free (or ours) and not reserved for the head of its
/// queue: {1, counter}; else {-(the longest remaining ms among the held and
/// reserved keys + 1), 0}, or {0, 0} for a key with no expiry. Where shared
/// holders hold a key, it marks a writer waiting there.
extern const Script acquire_all;

/// KEYS: n lock keys; ARGV[1] value, ARGV[2] message, ARGV[3] reservation
/// ms: deletes each key that holds our value, and where its listening
/// marker was, publishes its release and wakes the head of its queue (as
/// unlock_and_wake). 1 + the listeners told when all n were ours, else 0.
extern const Script unlock_all;

/// KEYS: n lock keys; ARGV[1] value, ARGV[2] ttl: renews all if all are ours (1), else 0.
extern const Script extend_all;

/// KEYS: n lock keys, their counters; ARGV[1] value, ARGV[2] ttl, ARGV[3]
/// unused, ARGV[4] "1" to read the counters: continue_lock over all: {0, 0}
/// if another holds any; else renews ours and sets the absent: {1 (all were
/// ours) or 2, counter}.
extern const Script continue_all;

/// KEYS: n lock keys, their counters; ARGV as fence's: raises every counter
/// to the token where all n keys hold our value (1), else 0.
extern const Script fence_all;

/// KEYS: n lock keys; ARGV[1] value, ARGV[2] ttl: extend_all answering
/// '1' or '0' (a renewal batch of one lock).
extern const Script renew_all;

/// KEYS[1] key, KEYS[2] counter key, KEYS[3] queue, KEYS[4] shared holders:
/// reads what Client::holder reports, changing nothing: {the value or "",
/// its PTTL, the counter or "0", the queue's size, the live shared holders}.
extern const Script read_holder;

/// KEYS[1] writer-waiting mark, ARGV[1] release channel, ARGV[2] the
/// writer's value: a writer stopped waiting (canceled, timed out, its
/// Client closed): deletes the mark if it is this writer's and then
/// publishes the value, so the shared waiters it kept out try again now.
/// 1 when it deleted, else 0.
extern const Script unmark_writer;

// Election: beside the election's lock key, its "leader" helper says who
// leads: "<lock value>\n<term>\n<id>\n<value>", written only where the lock
// key holds the leader's value.

/// KEYS[1] key, KEYS[2] its leader helper; ARGV[1] our lock value, ARGV[2]
/// the record, ARGV[3] its ttl in ms, ARGV[4] a channel, ARGV[5] "1" to
/// publish there: writes the record where the key holds our value (1), else 0.
extern const Script proclaim;

/// KEYS[1] key, KEYS[2] its leader helper: {the key's value or "", its
/// PTTL, the record or ""}, changing nothing.
extern const Script read_leader;

/// Every script, in the order they are loaded on connect.
extern const std::array<const Script*, 28> all;

}  // namespace scripts
}  // namespace redlock
