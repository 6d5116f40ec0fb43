#pragma once

#include "redis_server.hpp"

#include <redlock/options.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace redlock::test {

/// N independent redis-server masters (no replication), started together and
/// stopped at scope exit. Same threading rule as RedisServer.
class Cluster {
 public:
  /// Starts `n` servers with the same options: all are spawned first, then
  /// each is waited for. Throws std::runtime_error if one never answers.
  explicit Cluster(int n, const ServerOptions& each = {});
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  RedisServer& operator[](std::size_t i) { return *servers_.at(i); }
  std::size_t size() const { return servers_.size(); }
  /// masters = each server's endpoint(), in order; every other field default.
  redlock::Options options() const;
  /// The indexes of the servers on which `channel` has exactly `subscribers`
  /// subscribers now (PUBSUB NUMSUB).
  std::vector<std::size_t> subscribed_on(const std::string& channel, int subscribers);
  /// The indexes of the running servers whose wait queue for `key` (at its
  /// gate master) holds exactly `waiting` Clients now.
  std::vector<std::size_t> queued_on(const std::string& key, int waiting);

 private:
  std::vector<std::unique_ptr<RedisServer>> servers_;
};

}  // namespace redlock::test
