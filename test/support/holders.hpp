#pragma once

// What the masters of a Cluster hold, read over the inspection connections.
// A round decides at a quorum and releases are run a moment after they are
// written, so the checks that wait poll with a deadline (eventually()).
// A master that is not running (a test stopped it) holds nothing.

#include <optional>
#include <string>

#include "cluster.hpp"
#include "eventually.hpp"
#include "rendezvous.hpp"

namespace redlock::test {

/// How many masters hold `value` at `key` now.
inline int holders(Cluster& masters, const std::string& key, const std::string& value) {
  int n = 0;
  for (std::size_t i = 0; i < masters.size(); ++i)
    n += masters[i].running() && masters[i].get(key) == value ? 1 : 0;
  return n;
}

/// Every master holds `value` at `key`, or will within the deadline.
inline bool held_everywhere(Cluster& masters, const std::string& key, const std::string& value) {
  return eventually([&] { return holders(masters, key, value) == static_cast<int>(masters.size()); });
}

/// No master holds `value` at `key` (another value may be there).
inline bool gone_everywhere(Cluster& masters, const std::string& key, const std::string& value) {
  return eventually([&] { return holders(masters, key, value) == 0; });
}

/// No master holds anything at `key`.
inline bool held_nowhere(Cluster& masters, const std::string& key) {
  return eventually([&] {
    for (std::size_t i = 0; i < masters.size(); ++i) {
      if (masters[i].running() && masters[i].get(key)) return false;
    }
    return true;
  });
}

/// The gate master of `key` among `options.masters` (what Waiters::gate picks
/// when every master votes).
inline std::size_t gate_of(const std::string& key, const Options& options) {
  std::size_t gate = 0;
  for (std::size_t i = 1; i < options.masters.size(); ++i) {
    if (rendezvous_rank(key, options.masters[i]) > rendezvous_rank(key, options.masters[gate])) gate = i;
  }
  return gate;
}

/// How many PUBLISHes a master ran, its scripts' included (INFO commandstats).
inline long long publishes(RedisServer& master) {
  std::string stats = master.command({"INFO", "commandstats"});
  auto at = stats.find("cmdstat_publish:calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(stats.substr(at + std::string("cmdstat_publish:calls=").size()));
}

}  // namespace redlock::test
