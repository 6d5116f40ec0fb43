#pragma once

#include "record.hpp"

#include <redlock/options.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace redlock::chaos {

/// What one worker process does: `threads` threads share one redlock::Redlock
/// and loop lock → hold → unlock on `resources` resources until `until`.
struct WorkerConfig {
  int process = 0;
  std::vector<Endpoint> masters;
  int threads = 4;
  int resources = 2;
  std::chrono::milliseconds ttl{400};
  std::chrono::milliseconds quarantine{0};
  int retry_count = 60;
  std::chrono::milliseconds retry_delay{40};
  std::string key_prefix;
  Clock::time_point until{};
  /// Records are appended here as they happen, one line each (record.hpp).
  std::string out_path;
  /// Hold through a kept LockGuard for 0.5-4 TTLs (see hold_kept()).
  bool keep_holds = false;
  /// The fenced register on 127.0.0.1 (0: none): every holder writes its
  /// token there on entering and before leaving; writes are appended to
  /// writes_path. Unfenced: the register takes every write (a control).
  int register_port = 0;
  bool register_fenced = true;
  std::string writes_path;
  /// > 0: take permits of a semaphore of this many (lock_permit) instead of
  /// the resource's lock; the register then has one value per permit.
  int permits = 0;
  /// Two acquisitions in three are shared (lock_shared), the others
  /// exclusive (lock with a wait); checked: no exclusive holder beside anyone.
  bool shared = false;
  /// The control: readers take their shared lock under another name, so
  /// they never meet a writer and the checker must see them overlap.
  bool shared_apart = false;
  /// Half the acquisitions take two resources at once (lock_all, in a random
  /// order), the others one; each resource held is checked as its own.
  bool all = false;
  /// The control: the two-resource calls take only the first, so they
  /// overlap holders of the second.
  bool all_first_only = false;
  /// The liveness control: one acquisition in four is left held on the
  /// masters, recorded as canceled and never unlocked.
  bool strand = false;
  /// The markers' control: a thread deletes every resource's listening
  /// marker on every master every few ms, so unlocks publish to nobody and
  /// waiters sleep to their retry_delay (with a long one, the checker must
  /// see stalls).
  bool steal_markers = false;
  /// Campaign in elections (Leadership) instead of locking: one per
  /// resource, checked as its lock (one leader at a time, terms growing).
  bool election = false;
  /// The control: a leader acts on for a ttl after it resigned.
  bool election_acts_after_resign = false;
  /// The observers' control: every third report of a leader is recorded
  /// with term 1, below the terms reported before it: the checker must catch it.
  bool observer_misreports = false;
  bool observer_freezes = false;
  /// The control: the same semaphore built as a counter per master
  /// (counter_semaphore.hpp), which over-admits.
  bool counter_semaphore = false;
  /// Waits through a Cancellation each, and a thread of the worker cancels
  /// one now and then (the waits are then lock() with a wait, not retries).
  bool cancel = false;
};

/// The redlock::Options every worker uses, so that the parent can describe them.
Options worker_options(const WorkerConfig& config);

/// Runs the worker to its deadline; the process exit status.
int run_worker(const WorkerConfig& config);

}  // namespace redlock::chaos
