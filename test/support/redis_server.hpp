#pragma once

#include "timeouts.hpp"

#include <redlock/options.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct redisContext;
struct redisReply;

namespace redlock::test {

class Cluster;

/// A reply as text, as RedisServer::command() gives it: status and string as
/// they are, integer in decimal, nil as "(nil)", an error as its message, an
/// array as its elements joined by spaces.
std::string render(const redisReply& reply);

struct ServerOptions {
  /// Extra redis-server arguments, after ours (so they win), e.g.
  /// {"--maxmemory-policy", "noeviction"}.
  std::vector<std::string> args;
  /// Also listen on <dir()>/redis.sock (unixsocketperm 700).
  bool unix_socket = false;
  /// appendonly yes + appendfsync always, so that restart(true) keeps data.
  bool aof = false;
  /// When set, the server gets `--requirepass <password>` (unless `args`
  /// already has --requirepass), the inspection connection sends AUTH, and
  /// endpoint() carries it.
  std::string password;
  /// Also listen for TLS on tls_port() with these PEM files (Certificates
  /// makes them). The plain port stays: the inspection connection uses it
  /// (hiredis 0.14 has no TLS).
  struct Tls {
    std::string cert_file;
    std::string key_file;
    std::string ca_file;        // the CA client certificates must chain to
    bool auth_clients = false;  // tls-auth-clients: ask for a client certificate
  };
  std::optional<Tls> tls;
  /// Added to the server's environment ("NAME=value"); "{dir}" in a value
  /// becomes the server's dir(), e.g. for an LD_PRELOAD shim's state file.
  std::vector<std::string> env;
};

/// A real redis-server child process on a free 127.0.0.1 port, in its own
/// temporary directory (log, socket, AOF), killed and removed at scope exit.
///
/// Not thread-safe: call it from one thread at a time. The child gets
/// PR_SET_PDEATHSIG(SIGKILL), so it dies with the thread that started it
/// (constructor or restart()); start servers on a thread that outlives them,
/// normally the test's main thread. This is what keeps a crashed test from
/// leaving servers behind.
class RedisServer {
 public:
  /// Starts the server and waits (5 s * test_timeout_multiplier()) until it
  /// answers PING. Throws std::runtime_error with the log tail if it never does.
  explicit RedisServer(ServerOptions options = {});
  /// SIGCONT if paused, SIGKILL, waitpid, removes dir(). Never throws.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  /// The TLS port (ServerOptions::tls), 0 without TLS.
  int tls_port() const { return tls_port_; }
  /// The server's pid, or -1 after kill9().
  pid_t pid() const { return pid_; }
  /// False after kill9() or once the process has exited; true while paused.
  bool running() const;
  /// <dir()>/redis.sock when ServerOptions::unix_socket, else empty.
  const std::string& unix_socket() const { return unix_socket_; }
  /// Its own mkdtemp directory under $TMPDIR (or /tmp).
  const std::string& dir() const { return dir_; }
  /// host "127.0.0.1", port(), and ServerOptions::password; no unix socket.
  redlock::Endpoint endpoint() const;
  /// The same on tls_port(), with Endpoint::tls set.
  redlock::Endpoint tls_endpoint() const;

  /// SIGKILL and waitpid; does nothing when not running.
  void kill9();
  /// SIGSTOP; returns once the process has stopped. Throws std::logic_error
  /// when not running.
  void pause();
  /// SIGCONT; returns once the process has continued. Does nothing unless paused.
  void resume();
  /// kill9() if running, then starts again on the same port and socket path
  /// and waits until it answers PING. keep_data = false deletes the data
  /// files first; keep_data = true keeps data only with ServerOptions::aof.
  void restart(bool keep_data);

  // Inspection, over a separate blocking hiredis connection with a 1 s
  // timeout (so a paused server fails the call instead of hanging the test).
  // Opened lazily, reopened after restart() or an I/O error. I/O errors and
  // unexpected replies throw std::runtime_error.

  /// GET; std::nullopt when the key is missing.
  std::optional<std::string> get(const std::string& key);
  /// PTTL: -2 when missing, -1 when the key has no TTL.
  long long pttl(const std::string& key);
  /// SET, with PX when `ttl` is positive (0 means no expiry).
  void set(const std::string& key, const std::string& value, std::chrono::milliseconds ttl = {});
  /// Any command; the reply as text: status and string as they are, integer
  /// in decimal, nil as "(nil)", an error as its message, an array as its
  /// elements joined by spaces. Error replies do not throw.
  std::string command(const std::vector<std::string>& argv);

 private:
  friend class Cluster;
  struct Deferred {};
  enum class Ready { ok, port_taken };
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;
  using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

  /// Prepares dir() and a port and spawns the process without waiting; the
  /// Cluster starts all its servers this way and then waits for each.
  RedisServer(ServerOptions options, Deferred);
  void wait_until_started();  // ready, or retry on a new port when it was taken
  void pick_ports();          // port_, and tls_port_ with ServerOptions::tls
  void spawn();
  Ready wait_ready();
  void stop() noexcept;  // the destructor's work, also used when a start fails
  std::vector<std::string> argv() const;
  std::vector<std::string> environment() const;  // environ + ServerOptions::env
  std::string log_tail() const;
  redisContext& inspection();
  ReplyPtr call(const std::vector<std::string>& argv);  // never null

  ServerOptions options_;
  std::string executable_;
  std::string dir_;
  std::string unix_socket_;
  int port_ = 0;
  int tls_port_ = 0;
  pid_t pid_ = -1;
  bool paused_ = false;
  std::size_t log_offset_ = 0;  // where this start's part of redis.log begins
  ContextPtr context_;
};

}  // namespace redlock::test
