#include "scripts.hpp"

#include <limits>

namespace redlock::scripts {

// What the lock key holds while shared holders hold it (see acquire_shared).
#define REDLOCK_SHARED_MARK "redlock:shared"
static_assert(shared_mark == REDLOCK_SHARED_MARK);

// An exclusive waiter refused (`current`: the lock key's value) because
// shared holders hold the key marks that a writer waits, for `ms` ms: new
// shared holders are refused while a mark lasts (writer preference). The
// marks are a sorted set of the writers' values (ARGV[1]), each scored by
// the master time its mark runs out: each writer takes away only its own
// (a writer that gives up, or, where it took the lock on the other masters,
// its unlock: REDLOCK_UNMARK_OURS).
#define REDLOCK_MARK_WRITER_WAITING(marker, ms)                                      \
  "if current == '" REDLOCK_SHARED_MARK                                              \
  "' then\n"                                                                         \
  "  local mark_ms = tonumber(" ms                                                   \
  ")\n"                                                                              \
  "  local clock = redis.call('time')\n"                                             \
  "  redis.call('zadd', " marker                                                     \
  ", clock[1] * 1000 + math.floor(clock[2] / 1000) + mark_ms, ARGV[1])\n"            \
  "  if redis.call('pttl', " marker ") < mark_ms then redis.call('pexpire', " marker \
  ", mark_ms) end\n"                                                                 \
  "end\n"

// An unlock where the key does not hold our value: a writer-waiting mark of
// ours there (we were refused by shared holders on this master and took the
// lock on the others) goes, and the readers it kept out hear it, as they
// would the writer giving up (unmark_writer). Not for a failed attempt's
// clean-up, whose writer still waits: its message starts '~' (partial) or
// '+' (Waiters::waiting_release).
#define REDLOCK_UNMARK_OURS(key, message)                     \
  "if string.find('~+', string.sub(" message                  \
  ", 1, 1), 1, true) == nil then\n"                           \
  "  local writer_mark = " key                                \
  " .. ':writer-waiting'\n"                                   \
  "  if redis.call('zrem', writer_mark, ARGV[1]) == 1 then\n" \
  "    redis.pcall('publish', " key                           \
  " .. ':released', ARGV[1])\n"                               \
  "  end\n"                                                   \
  "end\n"

// A PUBLISH that fails (an ACL user without the channel, see docs/errors.md) must not
// fail the script after it deleted: pcall, and a refused one counts as heard
// by nobody.
#define REDLOCK_PUBLISH(var, channel, message)                   \
  "local " var " = redis.pcall('publish', " channel ", " message \
  ")\n"                                                          \
  "if type(" var ") ~= 'number' then " var " = -1 end\n"

// Someone listens for the key's releases, or is queued for it, for `ms` ms
// at least: the marker unlock looks for (never shortened).
#define REDLOCK_MARK_LISTENING(marker, ms)                                       \
  "local listening = " ms                                                        \
  "\n"                                                                           \
  "if redis.call('pttl', " marker ") < listening then redis.call('set', " marker \
  ", '1', 'PX', listening) end\n"

// The queue scripts' loop: pops the head of `queue` until a PUBLISH of the
// key on its wake channel is heard, and reserves the key for that one (the
// `reservation` key) for `ms` ms; sets `woken` (a local declared before it)
// to 1 if it woke one. Where the master refuses the PUBLISH, nothing is popped.
#define REDLOCK_WAKE_HEAD(queue, reservation, ms) \
  "while true do\n"                                                       \
  "  local head = redis.call('zrange', " queue ", 0, 0)[1]\n"             \
  "  if not head then break end\n" REDLOCK_PUBLISH("heard", "head", "KEYS[1]") \
  "  if heard < 0 then break end\n"                                       \
  "  redis.call('zrem', " queue ", head)\n"                               \
  "  if heard > 0 then\n"                                                 \
  "    redis.call('set', " reservation ", head, 'PX', " ms ")\n"         \
  "    woken = 1\n"                                                       \
  "    break\n"                                                           \
  "  end\n"                                                               \
  "end\n"

// A reservation found beside our own value was made while the key was free,
// before our SET (which did not look at it). The Client it names was woken
// and has either met our key and queued again, or not claimed yet: either
// way the turn stays its own. It is taken out of the queue, woken again and
// its reservation renewed; only where nobody hears that (its subscriber is
// gone) does the turn go to the head of the queue. Sets `woken` as
// REDLOCK_WAKE_HEAD does.
#define REDLOCK_WAKE_RESERVED_OR_HEAD(queue, reservation, ms)   \
  "local reserved = redis.call('get', " reservation             \
  ")\n"                                                         \
  "if reserved then\n"                                          \
  "  redis.call('zrem', " queue                                 \
  ", reserved)\n"                                               \
  "  local again = redis.pcall('publish', reserved, KEYS[1])\n" \
  "  if type(again) == 'number' and again > 0 then\n"           \
  "    redis.call('set', " reservation ", reserved, 'PX', " ms  \
  ")\n"                                                         \
  "    woken = 1\n"                                             \
  "  else\n"                                                    \
  "    redis.call('del', " reservation                          \
  ")\n"                                                         \
  "  end\n"                                                     \
  "end\n"                                                       \
  "if woken == 0 then\n" REDLOCK_WAKE_HEAD(queue, reservation, ms) "end\n"

// The unlock scripts' release message: `others` is how many other Clients
// heard it (ARGV[4] is 1 when our own subscriber is among them).
#define REDLOCK_PUBLISH_RELEASE                   \
  REDLOCK_PUBLISH("others", "ARGV[2]", "ARGV[3]") \
  "others = others - tonumber(ARGV[4])\n"         \
  "if others < 0 then others = 0 end\n"

// The lock key's helpers that unlock and unlock_and_wake name only on their
// slow path, where someone listens (keys.hpp's layout; the same hash slot as
// the key). Passing them would cost every unlock: a master spends about as
// much on a script's arguments as on its commands.
#define REDLOCK_QUEUE "KEYS[1] .. ':queue'"
#define REDLOCK_RESERVATION "KEYS[1] .. ':reserved'"
#define REDLOCK_RELEASE_CHANNEL "KEYS[1] .. ':released'"

// Someone listens: publishes the message (ARGV[msg], else the value) into
// `heard` (a refused PUBLISH counts as nobody).
#define REDLOCK_TELL_LISTENERS(msg)                                             \
  "local heard = redis.pcall('publish', " REDLOCK_RELEASE_CHANNEL ", ARGV[" msg \
  "] or ARGV[1])\n"                                                             \
  "if type(heard) ~= 'number' then heard = 0 end\n"
// The DEL took the marker: while a queue waits here, the key is marked again.
#define REDLOCK_MARK_QUEUE_AGAIN                     \
  "local queued = redis.call('pttl', " REDLOCK_QUEUE \
  ")\n"                                              \
  "if queued > 0 then redis.call('set', KEYS[2], '1', 'PX', queued) end\n"

// Where nobody listens (no marker beside the key), an unlock is the plain
// compare-and-delete: the marker goes in the same DEL, and only where it was
// there is the release published. Listeners mark again as they hear it; a
// queue there (this master was the gate to another Client) keeps its marker.
const Script unlock{
    "unlock",
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then\n" REDLOCK_UNMARK_OURS("KEYS[1]", "(ARGV[2] or ARGV[1])")
    "  return 0\n"
    "end\n"
    "if redis.call('del', KEYS[1], KEYS[2]) == 1 then return 1 end\n" REDLOCK_TELL_LISTENERS("2")
        REDLOCK_MARK_QUEUE_AGAIN "return 2 + heard\n",
    "b643e16bf7d50aa09772ec537b32d80c818327e8",
    0,
    std::numeric_limits<int>::max(),
    2,
};

// Where our value is not at the gate (the gate was down when the lock was
// taken, or restarted empty) but the key is free there, the queue still hears
// of the release. A reservation is not written over there: the one it names
// was woken and has not claimed yet. One found beside our own value keeps
// its turn (REDLOCK_WAKE_RESERVED_OR_HEAD).
const Script unlock_and_wake{
    "unlock_and_wake",
    "local woken = 0\n"
    "local current = redis.call('get', KEYS[1])\n"
    "if current ~= ARGV[1] then\n"
    "  if current == false and redis.call('exists', " REDLOCK_RESERVATION ") == 0 then\n" REDLOCK_WAKE_HEAD(
        REDLOCK_QUEUE, REDLOCK_RESERVATION, "ARGV[2]") "  end\n" REDLOCK_UNMARK_OURS("KEYS[1]", "(ARGV[3] or ARGV[1])")
    "  return 0\n"
    "end\n"
    "if redis.call('del', KEYS[1], KEYS[2]) == 1 then return 1 end\n" REDLOCK_TELL_LISTENERS("3")
    REDLOCK_WAKE_RESERVED_OR_HEAD(REDLOCK_QUEUE, REDLOCK_RESERVATION, "ARGV[2]")
        REDLOCK_MARK_QUEUE_AGAIN "return 2 + heard + woken\n",
    "5ab3033eaa04920bfe7aa9e31900b81dc9313706",
    0,
    std::numeric_limits<int>::max(),
    2,
};

#undef REDLOCK_MARK_QUEUE_AGAIN
#undef REDLOCK_TELL_LISTENERS
#undef REDLOCK_RELEASE_CHANNEL
#undef REDLOCK_RESERVATION
#undef REDLOCK_QUEUE

const Script acquire{
    "acquire",
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  redis.call('zrem', KEYS[2], ARGV[1])\n"
    "  return 1\n"
    "end\n"
    "local current = redis.call('get', KEYS[1])\n"
    "if current == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    REDLOCK_MARK_WRITER_WAITING("KEYS[2]", "ARGV[3]")
    "local left = redis.call('pttl', KEYS[1])\n"
    "if left < 0 then return 0 end\n"
    "return -left - 1\n",
    "092ce7207d61387c9b60c25f586989ea5311667b",
    -std::numeric_limits<int>::max(),
    1,
    2,
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
    "    redis.call('zrem', KEYS[4], ARGV[1])\n"
    "    return 1\n"
    "  end\n"
    "  local current = redis.call('get', KEYS[1])\n"
    "  if current == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    "  " REDLOCK_MARK_WRITER_WAITING("KEYS[4]", "ARGV[4]")
    "  left = redis.call('pttl', KEYS[1])\n"
    "end\n"
    "if left < 0 then return 0 end\n"
    "if ARGV[3] ~= '' then\n"
    "  local now = redis.call('time')\n"
    "  redis.call('zadd', KEYS[2], 'NX', now[1] * 1000 + math.floor(now[2] / 1000), ARGV[3])\n"
    "  if redis.call('pttl', KEYS[2]) < tonumber(ARGV[4]) then redis.call('pexpire', KEYS[2], ARGV[4]) end\n"
    "  " REDLOCK_MARK_LISTENING("KEYS[5]", "redis.call('pttl', KEYS[2])")
    "end\n"
    "return -left - 1\n",
    "df3fe11cfbf7b80f3c18188d2f2a3a28cabc4b3b",
    -std::numeric_limits<int>::max(),
    1,
    5,
};

const Script mark_listening{
    "mark_listening",
    "local listening = tonumber(ARGV[1])\n"
    "if redis.call('pttl', KEYS[1]) < listening / 2 then redis.call('set', KEYS[1], '1', 'PX', listening) "
    "end\n"
    "return 0\n",
    "deae277ce0fa28f3f6012924ba1fd8c54894c469",
    0,
    0,
};

const Script wake_next{
    "wake_next",
    "if redis.call('exists', KEYS[1]) == 1 then return 0 end\n"
    "local reserved = redis.call('get', KEYS[3])\n"
    "if reserved and reserved ~= ARGV[2] then return 0 end\n"
    "redis.call('del', KEYS[3])\n"
    "local woken = 0\n" REDLOCK_WAKE_HEAD("KEYS[2]", "KEYS[3]", "ARGV[1]") "return woken\n",
    "4f52582c6275678d27a1e0b47e5eae4f55513cab",
    0,
    1,
    3,
};

// The shared scripts' master clock in ms, `now`, and `settle(key, holders)`:
// drops the shared holders whose time ran out (their score, a master time in
// ms, is in the past) and makes the lock key hold the mark, and both keys
// expire, when the last of the others does. With no holder left it deletes
// both and answers false.
#define REDLOCK_SHARED_PRELUDE                                           \
  "local clock = redis.call('time')\n"                                   \
  "local now = clock[1] * 1000 + math.floor(clock[2] / 1000)\n"          \
  "local function settle(key, holders)\n"                                \
  "  redis.call('zremrangebyscore', holders, '-inf', '(' .. now)\n"      \
  "  local last = redis.call('zrange', holders, -1, -1, 'withscores')\n" \
  "  if not last[1] then\n"                                              \
  "    redis.call('del', key, holders)\n"                                \
  "    return false\n"                                                   \
  "  end\n"                                                              \
  "  local left = tonumber(last[2]) - now\n"                             \
  "  if left < 1 then left = 1 end\n"                                    \
  "  redis.call('set', key, '" REDLOCK_SHARED_MARK                       \
  "', 'PX', left)\n"                                                     \
  "  redis.call('pexpire', holders, left)\n"                             \
  "  return true\n"                                                      \
  "end\n"                                                                \
  "local function live(holders, value)\n"                                \
  "  local until_ms = redis.call('zscore', holders, value)\n"            \
  "  return until_ms ~= false and tonumber(until_ms) >= now\n"           \
  "end\n"

// The first shared holder (the key was free) is the last one too: the key
// and its holders expire with its ttl, without settle's reads.
const Script acquire_shared{
    "acquire_shared",
    REDLOCK_SHARED_PRELUDE
    "local counter = 0\n"
    "if ARGV[3] == '1' then\n"
    "  counter = tonumber(redis.call('get', KEYS[3]) or '0')\n"
    "  if not counter then return redis.error_reply('ERR fencing counter is not a number') end\n"
    "  local clock_us = clock[1] * 1000000 + clock[2]\n"
    "  if clock_us > counter then counter = clock_us end\n"
    "end\n"
    "local current = redis.call('get', KEYS[1])\n"
    "if current and current ~= '" REDLOCK_SHARED_MARK
    "' then\n"
    "  local left = redis.call('pttl', KEYS[1])\n"
    "  if left < 0 then return {0, 0} end\n"
    "  return {-left - 1, 0}\n"
    "end\n"
    "local reserved = ARGV[4] == '1' and redis.call('get', KEYS[5])\n"
    "if not (current and live(KEYS[2], ARGV[1])) then\n"
    "  if redis.call('zcount', KEYS[4], now, '+inf') > 0 then return {0, 0} end\n"
    "  if reserved and reserved ~= ARGV[5] then return {0, 0} end\n"
    "end\n"
    "if current then\n"
    "  redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])\n"
    "  settle(KEYS[1], KEYS[2])\n"
    "else\n"
    "  redis.call('del', KEYS[2])\n"
    "  redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])\n"
    "  redis.call('set', KEYS[1], '" REDLOCK_SHARED_MARK
    "', 'PX', ARGV[2])\n"
    "  redis.call('pexpire', KEYS[2], ARGV[2])\n"
    "end\n"
    "if reserved and reserved == ARGV[5] then redis.call('del', KEYS[5]) end\n"
    "return {1, counter}\n",
    "a191ae0df25a87f709ab9fa9dcca8ab72b711791",
    -std::numeric_limits<int>::max(),
    1,
    5,
    true,
};

const Script unlock_shared{
    "unlock_shared",
    REDLOCK_SHARED_PRELUDE
    "local woken = 0\n"
    "local current = redis.call('get', KEYS[1])\n"
    "local held = current == '" REDLOCK_SHARED_MARK "' and live(KEYS[4], ARGV[1])\n"
    "if current ~= '" REDLOCK_SHARED_MARK "' or redis.call('zrem', KEYS[4], ARGV[1]) == 0 then\n"
    "  if ARGV[6] == '1' and current == false and redis.call('exists', KEYS[3]) == 0 then\n"
    REDLOCK_WAKE_HEAD("KEYS[2]", "KEYS[3]", "ARGV[5]") "  end\n"
    "  return 0\n"
    "end\n"
    "if settle(KEYS[1], KEYS[4]) then\n"
    "  if held then return 1 end\n"
    "  return 0\n"
    "end\n" REDLOCK_PUBLISH_RELEASE
    "if ARGV[6] == '1' then\n" REDLOCK_WAKE_RESERVED_OR_HEAD("KEYS[2]", "KEYS[3]", "ARGV[5]") "end\n"
    "if not held then return 0 end\n"
    "return 1 + others + woken\n",
    "16cd9d143d0fb0ca69c32ff5fb6426b45080a41f",
    0,
    std::numeric_limits<int>::max(),
    4,
};

#undef REDLOCK_WAKE_RESERVED_OR_HEAD
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
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"
    "  if ARGV[3] ~= '0' then redis.call('zrem', KEYS[3], ARGV[1]) end\n"
    "  return {1, counter}\n"
    "end\n"
    "local current = redis.call('get', KEYS[1])\n"
    "if current == ARGV[1] then\n"
    "  redis.call('pexpire', KEYS[1], ARGV[2])\n"
    "  return {1, counter}\n"
    "end\n"
    "if ARGV[3] ~= '0' then\n" REDLOCK_MARK_WRITER_WAITING("KEYS[3]", "ARGV[3]") "end\n"
    "local left = redis.call('pttl', KEYS[1])\n"
    "if left < 0 then return {0, 0} end\n"
    "return {-left - 1, 0}\n",
    "97fec35625bf68a14bde24b4c3c5c95c7e96bdef",
    -std::numeric_limits<int>::max(),
    1,
    3,
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

// fence's raise of the counter KEYS[2] to ARGV[2], expiring no sooner than
// ARGV[3] ms from now.
#define REDLOCK_RAISE_COUNTER                                                                 \
  "local counter = tonumber(redis.call('get', KEYS[2]) or '0')\n"                             \
  "if not counter then return redis.error_reply('ERR fencing counter is not a number') end\n" \
  "if counter < tonumber(ARGV[2]) then\n"                                                     \
  "  redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"                                    \
  "elseif redis.call('pttl', KEYS[2]) < tonumber(ARGV[3]) then\n"                             \
  "  redis.call('pexpire', KEYS[2], ARGV[3])\n"                                               \
  "end\n"

const Script fence{
    "fence",
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\n" REDLOCK_RAISE_COUNTER "return 1\n",
    "a216720e2bf5d1d209848b91e506d4fd1aba3108",
    0,
    1,
    2,
};

const Script extend_shared{
    "extend_shared",
    REDLOCK_SHARED_PRELUDE "if redis.call('get', KEYS[1]) ~= '" REDLOCK_SHARED_MARK
                           "' or not live(KEYS[2], ARGV[1]) then return 0 end\n"
                           "redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])\n"
                           "settle(KEYS[1], KEYS[2])\n"
                           "return 1\n",
    "76195caf0e0cc84239cd7f865170d9571953b7d9",
    0,
    1,
    2,
};

const Script continue_shared{
    "continue_shared",
    REDLOCK_SHARED_PRELUDE
    "local counter = 0\n"
    "if ARGV[3] == '1' then\n"
    "  counter = tonumber(redis.call('get', KEYS[3]) or '0')\n"
    "  if not counter then return redis.error_reply('ERR fencing counter is not a number') end\n"
    "  local clock_us = clock[1] * 1000000 + clock[2]\n"
    "  if clock_us > counter then counter = clock_us end\n"
    "end\n"
    "local current = redis.call('get', KEYS[1])\n"
    "if current and current ~= '" REDLOCK_SHARED_MARK
    "' then return {0, 0} end\n"
    "local result = 2\n"
    "if current and live(KEYS[2], ARGV[1]) then result = 1 end\n"
    "if result == 2 and (redis.call('zcount', KEYS[4], now, '+inf') > 0 or redis.call('exists', KEYS[5]) == "
    "1) then\n"
    "  return {0, 0}\n"
    "end\n"
    "if not current then redis.call('del', KEYS[2]) end\n"
    "redis.call('zadd', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])\n"
    "settle(KEYS[1], KEYS[2])\n"
    "return {result, counter}\n",
    "8cc7d5e7023c8b11d21862291b5cdae138a923a2",
    0,
    2,
    5,
    true,
};

const Script fence_shared{
    "fence_shared",
    REDLOCK_SHARED_PRELUDE "if redis.call('get', KEYS[1]) ~= '" REDLOCK_SHARED_MARK
                           "' or not live(KEYS[3], ARGV[1]) then return 0 end\n" REDLOCK_RAISE_COUNTER
                           "return 1\n",
    "3202c3cf8e3a954d4f9540363afc5e4e48cd92ec",
    0,
    1,
    3,
};

const Script renew_shared{
    "renew_shared",
    REDLOCK_SHARED_PRELUDE
    "local n = #KEYS / 2\n"
    "local answers = {}\n"
    "for i = 1, n do\n"
    "  answers[i] = '0'\n"
    "  if redis.call('get', KEYS[i]) == '" REDLOCK_SHARED_MARK
    "' and live(KEYS[n + i], ARGV[i]) then\n"
    "    redis.call('zadd', KEYS[n + i], now + tonumber(ARGV[n + i]), ARGV[i])\n"
    "    settle(KEYS[i], KEYS[n + i])\n"
    "    answers[i] = '1'\n"
    "  end\n"
    "end\n"
    "return table.concat(answers)\n",
    "e0ea248742ea5626e33aa88c9516f1a1599bbe6c",
    0,
    0,
};

// Several resources at once (Client::lock_all): each script takes a lock's
// keys for every resource, KEYS[1..n], then their helpers in blocks of n, and
// acts on all of them or none. A multi-lock holds the same value at each key.

// `counter` = max(every counter of KEYS[first + 1..first + n], the master's
// clock in microseconds), as REDLOCK_READ_COUNTER for one; 0 unless ARGV[4] is "1".
#define REDLOCK_READ_COUNTERS(first)                                                        \
  "local counter = 0\n"                                                                     \
  "if ARGV[4] == '1' then\n"                                                                \
  "  local clock = redis.call('time')\n"                                                    \
  "  counter = clock[1] * 1000000 + clock[2]\n"                                             \
  "  for i = 1, n do\n"                                                                     \
  "    local c = tonumber(redis.call('get', KEYS[" first                                    \
  " + i]) or '0')\n"                                                                        \
  "    if not c then return redis.error_reply('ERR fencing counter is not a number') end\n" \
  "    if c > counter then counter = c end\n"                                               \
  "  end\n"                                                                                 \
  "end\n"

const Script acquire_all{
    "acquire_all",
    "local n = #KEYS / 4\n" REDLOCK_READ_COUNTERS("3 * n")
    "local longest = -1\n"
    "for i = 1, n do\n"
    "  local current = redis.call('get', KEYS[i])\n"
    "  local left = -1\n"
    "  if current and current ~= ARGV[1] then\n"
    "    left = redis.call('pttl', KEYS[i])\n"
    "    if left < 0 then return {0, 0} end\n"
    "    if ARGV[3] ~= '0' then\n" REDLOCK_MARK_WRITER_WAITING("KEYS[2 * n + i]", "ARGV[3]") "    end\n"
    "  elseif redis.call('exists', KEYS[n + i]) == 1 then\n"
    "    left = redis.call('pttl', KEYS[n + i])\n"
    "    if left < 0 then left = 0 end\n"
    "  end\n"
    "  if left > longest then longest = left end\n"
    "end\n"
    "if longest >= 0 then return {-longest - 1, 0} end\n"
    "for i = 1, n do\n"
    "  redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])\n"
    "  if ARGV[3] ~= '0' then redis.call('zrem', KEYS[2 * n + i], ARGV[1]) end\n"
    "end\n"
    "return {1, counter}\n",
    "f75dc0a3e9809a15e2861d8c6fb19a76355ea72c",
    -std::numeric_limits<int>::max(),
    1,
    0,
    true,
};

// As unlock: where no marker says someone listens or queues, a key's
// release is its compare-and-delete; where one does, it also publishes the
// release and wakes the Client a reservation names, else the head of the
// key's queue, as unlock_and_wake (the helpers' names are made here:
// passing them would cost every unlock). Also as unlock_and_wake, a key
// free where our value is not (this master was down when we took it, or
// restarted empty) wakes the head of its queue, unless reserved, or the
// message is a failed attempt's clean-up (partial: '~' first), which the
// head would meet the same holder after; and there a writer-waiting mark of
// ours goes (REDLOCK_UNMARK_OURS's rule).
const Script unlock_all{
    "unlock_all",
    "local function wake_head(key, queue, reserved)\n"
    "  for _ = 1, 1000 do\n"
    "    local head = redis.call('zrange', queue, 0, 0)[1]\n"
    "    if not head then return end\n"
    "    local heard = redis.pcall('publish', head, key)\n"
    "    if type(heard) ~= 'number' then return end\n"
    "    redis.call('zrem', queue, head)\n"
    "    if heard > 0 then\n"
    "      redis.call('set', reserved, head, 'PX', ARGV[3])\n"
    "      return\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local function wake_reserved(key, queue, reservation)\n"
    "  local reserved = redis.call('get', reservation)\n"
    "  if not reserved then return false end\n"
    "  redis.call('zrem', queue, reserved)\n"
    "  local again = redis.pcall('publish', reserved, key)\n"
    "  if type(again) == 'number' and again > 0 then\n"
    "    redis.call('set', reservation, reserved, 'PX', ARGV[3])\n"
    "    return true\n"
    "  end\n"
    "  redis.call('del', reservation)\n"
    "  return false\n"
    "end\n"
    "local mine = 0\n"
    "local told = 0\n"
    "local partial = string.sub(ARGV[2], 1, 1) == '~'\n"
    "for _, key in ipairs(KEYS) do\n"
    "  local current = redis.call('get', key)\n"
    "  if current ~= ARGV[1] and not partial then\n"
    "    if current == false then\n"
    "      local reservation = key .. ':reserved'\n"
    "      if redis.call('exists', reservation) == 0 then wake_head(key, key .. ':queue', reservation) end\n"
    "    end\n" REDLOCK_UNMARK_OURS("key", "ARGV[2]")
    "  elseif current == ARGV[1] then\n"
    "    mine = mine + 1\n"
    "    local marker = key .. ':listening'\n"
    "    if redis.call('del', key, marker) == 2 then\n"
    "      local heard = redis.pcall('publish', key .. ':released', ARGV[2])\n"
    "      if type(heard) == 'number' then told = told + heard end\n"
    "      local queue = key .. ':queue'\n"
    "      local reservation = key .. ':reserved'\n"
    "      if not wake_reserved(key, queue, reservation) then wake_head(key, queue, reservation) end\n"
    "      local queued = redis.call('pttl', queue)\n"
    "      if queued > 0 then redis.call('set', marker, '1', 'PX', queued) end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if mine < #KEYS then return 0 end\n"
    "return 1 + told\n",
    "b8029ae77c9a12b5148f55aaba02471a97ad4274",
    0,
    std::numeric_limits<int>::max(),
    0,
};

const Script extend_all{
    "extend_all",
    "for i = 1, #KEYS do\n"
    "  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end\n"
    "end\n"
    "for i = 1, #KEYS do redis.call('pexpire', KEYS[i], ARGV[2]) end\n"
    "return 1\n",
    "83f7d4d9284fa7d11ca2449acbcf7a942e5b0f3d",
    0,
    1,
    0,
};

const Script continue_all{
    "continue_all",
    "local n = #KEYS / 2\n" REDLOCK_READ_COUNTERS("n")
    "for i = 1, n do\n"
    "  local current = redis.call('get', KEYS[i])\n"
    "  if current and current ~= ARGV[1] then return {0, 0} end\n"
    "end\n"
    "local result = 1\n"
    "for i = 1, n do\n"
    "  if redis.call('get', KEYS[i]) == ARGV[1] then\n"
    "    redis.call('pexpire', KEYS[i], ARGV[2])\n"
    "  else\n"
    "    redis.call('set', KEYS[i], ARGV[1], 'PX', ARGV[2])\n"
    "    result = 2\n"
    "  end\n"
    "end\n"
    "return {result, counter}\n",
    "433c4f79b341dd86dd904bc56bfcd3c1e7cdb8c7",
    0,
    2,
    0,
    true,
};

const Script fence_all{
    "fence_all",
    "local n = #KEYS / 2\n"
    "for i = 1, n do\n"
    "  if redis.call('get', KEYS[i]) ~= ARGV[1] then return 0 end\n"
    "  if not tonumber(redis.call('get', KEYS[n + i]) or '0') then\n"
    "    return redis.error_reply('ERR fencing counter is not a number')\n"
    "  end\n"
    "end\n"
    "for i = 1, n do\n"
    "  if tonumber(redis.call('get', KEYS[n + i]) or '0') < tonumber(ARGV[2]) then\n"
    "    redis.call('set', KEYS[n + i], ARGV[2], 'PX', ARGV[3])\n"
    "  elseif redis.call('pttl', KEYS[n + i]) < tonumber(ARGV[3]) then\n"
    "    redis.call('pexpire', KEYS[n + i], ARGV[3])\n"
    "  end\n"
    "end\n"
    "return 1\n",
    "555231a8eb0e06a6cd7dff96b0d7a44128f916b9",
    0,
    1,
    0,
};

const Script renew_all{
    "renew_all",
    "for i = 1, #KEYS do\n"
    "  if redis.call('get', KEYS[i]) ~= ARGV[1] then return '0' end\n"
    "end\n"
    "for i = 1, #KEYS do redis.call('pexpire', KEYS[i], ARGV[2]) end\n"
    "return '1'\n",
    "c3acb22c7de1a5802843a7d54eee5ac28113f496",
    0,
    0,
    0,
};

#undef REDLOCK_READ_COUNTERS

const Script read_holder{
    "read_holder",
    "local value = redis.call('get', KEYS[1]) or ''\n"
    "local now = redis.call('time')\n"
    "now = now[1] * 1000 + math.floor(now[2] / 1000)\n"
    "return {value, redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0',\n"
    "        redis.call('zcard', KEYS[3]), redis.call('zcount', KEYS[4], now, '+inf')}\n",
    "0be5611423d063b44eaae1033a4dc9935fe417a6",
    0,
    0,
    4,
};

const Script proclaim{
    "proclaim",
    "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[3])\n"
    "if ARGV[5] == '1' then redis.pcall('publish', ARGV[4], 'leader') end\n"
    "return 1\n",
    "da6752733ee5d19dfdbe8c275adf58cb5aa3ea84",
    0,
    1,
    2,
};

const Script read_leader{
    "read_leader",
    "return {redis.call('get', KEYS[1]) or '', redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or "
    "''}\n",
    "1b11252cb87bda435c60d3e521abc86129a982d1",
    0,
    0,
    2,
};

const Script unmark_writer{
    "unmark_writer",
    "if redis.call('zrem', KEYS[1], ARGV[2]) == 0 then return 0 end\n"
    "redis.pcall('publish', ARGV[1], ARGV[2])\n"
    "return 1\n",
    "bb6d9e6e3063af03538998806007070f9a32b209",
    0,
    1,
};

#undef REDLOCK_RAISE_COUNTER
#undef REDLOCK_SHARED_PRELUDE
#undef REDLOCK_UNMARK_OURS
#undef REDLOCK_MARK_WRITER_WAITING
#undef REDLOCK_MARK_LISTENING
#undef REDLOCK_SHARED_MARK

const std::array<const Script*, 28> all{
    &unlock,         &unlock_and_wake, &acquire,       &acquire_or_queue, &mark_listening,  &wake_next,
    &extend,         &continue_lock,   &renew,         &acquire_fenced,   &continue_fenced, &fence,
    &acquire_shared, &unlock_shared,   &extend_shared, &continue_shared,  &fence_shared,    &renew_shared,
    &acquire_all,    &unlock_all,      &extend_all,    &continue_all,     &fence_all,       &renew_all,
    &read_holder,    &unmark_writer,   &proclaim,      &read_leader};

}  // namespace redlock::scripts
