#include "scripts.hpp"

#include <limits>

namespace redlock::scripts {

// A PUBLISH that fails (an ACL user without the channel, see docs/errors.md) must not
// fail the script after it deleted: pcall, and a refused one counts as heard
// by nobody.
#define REDLOCK_PUBLISH(var, channel, message)                   \
  "local " var " = redis.pcall('publish', " channel ", " message \
  ")\n"                                                          \
  "if type(" var ") ~= 'number' then " var " = -1 end\n"

// The queue scripts' loop: pops the queue's head until a PUBLISH of the key
// on its wake channel is heard, and reserves the key for that one for
// ARGV[ms_arg] ms; sets `woken` (a local declared before it) to 1 if it woke
// one. Where the master refuses the PUBLISH, nothing is popped.
#define REDLOCK_WAKE_HEAD(ms_arg) \
  "while true do\n"                                                       \
  "  local head = redis.call('zrange', KEYS[2], 0, 0)[1]\n"               \
  "  if not head then break end\n" REDLOCK_PUBLISH("heard", "head", "KEYS[1]") \
  "  if heard < 0 then break end\n"                                       \
  "  redis.call('zrem', KEYS[2], head)\n"                                 \
  "  if heard > 0 then\n"                                                 \
  "    redis.call('set', KEYS[3], head, 'PX', ARGV[" ms_arg "])\n"       \
  "    woken = 1\n"                                                       \
  "    break\n"                                                           \
  "  end\n"                                                               \
  "end\n"

// The unlock scripts' release message: `others` is how many other Clients
// heard it (ARGV[4] is 1 when our own subscriber is among them).
#define REDLOCK_PUBLISH_RELEASE                   \
  REDLOCK_PUBLISH("others", "ARGV[2]", "ARGV[3]") \
  "others = others - tonumber(ARGV[4])\n"         \
  "if others < 0 then others = 0 end\n"

const Script unlock{
    "unlock",
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "redis.call('del', KEYS[1])\n" REDLOCK_PUBLISH_RELEASE "return 1 + others\n",
    "58b5d241a507a6f965a902c9df9818187b012623",
    0,
    std::numeric_limits<int>::max(),
};

// Where our value is not at the gate (the gate was down when the lock was
// taken, or restarted empty) but the key is free there, the queue still hears
// of the release. A reservation is never written over: the one it names was
// woken and has not claimed yet.
const Script unlock_and_wake{
    "unlock_and_wake",
    "local woken = 0\n"
    "local current = redis.call('get', KEYS[1])\n"
    "if current ~= ARGV[1] then\n"
    "  if current == false and redis.call('exists', KEYS[3]) == 0 then\n" REDLOCK_WAKE_HEAD("5") "  end\n"
    "  return 0\n"
    "end\n"
    "redis.call('del', KEYS[1])\n" REDLOCK_PUBLISH_RELEASE
    "if redis.call('exists', KEYS[3]) == 0 then\n" REDLOCK_WAKE_HEAD("5") "end\n"
    "return 1 + others + woken\n",
    "b93e732b6efda057eb5a16b976dedd956648dcfd",
    0,
    std::numeric_limits<int>::max(),
    3,
};

const Script acquire{
    "acquire",
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end\n"
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    "local left = redis.call('pttl', KEYS[1])\n"
    "if left < 0 then return 0 end\n"
    "return -left - 1\n",
    "9f95a6e45bc781cc09ba335019170d8cc4c8d942",
    -std::numeric_limits<int>::max(),
    1,
};

const Script acquire_or_queue{
    "acquire_or_queue",
    "local reserved = redis.call('get', KEYS[3])\n"
    "local left\n"
    "if reserved and reserved ~= ARGV[3] then\n"
    "  left = redis.call('pttl', KEYS[3])\n"
    "else\n"
    "  if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "    if reserved then redis.call('del', KEYS[3]) end\n"
    "    if ARGV[3] ~= '' then redis.call('zrem', KEYS[2], ARGV[3]) end\n"
    "    return 1\n"
    "  end\n"
    "  if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    "  left = redis.call('pttl', KEYS[1])\n"
    "end\n"
    "if left < 0 then return 0 end\n"
    "if ARGV[3] ~= '' then\n"
    "  local now = redis.call('time')\n"
    "  redis.call('zadd', KEYS[2], 'NX', now[1] * 1000 + math.floor(now[2] / 1000), ARGV[3])\n"
    "  if redis.call('pttl', KEYS[2]) < tonumber(ARGV[4]) then redis.call('pexpire', KEYS[2], ARGV[4]) end\n"
    "end\n"
    "return -left - 1\n",
    "56c04da598c216a96f1b737cc0997e132d677e3f",
    -std::numeric_limits<int>::max(),
    1,
    3,
};

const Script wake_next{
    "wake_next",
    "if redis.call('exists', KEYS[1]) == 1 then return 0 end\n"
    "local reserved = redis.call('get', KEYS[3])\n"
    "if reserved and reserved ~= ARGV[2] then return 0 end\n"
    "redis.call('del', KEYS[3])\n"
    "local woken = 0\n" REDLOCK_WAKE_HEAD("1") "return woken\n",
    "4f52582c6275678d27a1e0b47e5eae4f55513cab",
    0,
    1,
    3,
};

#undef REDLOCK_WAKE_HEAD
#undef REDLOCK_PUBLISH_RELEASE
#undef REDLOCK_PUBLISH

const Script extend{
    "extend",
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    "return 0\n",
    "e28affa6795dca0bd106a8a2442e4900bc5cf704",
    0,
    1,
};

const Script continue_lock{
    "continue_lock",
    "local current = redis.call('get', KEYS[1])\n"
    "if current == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    "if current == false then\n"
    "  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  return 2\n"
    "end\n"
    "return 0\n",
    "68f21fb17f65069c6b2a0d8558b0e59fad36040b",
    0,
    2,
};

const Script renew{
    "renew",
    "local n = #KEYS\n"
    "local answers = {}\n"
    "for i = 1, n do\n"
    "  if redis.call('get', KEYS[i]) == ARGV[i] and redis.call('pexpire', KEYS[i], ARGV[n + i]) == 1 then\n"
    "    answers[i] = '1'\n"
    "  else\n"
    "    answers[i] = '0'\n"
    "  end\n"
    "end\n"
    "return table.concat(answers)\n",
    "23f0139646768ccc4af0dba78d318b27f8dbeceb",
    0,
    0,
};

// The fencing scripts' first lines: `counter` = max(the stored counter, the
// master's clock in microseconds). Lua numbers are doubles, exact below 2^53
// (microseconds until the year 2255); a counter is only ever written from
// the client's decimal string, never formatted by Lua.
#define REDLOCK_READ_COUNTER                                                                  \
  "local counter = tonumber(redis.call('get', KEYS[2]) or '0')\n"                             \
  "if not counter then return redis.error_reply('ERR fencing counter is not a number') end\n" \
  "local now = redis.call('time')\n"                                                          \
  "now = now[1] * 1000000 + now[2]\n"                                                         \
  "if now > counter then counter = now end\n"

const Script acquire_fenced{
    "acquire_fenced",
    REDLOCK_READ_COUNTER
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, counter} end\n"
    "if redis.call('get', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return {1, counter}\n"
    "end\n"
    "local left = redis.call('pttl', KEYS[1])\n"
    "if left < 0 then return {0, 0} end\n"
    "return {-left - 1, 0}\n",
    "0e0bf0dfe099d6f4e81efaa6569aa70d240a4cb2",
    -std::numeric_limits<int>::max(),
    1,
    2,
    true,
};

const Script continue_fenced{
    "continue_fenced",
    REDLOCK_READ_COUNTER
    "local current = redis.call('get', KEYS[1])\n"
    "if current == ARGV[1] then\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return {1, counter}\n"
    "end\n"
    "if current == false then\n"
    "  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  return {2, counter}\n"
    "end\n"
    "return {0, 0}\n",
    "08f023265d0ec66170a17cb97d003f529951eaa0",
    0,
    2,
    2,
    true,
};

#undef REDLOCK_READ_COUNTER

const Script fence{
    "fence",
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "local counter = tonumber(redis.call('get', KEYS[2]) or '0')\n"
    "if not counter then return redis.error_reply('ERR fencing counter is not a number') end\n"
    "if counter < tonumber(ARGV[2]) then\n"
    "  redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"
    "elseif redis.call('pttl', KEYS[2]) < tonumber(ARGV[3]) then\n"
    "  redis.call('pexpire', KEYS[2], ARGV[3])\n"
    "end\n"
    "return 1\n",
    "a216720e2bf5d1d209848b91e506d4fd1aba3108",
    0,
    1,
    2,
};

const std::array<const Script*, 11> all{&unlock,         &unlock_and_wake, &acquire,       &acquire_or_queue,
                                        &wake_next,      &extend,          &continue_lock, &renew,
                                        &acquire_fenced, &continue_fenced, &fence};

}  // namespace redlock::scripts
