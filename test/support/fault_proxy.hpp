#pragma once

#include <redlock/options.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace redlock::test {

class Cluster;

/// A TCP proxy on a free 127.0.0.1 port in front of one server on
/// 127.0.0.1:target_port, with a fault mode the test can change at any time.
///
/// It runs on its own thread with its own uv_loop_t, so it keeps working while
/// the test thread blocks (the blocking API, a sync hiredis client) or runs a
/// loop of its own. Every public member may be called from any thread except
/// the proxy's own. A mode setter returns once the proxy thread has applied the
/// mode, so bytes the test sends after it are handled under the new mode.
///
/// Each accepted client connection gets its own connection to the target. The
/// client-to-target stream is parsed as RESP (requests are arrays) to count
/// requests; a client that sends something else (inline commands) is still
/// forwarded but no longer counted, and in error_reply mode it is closed.
class FaultProxy {
 public:
  /// Binds, starts listening and starts the proxy thread, in pass mode.
  /// Throws std::runtime_error when a libuv call fails.
  explicit FaultProxy(int target_port);
  /// Closes every connection and handle, joins the thread and asserts that
  /// the loop closed clean.
  ~FaultProxy();
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  /// The port the proxy listens on, on 127.0.0.1.
  int port() const { return port_; }
  /// host 127.0.0.1 and port(); no password, even if the target needs one.
  redlock::Endpoint endpoint() const;

  /// Forwards both ways, unchanged. Chunks still delayed go out first.
  void pass();
  /// Forwards both ways, each chunk `d` after it was read; order is kept.
  void delay(std::chrono::milliseconds d);
  /// Reads from clients and forwards nothing either way; connections stay open.
  void blackhole();
  /// Forwards requests to the target and throws its replies away.
  void drop_replies();
  /// Passes the next `requests` complete requests (counted over every
  /// connection) and all replies, then acts as blackhole() from the first
  /// chunk that brings more: a second round blackholed after the first.
  void blackhole_after(std::uint64_t requests);
  /// Forwards nothing; answers every complete request with `line` + "\r\n".
  /// `line` must be a RESP error ("-LOADING ...") without CR or LF; throws
  /// std::invalid_argument otherwise.
  void error_reply(std::string line);
  /// Closes every open connection with a TCP RST, and resets each new one as
  /// soon as it is accepted, until the mode changes.
  void reset();

  /// Client connections open now.
  std::size_t connections() const { return connections_.load(); }
  /// Complete requests read from clients since construction, in every mode.
  std::uint64_t requests_seen() const { return requests_seen_.load(); }

 private:
  enum class Kind { pass, delay, blackhole, drop_replies, error_reply, reset, blackhole_after };
  struct Mode {
    Kind kind = Kind::pass;
    std::chrono::milliseconds delay{0};  // Kind::delay only
    std::string error_line;              // Kind::error_reply only, with "\r\n"
    std::uint64_t pass_left = 0;         // Kind::blackhole_after only: requests still to pass
  };
  class Loop;  // the proxy thread's state; defined in fault_proxy.cpp

  void set_mode(Mode mode);

  int port_ = 0;
  std::atomic<std::size_t> connections_{0};
  std::atomic<std::uint64_t> requests_seen_{0};

  // What the test asked for, read by the proxy thread when woken. applied_
  // catches up with requested_ once the proxy thread has acted on it.
  std::mutex mutex_;
  std::condition_variable applied_cv_;
  Mode wanted_;
  bool stopping_ = false;
  std::uint64_t requested_ = 0;
  std::uint64_t applied_ = 0;

  // loop_ is declared before thread_, so the thread is joined (in the
  // destructor body) before the loop state it runs goes away.
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

/// A FaultProxy in front of each server of `masters` (appended to `proxies`,
/// in order) and their endpoints: the Options::masters of a Client that goes
/// through them.
std::vector<redlock::Endpoint> proxy_each(Cluster& masters,
                                          std::vector<std::unique_ptr<FaultProxy>>& proxies);

}  // namespace redlock::test
