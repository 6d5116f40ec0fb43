#pragma once

// The permit control's broken semaphore: a counter per master (a sorted set
// of holders, at most `permits` members), taken when a majority of masters
// admitted us. It over-admits: with 2 permits on 3 masters, clients {A,B},
// {B,C} and {A,C} can each win a majority, three holders at once. The
// checker must catch it (scripts/chaos.sh's control-permit-counter), as it
// must catch nothing of lock_permit, which takes each permit as a lock.

#include <redlock/lock.hpp>
#include <redlock/result.hpp>

#include <hiredis/hiredis.h>

#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "worker.hpp"

namespace redlock::chaos {

class CounterSemaphore {
 public:
  explicit CounterSemaphore(const WorkerConfig& config);
  ~CounterSemaphore();
  CounterSemaphore(const CounterSemaphore&) = delete;
  CounterSemaphore& operator=(const CounterSemaphore&) = delete;

  /// Up to config.retry_count + 1 attempts, retry_delay apart.
  Result<Lock> lock(const std::string& resource);
  std::error_code unlock(const Lock& lock);

 private:
  redisReply* call(std::size_t master, const std::vector<std::string>& argv);
  void release(const Lock& lock);

  const WorkerConfig& config_;
  std::vector<redisContext*> masters_;  // nullptr: not connected
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace redlock::chaos
