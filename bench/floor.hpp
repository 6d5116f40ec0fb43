#pragma once

// The floor: the least any Redlock client on libuv + hiredis can do. Raw
// parallel commands to N masters over plain libuv sockets with hiredis
// parsing, deciding at a majority of yes replies (like the library, it never
// waits for stragglers), writes coalesced per loop turn (like the library),
// and no deadlines, scripts, retries or validity. Benchmark figures are
// reported as ratios to it.

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace bench {

class Floor {
 public:
  Floor(uv_loop_t* loop, const std::vector<int>& ports);
  ~Floor();
  Floor(const Floor&) = delete;
  Floor& operator=(const Floor&) = delete;

  /// Runs the loop until every connection is up; false on failure.
  bool connected();
  /// Sends the RESP-encoded `command` to every master; `done(true)` at a
  /// majority of yes replies ("OK" or a positive integer), `done(false)` as
  /// soon as a majority is impossible.
  void fan_out(const std::string& command, std::function<void(bool)> done);
  /// Sends `command` to every master without waiting for the replies.
  void send(const std::string& command) { fan_out(command, nullptr); }
  /// Pub/sub messages (replies that arrive while nothing is pending on their
  /// connection) go to `handler` with their payload.
  void on_message(std::function<void(const std::string&)> handler) { on_message_ = std::move(handler); }
  /// Closes the sockets; run the loop afterwards to let them finish.
  void close();

  struct Connection;

 private:
  struct Op {
    int yes = 0;
    int replies = 0;
    bool decided = false;
    std::function<void(bool)> done;
  };
  void on_reply(Connection& c, bool yes);
  void on_unasked(const void* reply);

  uv_loop_t* loop_;
  std::vector<Connection*> connections_;  // each freed in its close callback
  std::unordered_map<std::uint64_t, Op> ops_;
  std::uint64_t next_op_ = 0;
  int failed_connects_ = 0;
  int connects_ = 0;
  std::function<void(const std::string&)> on_message_;
};

}  // namespace bench
