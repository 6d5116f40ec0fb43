#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis_server.hpp"

struct redisContext;

namespace redlock::test {

/// A MONITOR connection to one server (without a password): what requests
/// clients made of it, in the order it ran them.
class Monitor {
 public:
  /// Connects and sends MONITOR; throws std::runtime_error if the server
  /// does not answer OK.
  explicit Monitor(RedisServer& server);
  ~Monitor();
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  /// The clients' requests the server ran since MONITOR, in order, as
  /// MONITOR prints them; not the commands its scripts ran. Reads up to a
  /// marker this call sends on the server's inspection connection, so every
  /// request a client was answered before the call is in it. Throws
  /// std::runtime_error when the marker does not come within the inspection
  /// timeout.
  const std::vector<std::string>& requests();

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  RedisServer& server_;
  std::unique_ptr<redisContext, ContextDeleter> context_;
  int marks_ = 0;
  std::vector<std::string> requests_;  // read so far
};

/// How many of `requests` (Monitor::requests) are the command `name` (any case).
std::size_t count_command(const std::vector<std::string>& requests, const std::string& name);
/// The indexes of the `requests` that contain `text` (a script's SHA-1, a value).
std::vector<std::size_t> positions(const std::vector<std::string>& requests, std::string_view text);
/// The `requests`, a line each: for a failed test's message.
std::string joined(const std::vector<std::string>& requests);

}  // namespace redlock::test
