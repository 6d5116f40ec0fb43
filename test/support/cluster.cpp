#include "cluster.hpp"

#include "timeouts.hpp"

#include <stdexcept>
#include <utility>

namespace redlock::test {

Cluster::Cluster(int n, const ServerOptions& each) {
  if (n < 0) throw std::invalid_argument("Cluster: negative size");
  servers_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    servers_.push_back(std::unique_ptr<RedisServer>(new RedisServer(each, RedisServer::Deferred{})));
  }
  for (auto& server : servers_) server->wait_until_started();
}

redlock::Options Cluster::options() const {
  redlock::Options options;
  for (const auto& server : servers_) options.masters.push_back(server->endpoint());
  // The defaults, stretched on slow machines and sanitizer builds as every
  // test deadline is: a test that measures the timeouts sets its own.
  options.connect_timeout = scaled(options.connect_timeout);
  options.command_timeout = scaled(options.command_timeout);
  return options;
}

std::vector<std::size_t> Cluster::subscribed_on(const std::string& channel, int subscribers) {
  const std::string expected = channel + " " + std::to_string(subscribers);
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->running() && servers_[i]->command({"PUBSUB", "NUMSUB", channel}) == expected)
      found.push_back(i);
  }
  return found;
}

std::vector<std::size_t> Cluster::queued_on(const std::string& key, int waiting) {
  const std::string expected = std::to_string(waiting);
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->running() && servers_[i]->command({"ZCARD", key + ":queue"}) == expected)
      found.push_back(i);
  }
  return found;
}

}  // namespace redlock::test
