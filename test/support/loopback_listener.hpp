#pragma once

#include <uv.h>

#include <arpa/inet.h>
#include <signal.h>

namespace redlock::test {

/// Binds `listener` (initialised, its data set) to a free 127.0.0.1 port and
/// listens with `on_connection`; returns the port. `check(what, rc)` reports
/// a libuv call that failed (and is expected to throw).
template <class Check>
int listen_on_free_loopback_port(uv_tcp_t* listener, uv_connection_cb on_connection, Check check) {
  constexpr int backlog = 128;
  sockaddr_in any_port{};
  check("listen address", uv_ip4_addr("127.0.0.1", 0, &any_port));
  check("uv_tcp_bind", uv_tcp_bind(listener, reinterpret_cast<const sockaddr*>(&any_port), 0));
  check("uv_listen", uv_listen(reinterpret_cast<uv_stream_t*>(listener), backlog, on_connection));
  sockaddr_in bound{};
  int length = sizeof bound;
  check("uv_tcp_getsockname", uv_tcp_getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length));
  return ntohs(bound.sin_port);
}

/// For a server thread's first call: a client that went away must cost a
/// closed connection, not a SIGPIPE that kills the test binary (libuv writes
/// with write(2)).
inline void block_sigpipe_in_this_thread() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

}  // namespace redlock::test
