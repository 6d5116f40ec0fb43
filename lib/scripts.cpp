#include "scripts.hpp"

namespace redlock::scripts {

const Script unlock{
    "unlock",
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end\n"
    "return 0\n",
    "3c878575892b1b569fd5e1a5ce04d480da65b703",
    1,
};

const Script extend{
    "extend",
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end\n"
    "return 0\n",
    "e28affa6795dca0bd106a8a2442e4900bc5cf704",
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
    2,
};

const std::array<const Script*, 3> all{&unlock, &extend, &continue_lock};

}  // namespace redlock::scripts
