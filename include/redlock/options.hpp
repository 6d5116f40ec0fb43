#pragma once

/// @file
/// Options, Endpoint, TlsOptions and KeepOptions.

#include <redlock/export.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

using std::chrono::milliseconds;

/// One Redis master.
struct REDLOCK_API Endpoint {
  /// Host name or IP literal; names are resolved without blocking the loop.
  std::string host = "127.0.0.1";
  /// TCP port, 1-65535.
  int port = 6379;
  /// Path of a Unix socket; used instead of host and port when set.
  std::string unix_socket;
  /// ACL user for AUTH; empty means AUTH with the password alone. A username
  /// with an empty password sends AUTH user "".
  std::string username;
  /// Password for AUTH; empty, with no username, means no AUTH.
  std::string password;
  /// Database for SELECT; 0 sends no SELECT.
  int database = 0;
  /// TLS to this master (rediss://), set up as Options::tls says.
  bool tls = false;

  /// Parses redis://[user:pass\@]host[:port][/db], the same with rediss://
  /// (TLS; the port still defaults to 6379), or
  /// unix:///path/to/socket[?db=N]. The host is a name of letters, digits,
  /// '-', '.' and '_', or an IPv6 address in brackets; port and database are
  /// decimal digits; user, password and path are percent-decoded (write ? as
  /// %3F and # as %23). redis://secret\@host gives a password alone,
  /// redis://alice:\@host the user alice with an empty password. A redis:// URI
  /// takes no query, and neither scheme a fragment.
  /// Throws std::invalid_argument naming what is wrong.
  static Endpoint parse(std::string_view uri);

  /// The endpoint as a URI, without the password.
  std::string to_string() const;
};

/// How a Client speaks TLS to its rediss:// masters (OpenSSL). Files are
/// read when the Client is constructed; one it cannot use throws
/// std::invalid_argument naming it and OpenSSL's reason.
struct REDLOCK_API TlsOptions {
  /// PEM file of the certificate authorities to trust; with ca_path empty
  /// too, the system's default store.
  std::string ca_file;
  /// Directory of hashed CA certificates (`openssl rehash`).
  std::string ca_path;
  /// Client certificate (PEM, may hold its chain), for masters that ask for
  /// one (mutual TLS, tls-auth-clients); with key_file, or neither.
  std::string cert_file;
  /// The client certificate's private key (PEM, unencrypted).
  std::string key_file;
  /// The name the master's certificate must carry, also sent as SNI; empty
  /// means each endpoint's host (an IP address is checked against the
  /// certificate's IP addresses).
  std::string server_name;
  /// Checks the master's certificate chain and name. Turning it off leaves
  /// the connection open to anyone on the path; a Client says so once through
  /// Options::diagnostics.
  bool verify_peer = true;
};

/// How Client::keep keeps a lock alive.
struct REDLOCK_API KeepOptions {
  /// Renew this often; 0 means the lock's ttl / 3.
  milliseconds every{0};
  /// End the hold (errc::timeout, and the lock is released) after this long; 0 means no cap.
  milliseconds max_hold{0};
  /// When the hold ends other than by unlock, our value is deleted on every
  /// master at once. False leaves it to its ttl, or to your unlock(): for a
  /// holder whose work cannot stop at once, so that nobody else gets the lock
  /// before that work is gone (`redlock run` stops CMD first).
  bool release_on_loss = true;
};

/// Everything a Client needs; validated when the Client is constructed
/// (std::invalid_argument naming the field). Every duration is at most
/// 2^31-1 ms (about 24.8 days), the largest ttl.
struct REDLOCK_API Options {
  /// The independent masters, N >= 1, no duplicates; odd N recommended.
  std::vector<Endpoint> masters;
  /// Longest time to connect and finish AUTH/SELECT/script loading.
  milliseconds connect_timeout{200};
  /// Longest wait for one master's reply before it counts as a failed vote.
  milliseconds command_timeout{50};
  /// lock(): retries after the first attempt.
  int retry_count = 3;
  /// lock(): pause between attempts.
  milliseconds retry_delay{200};
  /// lock(): a uniformly random extra pause in [0, retry_jitter].
  milliseconds retry_jitter{200};
  /// Clock drift allowed per millisecond of ttl, in [0, 1).
  double drift_factor = 0.01;
  /// Clock drift allowed on top of ttl * drift_factor.
  milliseconds drift_constant{2};
  /// Key on every master = key_prefix + resource.
  std::string key_prefix;
  /// A master votes only once it has been up this long; 0 = off.
  milliseconds restart_quarantine{0};
  /// TLS for every master whose Endpoint::tls is set (rediss://).
  TlsOptions tls;
  /// Also hand out fencing tokens (Lock::fencing_token), at the cost of a
  /// second round per acquisition. Each resource then has a counter, the key
  /// key_prefix + "{" + resource + "}:fencing", on every master, which
  /// expires a day (or the ttl, if longer) after the last fence round that
  /// reached it (docs/fencing.md, docs/keys.md).
  bool fencing = false;
  /// Kept locks (Client::keep) listen for their keys' keyspace notifications
  /// on every master whose notify-keyspace-events sends them (K with g, x, e
  /// or A; read with CONFIG GET at each connect), over a subscriber
  /// connection per master opened at the first keep: a key deleted, expired,
  /// evicted, renamed or moved away there starts a renewal at once, so a loss
  /// is heard about a round trip after it, not at the next renewal (see
  /// docs/long-holds.md for what is not heard). false: no such connections,
  /// and a loss is heard at the next renewal.
  bool keyspace_notifications = true;
  /// Time source for t0 and validity; empty means steady_clock::now. Meant for
  /// tests and simulations; it must tick like steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
  /// Told, as one line naming the master, what an operator should know: a
  /// failed handshake (wrong password), a replica (it never votes), a
  /// maxmemory-policy other than noeviction (an evicted key is a lost vote), a
  /// master in restart quarantine. Called on the loop thread from inside the
  /// library: log and return, make no call on the Client from it.
  std::function<void(std::string_view)> diagnostics;
  /// Blocking facade (Redlock) only: a thread that holds a resource through
  /// this Redlock and locks it again gets the same Lock at once, with a hold
  /// count (extended on the masters first when the new ttl reaches further);
  /// the masters are released at that thread's last unlock. Other threads and
  /// other processes are still excluded.
  bool reentrant = false;
  /// Who takes the locks: stored in every lock's value on the masters, after
  /// its random part, so that Inspector and `redlock status` can say who holds
  /// a resource and since when. Empty means hostname:pid. A label, not a
  /// credential: whoever reads the masters sees it, and only the whole value
  /// makes a lock ours. At most 256 bytes, no control characters.
  std::string owner;

  /// Throws std::invalid_argument naming the first bad field.
  void validate() const;
};

}  // namespace redlock
