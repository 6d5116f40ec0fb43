#include <redlock/options.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

namespace redlock {
namespace {

[[noreturn]] void bad_uri(std::string_view uri, const std::string& why) {
  throw std::invalid_argument("invalid redis URI '" + std::string(uri) + "': " + why);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view uri, std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int high = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (high < 0 || low < 0) bad_uri(uri, "bad percent escape");
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Plain decimal digits only: from_chars alone would also take a sign ("-0").
int parse_number(std::string_view uri, std::string_view text, int min, int max, const char* what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  bool digits = !text.empty() && std::all_of(text.begin(), text.end(), is_digit);
  if (!digits || ec != std::errc{} || end != text.data() + text.size() || value < min || value > max) {
    bad_uri(uri, std::string(what) + " must be decimal digits, from " + std::to_string(min) + " to " +
                     std::to_string(max));
  }
  return value;
}

// RFC 3986 ends the URI at '#', so a raw one is never part of a password or a
// path; we have no use for a fragment either.
void refuse_fragment(std::string_view uri, std::string_view rest) {
  if (rest.find('#') != std::string_view::npos) {
    bad_uri(uri, "a fragment (#...) is not allowed; write a # in a password or path as %23");
  }
}

// A query ends the authority and the path just as '#' does; redis:// takes no
// parameters, the database goes in the path.
void refuse_query(std::string_view uri, std::string_view rest) {
  if (rest.find('?') != std::string_view::npos) {
    bad_uri(uri,
            "a query (?...) is not supported in redis:// URIs; give the database as redis://host/N, "
            "and write a ? in a password as %3F");
  }
}

// inet_pton is exactly the IPv6 grammar. Zone ids (fe80::1%25eth0) are refused:
// we could not pass them on to the connect anyway.
std::string parse_ip_literal(std::string_view uri, std::string_view inside) {
  std::string text(inside);
  in6_addr unused{};
  if (inet_pton(AF_INET6, text.c_str(), &unused) != 1) bad_uri(uri, "[" + text + "] is not an IPv6 address");
  return text;
}

bool is_host_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '.' || c == '_';
}

// A name or an IPv4 address; the connect parses or resolves it, so only the characters are checked here.
std::string parse_host_name(std::string_view uri, std::string_view name) {
  if (name.find(':') != std::string_view::npos) bad_uri(uri, "an IPv6 host must be in brackets");
  if (name.empty()) bad_uri(uri, "no host");
  for (char c : name) {
    if (!is_host_name_char(c)) {
      bad_uri(uri, std::string("the host may hold only letters, digits, '-', '.' and '_', not '") + c + "'");
    }
  }
  return std::string(name);
}

Endpoint parse_unix(std::string_view uri, std::string_view rest) {
  refuse_fragment(uri, rest);
  Endpoint e;
  auto query = rest.find('?');
  std::string_view path = rest.substr(0, query);
  if (path.empty() || path.front() != '/') bad_uri(uri, "a unix socket path must be absolute");
  e.unix_socket = percent_decode(uri, path);
  if (query != std::string_view::npos) {
    std::string_view q = rest.substr(query + 1);
    if (q.substr(0, 3) != "db=") bad_uri(uri, "the only query parameter is db=N");
    e.database = parse_number(uri, q.substr(3), 0, 1 << 30, "the database");
  }
  return e;
}

Endpoint parse_tcp(std::string_view uri, std::string_view rest) {
  refuse_fragment(uri, rest);
  refuse_query(uri, rest);
  Endpoint e;
  auto slash = rest.find('/');
  // The path ends the authority too: redis://u:p/w@h has no password "p/w".
  if (slash != std::string_view::npos && rest.find('@', slash) != std::string_view::npos) {
    bad_uri(uri, "an @ after the first /; write a / in a password as %2F");
  }
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) e.database = parse_number(uri, db, 0, 1 << 30, "the database");
  }
  auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      // redis://secret@host is the common shorthand for a password alone.
      e.password = percent_decode(uri, userinfo);
    } else {
      // redis://alice:@host is a username with an empty password, not a password "alice".
      e.username = percent_decode(uri, userinfo.substr(0, colon));
      e.password = percent_decode(uri, userinfo.substr(colon + 1));
    }
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) bad_uri(uri, "unterminated [ in the host");
    e.host = parse_ip_literal(uri, authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad_uri(uri, "unexpected text after ]");
      port = after.substr(1);
      if (port.empty()) bad_uri(uri, "empty port");
    }
  } else {
    auto colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) bad_uri(uri, "empty port");
    }
    e.host = parse_host_name(uri, authority.substr(0, colon));
  }
  if (!port.empty()) e.port = parse_number(uri, port, 1, 65535, "the port");
  return e;
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("redlock::Options: " + message);
}

// The largest ttl a Client takes (client.cpp's max_ttl) bounds every duration
// option too; validate() says why that is enough.
constexpr milliseconds max_duration{std::numeric_limits<std::int32_t>::max()};

void require_at_most_max(milliseconds value, const char* field) {
  require(value <= max_duration,
          std::string(field) + " must be at most " + std::to_string(max_duration.count()) + " ms");
}

}  // namespace

Endpoint Endpoint::parse(std::string_view uri) {
  constexpr std::string_view redis = "redis://";
  constexpr std::string_view rediss = "rediss://";
  constexpr std::string_view unix_scheme = "unix://";
  for (char c : uri) {
    if (std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c))) {
      bad_uri(uri, "spaces and control characters are not allowed");
    }
  }
  if (uri.substr(0, redis.size()) == redis) return parse_tcp(uri, uri.substr(redis.size()));
  if (uri.substr(0, rediss.size()) == rediss) {
    Endpoint e = parse_tcp(uri, uri.substr(rediss.size()));
    e.tls = true;
    return e;
  }
  if (uri.substr(0, unix_scheme.size()) == unix_scheme)
    return parse_unix(uri, uri.substr(unix_scheme.size()));
  bad_uri(uri, "expected redis://host[:port][/db], rediss://host[:port][/db] or unix:///path");
}

std::string Endpoint::to_string() const {
  std::string user = username.empty() ? "" : username + "@";
  if (!unix_socket.empty()) {
    return "unix://" + unix_socket + (database ? "?db=" + std::to_string(database) : "");
  }
  bool ipv6 = host.find(':') != std::string::npos;
  std::string h = ipv6 ? "[" + host + "]" : host;
  return (tls ? "rediss://" : "redis://") + user + h + ":" + std::to_string(port) +
         (database ? "/" + std::to_string(database) : "");
}

// Every duration option is bounded by max_duration (2^31-1 ms, about 24.8
// days), as a ttl is (the Client checks it before any arithmetic), and
// drift_factor is below 1. With that, no duration sum in lib/ can overflow
// int64 milliseconds, microseconds or nanoseconds; each was read and has room
// to spare:
// - quorum::drift: ttl * factor + drift_constant < 2^32 ms = 4.3e12 us.
// - quorum::valid_until: t0 + ttl - drift, in steady_clock nanoseconds:
//   t0 + 2.2e15 ns - 4.3e15 ns, where int64 nanoseconds last 292 years.
// - Operation::attempt_failed: retry_delay + jitter < 2^32 ms, and libuv
//   clamps uv_now() + timeout itself.
// - Master::send and Master::connect: uv_now() + command_timeout or
//   connect_timeout, uint64 milliseconds, < 2^31 ms added to the loop's clock.
// - Master: restart_quarantine + 1 s, in milliseconds.
// Raising the bound means reading these again.
void Options::validate() const {
  require(!masters.empty(), "masters: at least one master is required");
  std::set<std::tuple<std::string, int, std::string>> seen;
  for (std::size_t i = 0; i < masters.size(); ++i) {
    const Endpoint& m = masters[i];
    std::string where = "masters[" + std::to_string(i) + "] (" + m.to_string() + ")";
    require(!(m.tls && !m.unix_socket.empty()), where + ": TLS over a unix socket is not supported");
    if (m.unix_socket.empty()) {
      require(!m.host.empty(), where + ": host is empty");
      require(m.port >= 1 && m.port <= 65535, where + ": port must be 1-65535");
    }
    require(m.database >= 0, where + ": database must not be negative");
    // The database does not make another master: the same server would vote twice.
    auto key = m.unix_socket.empty() ? std::make_tuple(m.host, m.port, std::string())
                                     : std::make_tuple(std::string(), 0, m.unix_socket);
    require(seen.insert(key).second, where + ": duplicate endpoint (one server would vote twice)");
  }
  require(connect_timeout.count() > 0, "connect_timeout must be positive");
  require_at_most_max(connect_timeout, "connect_timeout");
  require(command_timeout.count() > 0, "command_timeout must be positive");
  require_at_most_max(command_timeout, "command_timeout");
  require(retry_count >= 0 && retry_count <= 1000000, "retry_count must be 0-1000000");
  require(retry_delay.count() >= 0, "retry_delay must not be negative");
  require_at_most_max(retry_delay, "retry_delay");
  require(retry_jitter.count() >= 0, "retry_jitter must not be negative");
  require_at_most_max(retry_jitter, "retry_jitter");
  require(drift_factor >= 0.0 && drift_factor < 1.0, "drift_factor must be in [0, 1)");
  require(drift_constant.count() >= 0, "drift_constant must not be negative");
  require_at_most_max(drift_constant, "drift_constant");
  require(restart_quarantine.count() >= 0, "restart_quarantine must not be negative");
  require_at_most_max(restart_quarantine, "restart_quarantine");
  require(tls.cert_file.empty() == tls.key_file.empty(),
          "tls.cert_file and tls.key_file go together (a client certificate needs its key)");
  require(owner.size() <= 256, "owner must be at most 256 bytes");
  // It is printed on operators' terminals by `redlock status`.
  bool printable = std::none_of(owner.begin(), owner.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
  require(printable, "owner must not contain control characters");
}

}  // namespace redlock
