#include "counter_semaphore.hpp"

#include <redlock/error.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

namespace redlock::chaos {
namespace {

// Drops holders whose time ran out, then admits one more while fewer than
// ARGV[1] hold: 1 admitted, 0 full. Scores are the master's clock in ms.
constexpr const char* admit_script =
    "local now = redis.call('time')\n"
    "now = now[1] * 1000 + math.floor(now[2] / 1000)\n"
    "redis.call('zremrangebyscore', KEYS[1], '-inf', now)\n"
    "if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end\n"
    "redis.call('zadd', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])\n"
    "redis.call('pexpire', KEYS[1], 2 * tonumber(ARGV[3]))\n"
    "return 1\n";

std::string random_value(std::mt19937_64& rng) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return text;
}

}  // namespace

CounterSemaphore::CounterSemaphore(const WorkerConfig& config)
    : config_(config), masters_(config.masters.size(), nullptr) {
}

CounterSemaphore::~CounterSemaphore() {
  for (redisContext* c : masters_) {
    if (c != nullptr) redisFree(c);
  }
}

redisReply* CounterSemaphore::call(std::size_t master, const std::vector<std::string>& argv) {
  redisContext*& c = masters_[master];
  if (c == nullptr) {
    timeval timeout{0, 200'000};
    c = redisConnectWithTimeout(config_.masters[master].host.c_str(), config_.masters[master].port, timeout);
    if (c == nullptr || c->err != 0 || redisSetTimeout(c, timeout) != REDIS_OK) {
      if (c != nullptr) redisFree(c);
      c = nullptr;
      return nullptr;
    }
  }
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), args.data(), lengths.data()));
  if (reply == nullptr) {  // an I/O error or a timeout: a new connection next time
    redisFree(c);
    c = nullptr;
  }
  return reply;
}

Result<Lock> CounterSemaphore::lock(const std::string& resource) {
  const std::string key = config_.key_prefix + "counter:{" + resource + "}";
  const std::size_t majority = config_.masters.size() / 2 + 1;
  const auto drift =
      std::chrono::duration_cast<Clock::duration>(config_.ttl * 0.01) + std::chrono::milliseconds{2};
  std::uniform_int_distribution<long long> jitter(0, config_.retry_delay.count());
  for (int attempt = 0; attempt <= config_.retry_count; ++attempt) {
    Lock lock;
    lock.resource = resource;
    lock.value = random_value(rng_);
    lock.ttl = config_.ttl;
    const auto t0 = Clock::now();
    std::size_t admitted = 0;
    // Each attempt asks the masters in an order of its own, as concurrent
    // clients' requests interleave: where two attempts meet, each master
    // may admit a different one.
    std::vector<std::size_t> order(masters_.size());
    for (std::size_t m = 0; m < order.size(); ++m) order[m] = m;
    std::shuffle(order.begin(), order.end(), rng_);
    for (std::size_t m : order) {
      redisReply* reply = call(m, {"EVAL", admit_script, "1", key, std::to_string(config_.permits),
                                   lock.value, std::to_string(config_.ttl.count())});
      if (reply != nullptr && reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) ++admitted;
      if (reply != nullptr) freeReplyObject(reply);
    }
    lock.valid_until = t0 + config_.ttl - drift;
    if (admitted >= majority && Clock::now() < lock.valid_until) return lock;
    release(lock);
    std::this_thread::sleep_for(config_.retry_delay + std::chrono::milliseconds{jitter(rng_)});
  }
  return make_error_code(errc::not_acquired);
}

std::error_code CounterSemaphore::unlock(const Lock& lock) {
  release(lock);
  return {};
}

void CounterSemaphore::release(const Lock& lock) {
  const std::string key = config_.key_prefix + "counter:{" + lock.resource + "}";
  for (std::size_t m = 0; m < masters_.size(); ++m) {
    redisReply* reply = call(m, {"ZREM", key, lock.value});
    if (reply != nullptr) freeReplyObject(reply);
  }
}

}  // namespace redlock::chaos
