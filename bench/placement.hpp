#pragma once

// Where a benchmark's processes run: the masters on CPU 1 and the client on
// CPU 0, so that neither steals the other's time slices on a 2-vCPU machine.

#include <sched.h>

#include <thread>

#include "support/cluster.hpp"

namespace bench {

inline bool pin(pid_t pid, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(pid, sizeof set, &set) == 0;
}

/// False when the machine has one CPU (nothing is pinned then).
inline bool pin_apart(redlock::test::Cluster& cluster) {
  if (std::thread::hardware_concurrency() < 2 || !pin(0, 0)) return false;
  bool ok = true;
  for (std::size_t i = 0; i < cluster.size(); ++i) ok = pin(cluster[i].pid(), 1) && ok;
  return ok;
}

}  // namespace bench
