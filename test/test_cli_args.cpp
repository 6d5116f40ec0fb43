// The redlock command without Redis: its argument parser and its output formats.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "status_command.hpp"
#include "support/json.hpp"
#include "wait_line.hpp"

using namespace std::chrono_literals;
using redlock::cli::Environment;
using redlock::cli::help_text;
using redlock::cli::in_cli_words;
using redlock::cli::Invocation;
using redlock::cli::parse;
using redlock::cli::parse_duration;
using redlock::cli::UsageError;
using redlock::cli::Verb;

namespace {

constexpr const char* one_master = "-m";
constexpr const char* uri = "redis://127.0.0.1:7001";

Invocation parse_args(std::vector<std::string> args, const char* env = nullptr) {
  return parse(args, env);
}

// The message of the UsageError that parsing `args` throws ("" if none).
std::string refusal(std::vector<std::string> args, const char* env = nullptr) {
  try {
    parse(args, env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("durations take a number and a unit; a bare number is seconds", "[cli][args]") {
  CHECK(parse_duration("250ms", "--ttl", Verb::run) == 250ms);
  CHECK(parse_duration("10s", "--ttl", Verb::run) == 10s);
  CHECK(parse_duration("2m", "--ttl", Verb::run) == 2min);
  CHECK(parse_duration("1h", "--ttl", Verb::run) == 1h);
  CHECK(parse_duration("0ms", "-w", Verb::run) == 0ms);
  CHECK(parse_duration("2147483647ms", "--ttl", Verb::run) == 2147483647ms);
  // As flock's -w and timeout(1): seconds, and fractions of them.
  CHECK(parse_duration("10", "-w", Verb::run) == 10s);
  CHECK(parse_duration("0.5", "-w", Verb::run) == 500ms);
  CHECK(parse_duration("1.5s", "--ttl", Verb::run) == 1500ms);
  CHECK(parse_duration(".25m", "--ttl", Verb::run) == 15s);
  CHECK(parse_duration("2.", "--ttl", Verb::run) == 2s);
  CHECK(parse_duration("0.0015s", "--ttl", Verb::run) == 2ms);  // to the nearest ms
  CHECK(parse_duration("1.0000000009h", "--ttl", Verb::run) == 1h);

  SECTION("bad durations name the flag") {
    for (const char* bad : {"", "s", ".", ".s", "-5s", "1.5.2s", "10sec", "10 s", "ten", "2147483648ms",
                            "2147483.648", "25d", "99999999999h"}) {
      INFO(bad);
      CHECK_THROWS_AS(parse_duration(bad, "-w", Verb::run), UsageError);
      CHECK_THROWS_WITH(parse_duration(bad, "-w", Verb::run), Catch::StartsWith("-w: "));
    }
  }
}

TEST_CASE("run takes options, RESOURCE, -- and the command", "[cli][args]") {
  Invocation inv = parse_args({"run",
                               "-m",
                               uri,
                               "-m",
                               "redis://127.0.0.1:7002",
                               "-m",
                               "redis://127.0.0.1:7003",
                               "--ttl",
                               "5s",
                               "-w",
                               "2m",
                               "-E",
                               "3",
                               "--kill-after=250ms",
                               "jobs",
                               "--",
                               "echo",
                               "-n",
                               "--",
                               "x"});
  CHECK(inv.verb == Verb::run);
  CHECK(inv.options.masters.size() == 3);
  CHECK(inv.options.masters[1].port == 7002);
  CHECK(inv.ttl == 5s);
  REQUIRE(inv.wait);
  CHECK(*inv.wait == 2min);
  CHECK(inv.conflict_exit == 3);
  CHECK(inv.kill_after == 250ms);
  CHECK(inv.resource == "jobs");
  CHECK(inv.command == std::vector<std::string>{"echo", "-n", "--", "x"});

  SECTION("defaults: wait without end, ttl 30s, conflict status 1") {
    Invocation plain = parse_args({"run", one_master, uri, "jobs", "--", "true"});
    CHECK_FALSE(plain.wait);
    CHECK(plain.ttl == 30s);
    CHECK(plain.conflict_exit == 1);
    CHECK(plain.kill_after == 10s);
  }
  SECTION("-n is a wait of zero") {
    Invocation once = parse_args({"run", "-n", one_master, uri, "jobs", "--", "true"});
    REQUIRE(once.wait);
    CHECK(once.wait->count() == 0);
  }
  SECTION("getopt's bundled and attached forms") {
    Invocation bundled = parse_args({"run", "-nE", "75", one_master, uri, "jobs", "--", "true"});
    REQUIRE(bundled.wait);
    CHECK(bundled.wait->count() == 0);
    CHECK(bundled.conflict_exit == 75);
    Invocation attached = parse_args({"run", "-nvE75", one_master, uri, "jobs", "--", "true"});
    CHECK(attached.conflict_exit == 75);
    CHECK(attached.verbose);
    Invocation waits = parse_args({"run", "-w5s", one_master, uri, "jobs", "--", "true"});
    REQUIRE(waits.wait);
    CHECK(*waits.wait == 5s);
    Invocation seconds = parse_args({"run", "-w", "10", one_master, uri, "jobs", "--", "true"});
    CHECK(*seconds.wait == 10s);
  }
  SECTION("the options every command takes may come before it") {
    Invocation early = parse_args({one_master, uri, "--ttl=1m", "run", "jobs", "--", "true"});
    CHECK(early.verb == Verb::run);
    CHECK(early.options.masters.size() == 1);
    CHECK(early.ttl == 1min);
    Invocation status = parse_args({"--key-prefix", "app:", one_master, uri, "status"});
    CHECK(status.verb == Verb::status);
    CHECK(status.options.key_prefix == "app:");
  }
  SECTION("options may follow RESOURCE") {
    Invocation late = parse_args({"run", "jobs", one_master, uri, "--ttl=1m", "--", "true"});
    CHECK(late.resource == "jobs");
    CHECK(late.ttl == 1min);
  }
}

TEST_CASE("the Options flags reach Options", "[cli][args]") {
  Invocation inv = parse_args({"status", one_master, uri, "--connect-timeout", "1s", "--command-timeout",
                               "80ms", "--key-prefix", "app:", "--quarantine", "2m", "--json", "a", "b"});
  CHECK(inv.verb == Verb::status);
  CHECK(inv.options.connect_timeout == 1s);
  CHECK(inv.options.command_timeout == 80ms);
  CHECK(inv.options.key_prefix == "app:");
  CHECK(inv.options.restart_quarantine == 2min);
  CHECK(inv.json);
  CHECK(inv.resources == std::vector<std::string>{"a", "b"});
}

TEST_CASE("the TLS flags reach Options::tls, and rediss:// masters parse", "[cli][args][tls]") {
  Invocation inv = parse_args({"acquire", "-m", "rediss://127.0.0.1:7001", "--tls-ca", "/etc/ca.pem",
                               "--tls-cert", "/etc/c.pem", "--tls-key", "/etc/c.key", "--tls-server-name",
                               "redis.internal", "--tls-insecure", "jobs"});
  REQUIRE(inv.options.masters.size() == 1);
  CHECK(inv.options.masters[0].tls);
  CHECK(inv.options.tls.ca_file == "/etc/ca.pem");
  CHECK(inv.options.tls.cert_file == "/etc/c.pem");
  CHECK(inv.options.tls.key_file == "/etc/c.key");
  CHECK(inv.options.tls.server_name == "redis.internal");
  CHECK_FALSE(inv.options.tls.verify_peer);
  CHECK(parse_args({"acquire", one_master, uri, "jobs"}).options.tls.verify_peer);
}

TEST_CASE("masters come from -m, else from REDLOCK_MASTERS", "[cli][args]") {
  const char* env = "redis://127.0.0.1:7001, redis://127.0.0.1:7002,,unix:///tmp/r.sock";
  Invocation from_env = parse_args({"acquire", "jobs"}, env);
  REQUIRE(from_env.options.masters.size() == 3);
  CHECK(from_env.options.masters[2].unix_socket == "/tmp/r.sock");

  Invocation from_flag = parse_args({"acquire", "-m", "redis://127.0.0.1:9000", "jobs"}, env);
  REQUIRE(from_flag.options.masters.size() == 1);
  CHECK(from_flag.options.masters[0].port == 9000);

  CHECK(refusal({"acquire", "jobs"}) == "no masters: give -m URI or set REDLOCK_MASTERS");
  CHECK(refusal({"acquire", "jobs"}, "") == "no masters: give -m URI or set REDLOCK_MASTERS");
  CHECK_THAT(refusal({"acquire", "jobs"}, "redis://127.0.0.1:7001,http://x"),
             Catch::StartsWith("REDLOCK_MASTERS: invalid redis URI 'http://x'"));
}

TEST_CASE("acquire, extend and release take their positionals", "[cli][args]") {
  Invocation acquire = parse_args({"acquire", one_master, uri, "--ttl", "1m", "-w", "5s", "jobs"});
  CHECK(acquire.verb == Verb::acquire);
  CHECK(acquire.resource == "jobs");
  CHECK(acquire.ttl == 1min);

  Invocation extend = parse_args({"extend", one_master, uri, "jobs", "abc123", "--ttl", "2m"});
  CHECK(extend.verb == Verb::extend);
  CHECK(extend.value == "abc123");
  CHECK(extend.ttl == 2min);

  Invocation release = parse_args({"release", one_master, uri, "jobs", "abc123"});
  CHECK(release.verb == Verb::release);
  CHECK(release.resource == "jobs");
  CHECK(release.value == "abc123");
}

TEST_CASE("help and version", "[cli][args]") {
  CHECK(parse_args({"--help"}).verb == Verb::help);
  CHECK(parse_args({"-h"}).help_for == Verb::help);
  CHECK(parse_args({"--version"}).verb == Verb::version);
  for (Verb v : {Verb::run, Verb::acquire, Verb::extend, Verb::release, Verb::status}) {
    const char* names[] = {"run", "acquire", "extend", "release", "status"};
    const char* name = names[static_cast<int>(v)];
    INFO(name);
    // --help wins over anything else on the line, even without masters.
    Invocation inv = parse_args({name, "--help", "--bogus"});
    CHECK(inv.verb == Verb::help);
    CHECK(inv.help_for == v);
    CHECK(parse_args({"help", name}).help_for == v);
    std::string text = redlock::cli::help_text(v);
    CHECK_THAT(text, Catch::StartsWith(redlock::cli::usage_line(v)));
    CHECK_THAT(text, Catch::Contains("75   run: the lock was lost"));
  }
  // `help --help` asks for the general help, as `help` does.
  CHECK(parse_args({"help", "--help"}).verb == Verb::help);
  CHECK(parse_args({"help", "-h"}).help_for == parse_args({"help"}).help_for);
}

TEST_CASE("bad input is one line naming what is wrong", "[cli][args]") {
  struct Case {
    std::vector<std::string> args;
    std::string message;
    Verb usage;
  };
  const std::vector<Case> cases = {
      {{}, "no command given", Verb::help},
      {{"lock", "x"}, "unknown command 'lock'", Verb::help},
      {{"--bogus"}, "unknown option '--bogus'", Verb::help},
      {{"help", "nope"}, "unknown command 'nope'", Verb::help},
      {{"run", "-m", uri, "--bogus", "jobs", "--", "true"},
       "unknown option '--bogus' for 'redlock run'",
       Verb::run},
      {{"release", "-m", uri, "--ttl", "1s", "a", "b"},
       "unknown option '--ttl' for 'redlock release'",
       Verb::release},
      {{"status", "-m", uri, "-n"}, "unknown option '-n' for 'redlock status'", Verb::status},
      {{"run", "-m", uri, "jobs", "true"}, "missing '--' before the command", Verb::run},
      {{"run", "-m", uri, "jobs"}, "missing '--' before the command", Verb::run},
      {{"run", "-m", uri, "jobs", "--"}, "missing the command after '--'", Verb::run},
      {{"run", "-m", uri, "--", "true"}, "missing RESOURCE", Verb::run},
      {{"run", "-m", uri, "", "--", "true"}, "RESOURCE must not be empty", Verb::run},
      {{"run", "-m", "http://x", "jobs", "--", "true"},
       "invalid redis URI 'http://x': expected redis://",
       Verb::run},
      {{"run", "-m", uri, "-m", uri, "jobs", "--", "true"}, "duplicate", Verb::run},
      {{"run", "-m", uri, "-nE"}, "option --conflict-exit-code needs a value", Verb::run},
      {{"run", "-m", uri, "-nE", "jobs"}, "-E wants an exit status from 0 to 255, not 'jobs'", Verb::run},
      {{"run", "-m", uri, "-nx", "jobs", "--", "true"}, "unknown option '-x' for 'redlock run'", Verb::run},
      {{"-m", uri, "frobnicate"}, "unknown command 'frobnicate'", Verb::help},
      {{"run", "-m", uri, "--ttl", "0s", "jobs", "--", "true"}, "--ttl must be more than 0ms", Verb::run},
      {{"run", "-m", uri, "-w"}, "option --wait needs a value", Verb::run},
      {{"run", "-m", uri, "-n", "-w", "1s", "jobs", "--", "true"},
       "-n and -w cannot be used together",
       Verb::run},
      {{"run", "-m", uri, "-E", "256", "jobs", "--", "true"},
       "-E wants an exit status from 0 to 255, not '256'",
       Verb::run},
      {{"run", "-m", uri, "--nonblock=yes", "jobs", "--", "true"},
       "option --nonblock takes no value",
       Verb::run},
      {{"run", "-m", uri, "--quarantine", "1s", "--ttl", "5s", "jobs", "--", "true"},
       "--ttl must not exceed --quarantine",
       Verb::run},
      {{"run", "-m", uri, "--command-timeout", "0ms", "jobs", "--", "true"},
       "--command-timeout must be more than 0ms",
       Verb::run},
      {{"run", "-m", uri, "--connect-timeout", "0s", "jobs", "--", "true"},
       "--connect-timeout must be more than 0ms",
       Verb::run},
      {{"run", "-m", uri, "--shared", "--permits", "2", "jobs", "--", "true"},
       "--shared and --permits cannot be used together",
       Verb::run},
      {{"run", "-m", uri, "--permits", "0", "jobs", "--", "true"},
       "--permits wants a number from 1 to 10000, not '0'",
       Verb::run},
      {{"run", "-m", uri, "--permits", "10001", "jobs", "--", "true"},
       "--permits wants a number from 1 to 10000, not '10001'",
       Verb::run},
      {{"run", "-m", uri, "--also", "b", "--shared", "a", "--", "true"},
       "--also goes with neither --shared nor --permits",
       Verb::run},
      {{"run", "-m", uri, "--also", "", "a", "--", "true"}, "--also must not be empty", Verb::run},
      {{"run", "-m", uri, "--elect", "--shared", "a", "--", "true"},
       "--elect goes with none of --shared, --permits, --also",
       Verb::run},
      {{"leader", "-m", uri}, "missing NAME", Verb::leader},
      {{"leader", "-m", uri, "a", "b"}, "unexpected argument 'b'", Verb::leader},
      {{"acquire", "-m", uri, "--permits", "2", "jobs"},
       "unknown option '--permits' for 'redlock acquire'",
       Verb::acquire},
      {{"acquire", "-m", uri}, "missing RESOURCE", Verb::acquire},
      {{"acquire", "-m", uri, "a", "b"}, "unexpected argument 'b'", Verb::acquire},
      {{"acquire", "-m", uri, "a", "--", "b"}, "unexpected '--'", Verb::acquire},
      {{"extend", "-m", uri, "a"}, "missing VALUE", Verb::extend},
      {{"release", "-m", uri}, "missing RESOURCE and VALUE", Verb::release},
      {{"release", "-m", uri, "a", ""}, "VALUE must not be empty", Verb::release},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    INFO(joined);
    try {
      parse(c.args, nullptr);
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK_THAT(e.what(), Catch::Contains(c.message));
      CHECK(e.verb == c.usage);
      CHECK(std::string(e.what()).find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("the tests' JSON reader reads JSON and refuses the rest", "[cli][json]") {
  using redlock::test::Json;
  Json j = Json::parse(R"( {"a": [1, -2.5e1, true, false, null], "b": {"c": "x\"\\\n\u0041"}, "d": []} )");
  CHECK(j["a"][0].number == 1);
  CHECK(j["a"][1].number == -25);
  CHECK(j["a"][2].boolean);
  CHECK_FALSE(j["a"][3].boolean);
  CHECK(j["a"][4].is_null());
  CHECK(j["b"]["c"].string == "x\"\\\nA");
  CHECK(j["d"].array.empty());
  CHECK_THROWS(j["missing"]);
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "tru", "\"open", "{} x", "{'a':1}"}) {
    INFO(bad);
    CHECK_THROWS(Json::parse(bad));
  }
}

namespace {

// Three masters, the second unreachable; "jobs" held on two by "abcdef0123".
redlock::Inspection sample() {
  redlock::Inspection i;
  for (int port : {7001, 7002, 7003}) {
    redlock::MasterReport m;
    m.endpoint = "redis://127.0.0.1:" + std::to_string(port);
    m.reachable = port != 7002;
    if (!m.reachable) m.error = "no answer within 250 ms";
    m.role = "master";
    m.uptime = std::chrono::seconds{3700};
    m.maxmemory_policy = port == 7003 ? "allkeys-lru" : "noeviction";
    m.round_trip = std::chrono::microseconds{250};
    redlock::KeyReport key;
    if (m.reachable) {
      key.present = true;
      key.value = "abcdef0123";
      key.ttl = port == 7001 ? 9000ms : 8000ms;
    }
    m.keys.push_back(key);
    i.masters.push_back(m);
  }
  redlock::ResourceReport r;
  r.resource = "jobs";
  r.value = "abcdef0123";
  r.holders = 2;
  r.quorum = true;
  r.ttl = 8000ms;
  r.mode = "exclusive";
  i.resources.push_back(r);
  return i;
}

}  // namespace

TEST_CASE("status text and JSON say the same thing", "[cli][status]") {
  redlock::Inspection i = sample();
  std::string text = redlock::cli::status_text(i);
  CHECK_THAT(text, Catch::StartsWith("masters: 2 of 3 voting, a quorum is 2\n"));
  CHECK_THAT(text, Catch::Contains(
                       "redis://127.0.0.1:7001  master, up 61m, rtt 0.25ms, maxmemory-policy noeviction\n"));
  CHECK_THAT(text, Catch::Contains("redis://127.0.0.1:7002  unreachable: no answer within 250 ms\n"));
  CHECK_THAT(text, Catch::Contains("maxmemory-policy allkeys-lru (may evict locks)"));
  // A value that carries no owner (another library's) names the holder.
  CHECK_THAT(text,
             Catch::Contains(
                 "resource jobs: held by abcdef0123 (exclusive), 8.0s left, on 2 of 3 masters, 0 waiting\n"));

  redlock::test::Json j = redlock::test::Json::parse(redlock::cli::status_json(i));
  CHECK(j["quorum"].number == 2);
  CHECK(j["voting"].number == 2);
  CHECK(j["masters"][0]["uptime_s"].number == 3700);
  CHECK(j["masters"][0]["rtt_us"].number == 250);
  CHECK(j["masters"][0]["state"].string == "up");
  CHECK(j["masters"][1]["state"].string == "down");
  CHECK(j["masters"][1]["error"].string == "no answer within 250 ms");
  CHECK(j["resources"][0]["held"].boolean);
  CHECK(j["resources"][0]["masters"][0]["ttl_ms"].number == 9000);
  CHECK(j["resources"][0]["masters"][1]["value"].is_null());
  CHECK(j["resources"][0]["owner"].is_null());
  CHECK(j["resources"][0]["since_unix_ms"].is_null());
  CHECK(j["resources"][0]["fencing_token"].number == 0);

  SECTION("what the masters hold cannot drive the terminal") {
    i.resources[0].value = "abc\x1b]0;pwned\x07";
    i.masters[0].keys[0].value = i.resources[0].value;
    std::string t = redlock::cli::status_text(i);
    CHECK(t.find('\x1b') == std::string::npos);
    CHECK_THAT(t, Catch::Contains("held by abc?]0;pwned? (exclusive)"));
    CHECK(redlock::cli::WaitLine::render(i, 0ms, "jobs").find('\x1b') == std::string::npos);
  }
  SECTION("an owner, since when, the last token and the waiters") {
    i.resources[0].owner = "web-1:4312";
    i.resources[0].since = std::chrono::system_clock::now() - 5000ms;
    i.resources[0].fencing_token = 1764150000123456;
    i.resources[0].waiting = 2;
    std::string t = redlock::cli::status_text(i);
    CHECK_THAT(t, Catch::Contains("resource jobs: held by web-1:4312 (exclusive) for 5."));
    CHECK_THAT(t, Catch::Contains(
                      "s, 8.0s left, on 2 of 3 masters, last fencing token 1764150000123456, 2 waiting\n"));
    redlock::test::Json o = redlock::test::Json::parse(redlock::cli::status_json(i));
    CHECK(o["resources"][0]["owner"].string == "web-1:4312");
    CHECK(o["resources"][0]["held_ms"].number >= 5000);
    CHECK(o["resources"][0]["held_ms"].number < 60000);
    CHECK(o["resources"][0]["waiting"].number == 2);
    CHECK(o["resources"][0]["fencing_token"].number == 1764150000123456.0);
    CHECK(redlock::cli::WaitLine::render(i, 1000ms, "jobs") ==
          "redlock: waiting 1.0s for 'jobs': held by web-1:4312 on 2 of 3 masters, 8.0s left");
  }
  SECTION("a quarantined master does not vote, and names are escaped") {
    i.masters[0].quarantined = true;
    i.masters[0].quarantine_left = 1500ms;
    i.resources[0].resource = "a \"quoted\"\\name\n";
    CHECK_THAT(redlock::cli::status_text(i), Catch::Contains("in restart quarantine for 1.5s"));
    redlock::test::Json q = redlock::test::Json::parse(redlock::cli::status_json(i));
    CHECK(q["voting"].number == 1);
    CHECK(q["masters"][0]["state"].string == "quarantined");
    CHECK(q["resources"][0]["resource"].string == "a \"quoted\"\\name\n");
  }
}

TEST_CASE("the wait line names the holder, its time left and the time waited", "[cli][status]") {
  redlock::Inspection i = sample();
  CHECK(redlock::cli::WaitLine::render(i, 2300ms, "jobs") ==
        "redlock: waiting 2.3s for 'jobs': held by abcdef0123 on 2 of 3 masters, 8.0s left");
  i.resources[0].holders = 0;
  CHECK(redlock::cli::WaitLine::render(i, 0ms, "jobs") == "redlock: waiting 0.0s for 'jobs': free");
  i.masters[0].reachable = false;
  CHECK(redlock::cli::WaitLine::render(i, 1000ms, "jobs") ==
        "redlock: waiting 1.0s for 'jobs': only 1 of 3 masters answer");
}

TEST_CASE("a password from --password-file or REDLOCK_PASSWORD, for masters whose URI has none",
          "[cli][args]") {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/redlock-pw-" + std::to_string(::getpid());
  {
    std::ofstream file(path);
    file << "from-file\nsecond line\n";
  }
  Environment env{nullptr, "from-env"};
  Invocation from_env = parse({"status", "-m", uri, "-m", "redis://:own@127.0.0.1:7002"}, env);
  CHECK(from_env.options.masters[0].password == "from-env");
  CHECK(from_env.options.masters[1].password == "own");
  Invocation from_file = parse({"status", "-m", uri, "--password-file", path}, env);
  CHECK(from_file.options.masters[0].password == "from-file");
  CHECK_THROWS_WITH(parse({"status", "-m", uri, "--password-file", path + ".missing"}, env),
                    Catch::StartsWith("--password-file: cannot read"));
  std::remove(path.c_str());
}

TEST_CASE("each command's help lists exactly the options it takes", "[cli][args]") {
  const std::vector<std::string> names = {"ttl",
                                          "nonblock",
                                          "wait",
                                          "conflict-exit-code",
                                          "kill-after",
                                          "fencing",
                                          "json",
                                          "verbose",
                                          "master",
                                          "connect-timeout",
                                          "command-timeout",
                                          "key-prefix",
                                          "quarantine",
                                          "password-file",
                                          "tls-ca",
                                          "tls-cert",
                                          "tls-key",
                                          "tls-server-name",
                                          "tls-insecure",
                                          "shared",
                                          "permits",
                                          "also",
                                          "elect",
                                          "watch"};
  for (Verb verb : {Verb::run, Verb::acquire, Verb::extend, Verb::release, Verb::status, Verb::leader}) {
    std::string help = help_text(verb);
    std::string verb_name = help.substr(std::string("usage: redlock ").size());
    verb_name = verb_name.substr(0, verb_name.find(' '));
    for (const std::string& name : names) {
      bool accepted = true;
      try {
        parse({verb_name, "--" + name + "=1s"}, nullptr);
      } catch (const UsageError& e) {
        accepted = std::string(e.what()).find("unknown option") == std::string::npos;
      }
      INFO(verb_name << " --" << name);
      CHECK(accepted == (help.find("--" + name + " ") != std::string::npos ||
                         help.find("--" + name + "\n") != std::string::npos ||
                         help.find("--" + name + ",") != std::string::npos));
    }
  }
}

TEST_CASE("the library's TLS option names are said as the command's flags", "[cli][args]") {
  CHECK(in_cli_words("redlock::Options: tls.ca_file '/x' cannot be used: no such file") ==
        "--tls-ca '/x' cannot be used: no such file");
  CHECK(in_cli_words("tls.cert_file and tls.key_file go together") == "--tls-cert and --tls-key go together");
  CHECK(in_cli_words("handshake failed (is its CA in TlsOptions::ca_file?)") ==
        "handshake failed (is its CA in --tls-ca?)");
  CHECK(in_cli_words("NOAUTH (the server wants a password: give it in the URI, redis://:password@host)") ==
        "NOAUTH (the server wants a password: set REDLOCK_PASSWORD or give --password-file FILE)");
}
