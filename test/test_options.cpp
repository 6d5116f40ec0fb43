#include <catch2/catch.hpp>

#include <uv.h>
#include <redlock/redlock.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "quorum.hpp"

using namespace redlock;
using namespace std::chrono_literals;

TEST_CASE("redis URIs parse into endpoints", "[options]") {
  SECTION("host and port") {
    Endpoint e = Endpoint::parse("redis://10.1.2.3:7001");
    CHECK(e.host == "10.1.2.3");
    CHECK(e.port == 7001);
    CHECK(e.database == 0);
    CHECK(e.password.empty());
  }
  SECTION("default port") {
    CHECK(Endpoint::parse("redis://cache.local").port == 6379);
  }
  SECTION("user, password and database") {
    Endpoint e = Endpoint::parse("redis://locker:s3cret@127.0.0.1:6380/4");
    CHECK(e.username == "locker");
    CHECK(e.password == "s3cret");
    CHECK(e.database == 4);
  }
  SECTION("a password alone, with or without a colon") {
    CHECK(Endpoint::parse("redis://:pw@h").password == "pw");
    CHECK(Endpoint::parse("redis://:pw@h").username.empty());
    CHECK(Endpoint::parse("redis://pw@h").password == "pw");
  }
  SECTION("percent escapes in credentials") {
    Endpoint e = Endpoint::parse("redis://u%40x:p%3Aw%2F@h");
    CHECK(e.username == "u@x");
    CHECK(e.password == "p:w/");
  }
  SECTION("IPv6 in brackets") {
    Endpoint e = Endpoint::parse("redis://[::1]:7002/1");
    CHECK(e.host == "::1");
    CHECK(e.port == 7002);
    CHECK(e.database == 1);
  }
  SECTION("rediss:// is the same with TLS") {
    Endpoint e = Endpoint::parse("rediss://locker:s3cret@cache.local:6380/4");
    CHECK(e.tls);
    CHECK(e.host == "cache.local");
    CHECK(e.port == 6380);
    CHECK(e.username == "locker");
    CHECK(e.password == "s3cret");
    CHECK(e.database == 4);
    CHECK(Endpoint::parse("rediss://[::1]").port == 6379);
    CHECK_FALSE(Endpoint::parse("redis://h").tls);
    CHECK_THROWS_WITH(Endpoint::parse("redisss://h"), Catch::Contains("rediss://host"));
    CHECK_THROWS_WITH(Endpoint::parse("rediss://h?db=1"), Catch::Contains("query"));
  }
  SECTION("unix socket, with a database") {
    Endpoint e = Endpoint::parse("unix:///run/redis/redis.sock?db=2");
    CHECK(e.unix_socket == "/run/redis/redis.sock");
    CHECK(e.database == 2);
  }
}

TEST_CASE("bad URIs throw invalid_argument naming the problem", "[options]") {
  auto message_of = [](const char* uri) -> std::string {
    try {
      Endpoint::parse(uri);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no exception)";
  };
  CHECK_THAT(message_of("http://h:1"), Catch::Contains("expected redis://"));
  CHECK_THAT(message_of("redis://"), Catch::Contains("no host"));
  CHECK_THAT(message_of("redis://h:0"), Catch::Contains("port"));
  CHECK_THAT(message_of("redis://h:65536"), Catch::Contains("port"));
  CHECK_THAT(message_of("redis://h:12x"), Catch::Contains("port"));
  CHECK_THAT(message_of("redis://h:"), Catch::Contains("empty port"));
  CHECK_THAT(message_of("redis://h/abc"), Catch::Contains("database"));
  CHECK_THAT(message_of("redis://h/-1"), Catch::Contains("database"));
  CHECK_THAT(message_of("redis://::1:6379"), Catch::Contains("brackets"));
  CHECK_THAT(message_of("redis://[::1:6379"), Catch::Contains("unterminated"));
  CHECK_THAT(message_of("redis://u:%zz@h"), Catch::Contains("percent"));
  CHECK_THAT(message_of("redis://u:%4@h"), Catch::Contains("percent"));
  CHECK_THAT(message_of("unix://relative/path"), Catch::Contains("absolute"));
  CHECK_THAT(message_of("unix:///p?x=1"), Catch::Contains("db=N"));
  CHECK_THAT(message_of("redis://h o:1"), Catch::Contains("spaces"));
  CHECK_THAT(message_of(""), Catch::Contains("expected"));
}

TEST_CASE("URIs with a query, a fragment, a bad host or a signed number are refused", "[options]") {
  struct Bad {
    const char* uri;
    const char* says;
  };
  const Bad bad[] = {
      {"redis://h?db=1", "query"},
      {"redis://h:7001?db=1", "query"},
      {"redis://h/1?timeout=5", "query"},
      {"redis://:pa?ss@h", "%3F"},
      {"redis://h#frag", "fragment"},
      {"redis://h:7001/2#frag", "fragment"},
      {"redis://:pa#ss@h", "%23"},
      {"redis://u:pa/ss@h", "%2F"},
      {"unix:///tmp/s#frag", "fragment"},
      {"redis://h/-0", "database"},
      {"redis://h/+0", "database"},
      {"redis://h/+1", "database"},
      {"redis://h/ 1", "spaces"},
      {"unix:///tmp/s?db=-0", "database"},
      {"unix:///tmp/s?db=+2", "database"},
      {"redis://h:+7001", "port"},
      {"redis://h:-0", "port"},
      {"redis://h!x", "host"},
      {"redis://h$:7001", "host"},
      {"redis://h%41", "host"},
      {"redis://h,i:7001", "host"},
      {"redis://h[::1]", "host"},
      {"redis://[127.0.0.1]", "IPv6"},
      {"redis://[]:7001", "IPv6"},
      {"redis://[::g]", "IPv6"},
      {"redis://[fe80::1%25eth0]", "IPv6"},
  };
  for (const Bad& b : bad) {
    INFO(b.uri);
    CHECK_THROWS_AS(Endpoint::parse(b.uri), std::invalid_argument);
    CHECK_THROWS_WITH(Endpoint::parse(b.uri), Catch::Contains(b.says));
  }
}

TEST_CASE("valid URIs at the edges of the grammar parse exactly", "[options]") {
  SECTION("a username with an empty password") {
    Endpoint e = Endpoint::parse("redis://alice:@h");
    CHECK(e.username == "alice");
    CHECK(e.password == "");
    CHECK(e.host == "h");
    CHECK(e.port == 6379);
    CHECK(e.database == 0);
  }
  SECTION("a password alone, without a colon") {
    Endpoint e = Endpoint::parse("redis://secret@h");
    CHECK(e.username == "");
    CHECK(e.password == "secret");
    CHECK(e.host == "h");
  }
  SECTION("? and # in a password, percent-encoded") {
    Endpoint e = Endpoint::parse("redis://u:p%3Fw%23@h");
    CHECK(e.username == "u");
    CHECK(e.password == "p?w#");
    CHECK(e.host == "h");
  }
  SECTION("a host name with letters, digits, '-', '.' and '_'") {
    Endpoint e = Endpoint::parse("redis://redis_1-a.Example.com:7001/15");
    CHECK(e.host == "redis_1-a.Example.com");
    CHECK(e.port == 7001);
    CHECK(e.database == 15);
  }
  SECTION("a database with leading zeros, or an empty path") {
    CHECK(Endpoint::parse("redis://h/007").database == 7);
    CHECK(Endpoint::parse("redis://h/").database == 0);
  }
  SECTION("IPv6 literals, including an IPv4-mapped one") {
    Endpoint e = Endpoint::parse("redis://[fe80::1:2]:7000/2");
    CHECK(e.host == "fe80::1:2");
    CHECK(e.port == 7000);
    CHECK(e.database == 2);
    CHECK(Endpoint::parse("redis://[::ffff:10.0.0.1]").host == "::ffff:10.0.0.1");
  }
  SECTION("a unix socket path with a percent-encoded #") {
    Endpoint e = Endpoint::parse("unix:///tmp/a%23b.sock?db=3");
    CHECK(e.unix_socket == "/tmp/a#b.sock");
    CHECK(e.database == 3);
  }
}

TEST_CASE("an endpoint prints as a URI without its password", "[options]") {
  CHECK(Endpoint::parse("redis://u:secret@h:7/3").to_string() == "redis://u@h:7/3");
  CHECK(Endpoint::parse("redis://[::1]:7").to_string() == "redis://[::1]:7");
  CHECK(Endpoint::parse("rediss://u:secret@h/2").to_string() == "rediss://u@h:6379/2");
  CHECK(Endpoint::parse("unix:///tmp/s?db=1").to_string() == "unix:///tmp/s?db=1");
}

TEST_CASE("options are validated with a message naming the field", "[options]") {
  Options good;
  good.masters = {Endpoint::parse("redis://127.0.0.1:7001"), Endpoint::parse("redis://127.0.0.1:7002")};
  REQUIRE_NOTHROW(good.validate());

  auto message_of = [](const Options& o) -> std::string {
    try {
      o.validate();
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "(no exception)";
  };
  Options o = good;
  SECTION("no masters") {
    o.masters.clear();
    CHECK_THAT(message_of(o), Catch::Contains("masters"));
  }
  SECTION("the same server twice, even with another database") {
    o.masters.push_back(Endpoint::parse("redis://127.0.0.1:7001/3"));
    CHECK_THAT(message_of(o), Catch::Contains("duplicate"));
  }
  SECTION("a TLS and a plain endpoint of the same server") {
    o.masters.push_back(Endpoint::parse("rediss://127.0.0.1:7001"));
    CHECK_THAT(message_of(o), Catch::Contains("duplicate"));
  }
  SECTION("TLS over a unix socket") {
    o.masters[0] = Endpoint::parse("unix:///tmp/a.sock");
    o.masters[0].tls = true;
    CHECK_THAT(message_of(o), Catch::Contains("TLS over a unix socket"));
  }
  SECTION("a client key without its certificate") {
    o.tls.key_file = "/etc/client.key";
    CHECK_THAT(message_of(o), Catch::Contains("tls.cert_file and tls.key_file"));
  }
  SECTION("the same socket twice") {
    o.masters = {Endpoint::parse("unix:///tmp/a.sock"), Endpoint::parse("unix:///tmp/a.sock?db=1")};
    CHECK_THAT(message_of(o), Catch::Contains("duplicate"));
  }
  SECTION("bad port") {
    o.masters[0].port = 0;
    CHECK_THAT(message_of(o), Catch::Contains("port"));
  }
  SECTION("negative database") {
    o.masters[0].database = -1;
    CHECK_THAT(message_of(o), Catch::Contains("database"));
  }
  SECTION("timeouts") {
    o.connect_timeout = 0ms;
    CHECK_THAT(message_of(o), Catch::Contains("connect_timeout"));
    o = good;
    o.command_timeout = -1ms;
    CHECK_THAT(message_of(o), Catch::Contains("command_timeout"));
  }
  SECTION("retries") {
    o.retry_count = -1;
    CHECK_THAT(message_of(o), Catch::Contains("retry_count"));
    o = good;
    o.retry_delay = -1ms;
    CHECK_THAT(message_of(o), Catch::Contains("retry_delay"));
    o = good;
    o.retry_jitter = -1ms;
    CHECK_THAT(message_of(o), Catch::Contains("retry_jitter"));
  }
  SECTION("drift") {
    o.drift_factor = 1.0;
    CHECK_THAT(message_of(o), Catch::Contains("drift_factor"));
    o.drift_factor = -0.1;
    CHECK_THAT(message_of(o), Catch::Contains("drift_factor"));
    o = good;
    o.drift_constant = -1ms;
    CHECK_THAT(message_of(o), Catch::Contains("drift_constant"));
  }
  SECTION("quarantine") {
    o.restart_quarantine = -1ms;
    CHECK_THAT(message_of(o), Catch::Contains("restart_quarantine"));
  }
  SECTION("owner") {
    o.owner = std::string(256, 'x');
    CHECK_NOTHROW(o.validate());
    o.owner = "web-1 (deploy) \xc3\xa9";
    CHECK_NOTHROW(o.validate());
    o.owner = std::string(257, 'x');
    CHECK_THAT(message_of(o), Catch::Contains("owner must be at most 256 bytes"));
    o.owner = "a\nb";
    CHECK_THAT(message_of(o), Catch::Contains("owner must not contain control characters"));
    o.owner = "a\x1b[2Jb";
    CHECK_THAT(message_of(o), Catch::Contains("owner must not contain control characters"));
  }
}

TEST_CASE("every duration option is bounded by the largest ttl, 2^31-1 ms", "[options]") {
  constexpr milliseconds bound{std::numeric_limits<std::int32_t>::max()};
  struct Field {
    const char* name;
    milliseconds Options::*member;
  };
  const Field fields[] = {
      {"connect_timeout", &Options::connect_timeout}, {"command_timeout", &Options::command_timeout},
      {"retry_delay", &Options::retry_delay},         {"retry_jitter", &Options::retry_jitter},
      {"drift_constant", &Options::drift_constant},   {"restart_quarantine", &Options::restart_quarantine},
  };
  for (const Field& f : fields) {
    Options o;
    o.masters = {Endpoint::parse("redis://127.0.0.1:7001")};
    INFO(f.name);
    o.*f.member = bound;
    CHECK_NOTHROW(o.validate());
    o.*f.member = bound + 1ms;
    CHECK_THROWS_AS(o.validate(), std::invalid_argument);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(f.name) && Catch::Contains("at most"));
  }
}

// quorum::drift and valid_until add option values without checks; the bound
// in validate() is what keeps them from overflowing (run under UBSan too).
TEST_CASE("no drift_constant that validate() accepts makes a validity longer than the ttl", "[options]") {
  constexpr auto int64_max = std::numeric_limits<std::int64_t>::max();
  const milliseconds constants[] = {
      milliseconds{std::numeric_limits<std::int32_t>::max()},
      milliseconds{std::numeric_limits<std::int32_t>::max()} + 1ms,
      milliseconds{int64_max / 1000 + 1},  // the first that overflows in microseconds
      milliseconds{int64_max},
  };
  const milliseconds ttls[] = {1ms, 1000ms, milliseconds{std::numeric_limits<std::int32_t>::max()}};
  const auto t0 = std::chrono::steady_clock::time_point{} + 1000h;
  for (milliseconds constant : constants) {
    Options o;
    o.masters = {Endpoint::parse("redis://127.0.0.1:7001")};
    o.drift_factor = 0.999;
    o.drift_constant = constant;
    bool accepted = true;
    try {
      o.validate();
    } catch (const std::invalid_argument&) {
      accepted = false;
    }
    if (!accepted) continue;
    for (milliseconds ttl : ttls) {
      INFO("drift_constant " << constant.count() << " ms, ttl " << ttl.count() << " ms");
      auto drift = quorum::drift(ttl, o.drift_factor, o.drift_constant);
      CHECK(drift.count() >= 0);
      CHECK(quorum::valid_until(t0, ttl, drift) <= t0 + ttl);
      // Client::lock() takes a ttl only when drift < ttl; the largest constant eats every ttl.
      if (constant == milliseconds{std::numeric_limits<std::int32_t>::max()}) CHECK_FALSE(drift < ttl);
    }
  }
}

TEST_CASE("errc values are std::error_codes of the redlock category", "[error]") {
  std::error_code ec = errc::not_held;
  CHECK(ec == errc::not_held);
  CHECK(ec != errc::not_acquired);
  CHECK(ec.category() == category());
  CHECK(std::string(ec.category().name()) == "redlock");
  CHECK(ec.message() == "the lock is no longer held on a quorum");
  CHECK(make_error_code(errc::unavailable).message() == "too few masters reachable to form a quorum");
  CHECK(static_cast<int>(errc::not_acquired) == 1);
}

TEST_CASE("Result holds a value or an error", "[error]") {
  Result<int> ok = 7;
  CHECK(ok);
  CHECK(*ok == 7);
  CHECK_FALSE(ok.error());
  Result<int> bad = make_error_code(errc::timeout);
  CHECK_FALSE(bad);
  CHECK(bad.error() == errc::timeout);
  CHECK_THROWS_AS(bad.value(), std::system_error);
}

#if !REDLOCK_TEST_TLS
// Built with -Dtls=disabled (scripts/test.sh's no-tls suite): a rediss:// master
// is refused when the Client is constructed, not at its first connect.
TEST_CASE("without TLS built in, a rediss:// master is refused at construction", "[options][tls]") {
  uv_loop_t loop;
  REQUIRE(uv_loop_init(&loop) == 0);
  Options o;
  o.masters = {Endpoint::parse("redis://127.0.0.1:7001"), Endpoint::parse("rediss://127.0.0.1:7002")};
  CHECK_THROWS_WITH(Client(&loop, o), Catch::Contains("built without"));
  o.masters.pop_back();
  { Client plain(&loop, o); }
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}
#endif
