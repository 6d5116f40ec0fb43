#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "uv_handle.hpp"

namespace redlock {

/// What a name resolved to, in getaddrinfo's order; each entry holds a
/// sockaddr_in or sockaddr_in6.
using Addresses = std::vector<sockaddr_storage>;

/// One getaddrinfo() call that the loop can walk away from.
///
/// uv_getaddrinfo runs on libuv's threadpool, where name lookups share two of
/// the four threads and one that started cannot be cancelled: two names whose
/// DNS hangs hold every slot, lookups of healthy names queue behind them, and
/// uv_run does not return until they end. A Lookup runs getaddrinfo on a
/// detached thread of its own and answers through a uv_async_t.
///
/// Destroying the Lookup abandons it: its callback never runs, the async
/// handle closes at once, and the thread, whenever getaddrinfo returns, drops
/// the result and frees the shared state by itself. The loop never waits for
/// DNS.
///
/// Threading: start, destroy and receive the answer on the loop thread.
class Lookup {
 public:
  /// `status` is 0, or an EAI_* code from getaddrinfo (gai_strerror names it);
  /// `addresses` is never empty when `status` is 0.
  using Callback = std::function<void(int status, Addresses addresses)>;

  /// Resolves `host` for a TCP connection to `port` (IPv4 and IPv6). `cb` is
  /// called on the loop thread, on a later turn, exactly once, unless the
  /// Lookup is destroyed first; it may destroy the Lookup. Returns null when
  /// the thread or the async handle cannot be started.
  [[nodiscard]] static std::unique_ptr<Lookup> start(uv_loop_t* loop, const std::string& host, int port,
                                                     Callback cb);

  ~Lookup();
  Lookup(const Lookup&) = delete;
  Lookup& operator=(const Lookup&) = delete;

  /// The state the Lookup and its thread share; public for the thread's function.
  struct Shared;

 private:
  Lookup(std::shared_ptr<Shared> shared, Handle<uv_async_t> wake, Callback cb);
  void on_answer();

  std::shared_ptr<Shared> shared_;
  Handle<uv_async_t> wake_;
  Callback cb_;
};

}  // namespace redlock
