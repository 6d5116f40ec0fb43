// Regression tests for issue 7 item 11: a master that speaks bad RESP (a
// FakeMaster), usually next to two honest redis-servers (N = 3), so that the
// honest pair shows the Client still works while the fake misbehaves.

#include <catch2/catch.hpp>

#include <redlock/client.hpp>

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define REDLOCK_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REDLOCK_TEST_ASAN 1
#endif
#endif
#ifdef REDLOCK_TEST_ASAN
// The sanitizer runtime's count of live heap bytes (GCC ships no
// <sanitizer/allocator_interface.h> to declare it).
extern "C" std::size_t __sanitizer_get_current_allocated_bytes();
#else
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scripts.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fake_master.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Argv = FakeMaster::Argv;
using steady = std::chrono::steady_clock;

namespace {

// What Options::diagnostics said, in order (called on the loop thread, which
// is the test's thread here).
struct Said {
  std::vector<std::string> lines;

  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) { lines.emplace_back(line); };
  }
  std::size_t mentioning(std::string_view text) const {
    return static_cast<std::size_t>(std::count_if(
        lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; }));
  }
  std::string all() const {
    std::string out = std::to_string(lines.size()) + " diagnostic(s):";
    for (const auto& l : lines) out += "\n  " + l;
    return out;
  }
};

bool is_script(const Argv& argv, const Script& script) {
  return is_command(argv, "EVALSHA") && argv.size() > 1 && argv[1] == script.sha1;
}

// What a healthy master would answer, as far as the fake can tell without
// storing anything: the handshake, SET NX granted, every script 1.
std::optional<std::string> healthy(const FakeMaster& fake, const Argv& argv) {
  if (auto answer = fake.handshake(argv)) return answer;
  if (is_command(argv, "SET")) return resp::status("OK");
  if (is_command(argv, "EVALSHA") || is_command(argv, "EVAL")) return resp::integer(1);
  return resp::error("ERR the fake does not know this command");
}

// N = 3: the fake first, then the two honest servers; one attempt per call.
Options fake_and_two(const FakeMaster& fake, Cluster& honest, Said& said) {
  Options options;
  options.masters = {fake.endpoint(), honest[0].endpoint(), honest[1].endpoint()};
  options.retry_count = 0;
  // Generous: the honest pair must answer every call, even on a loaded machine
  // (one call in a thousand missed 50 ms there); the faults tested here are
  // the fake's replies, not its speed.
  options.command_timeout = 1s;
  options.diagnostics = said.sink();
  return options;
}

// Heap bytes in use by the whole process (every thread, the fake's too).
// Neither RSS, which keeps freed pages, nor under ASan, whose quarantine
// keeps freed chunks resident.
std::size_t heap_in_use() {
#ifdef REDLOCK_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

constexpr std::size_t MiB = std::size_t{1} << 20;

// The start of a bulk string far larger than anything we ask for, and 16 MB of it.
std::string huge_bulk_start() {
  return "$100000000\r\n" + std::string(16 * MiB, 'x');
}

}  // namespace

TEST_CASE("an aggregate announcing more elements than any reply has is a protocol error, not an allocation",
          "[hostile]") {
  // (a) The count came from the master: sizing memory from it threw
  // std::bad_alloc (2^31-1), or cost 72 MB and a loop stall per reply (a million).
  std::string header;
  SECTION("2^31-1 elements") {
    header = "*2147483647\r\n";
  }
  SECTION("a million elements") {
    header = "*1000000\r\n";
  }
  Cluster honest(2);
  FakeMaster fake;
  fake.set_script([&fake, header](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "SET")) return header;
    return healthy(fake, argv);
  });
  LoopFixture loop;
  Said said;
  {
    Client client(loop.get(), fake_and_two(fake, honest, said));
    // All loop work happens inside the calls, so a stall shows in their
    // time. Ten local calls take a few ms; before, the million-element
    // header cost about 440 ms here.
    auto start = steady::now();
    for (int i = 0; i < 10; ++i) {
      CHECK_FALSE(try_lock(loop, client, "aggregate" + std::to_string(i), 10s).error);  // the honest pair
    }
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start);
    CHECK(took.count() < scaled(150ms).count());
    // The fake's connection was dropped and made again.
    CHECK(loop.run_until([&] { return fake.connections_accepted() >= 2; }, 2s));
    INFO(said.all());
    CHECK(said.mentioning("protocol error") >= 1);
    CHECK(said.mentioning("aggregate") >= 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a reply of a type its command never gets is a failed vote, not a yes", "[hostile]") {
  // (b) Each case has one honest yes and one honest no: the fake's
  // wrong-shaped answer would be the deciding yes.
  std::string bad_set;
  std::string bad_extend;
  std::string bad_unlock;
  SECTION("SET NX answered :1") {
    bad_set = resp::integer(1);
  }
  SECTION("the extend script answered :2 (it answers 0 or 1)") {
    bad_extend = resp::integer(2);
  }
  SECTION("the unlock script answered +OK") {
    bad_unlock = resp::status("OK");
  }
  Cluster honest(2);
  FakeMaster fake;
  fake.set_script([&fake, bad_set, bad_extend, bad_unlock](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "SET") && !bad_set.empty()) return bad_set;
    if (is_script(argv, scripts::extend) && !bad_extend.empty()) return bad_extend;
    bool unlock = is_script(argv, scripts::unlock) || is_script(argv, scripts::unlock_and_wake);
    if (unlock && !bad_unlock.empty()) return bad_unlock;
    return healthy(fake, argv);
  });
  LoopFixture loop;
  Said said;
  {
    Client client(loop.get(), fake_and_two(fake, honest, said));
    if (!bad_set.empty()) {
      honest[0].set("{contested}", "someone-else", 10s);
      Answer a = try_lock(loop, client, "contested", 10s);
      CHECK(a.error == errc::not_acquired);  // one yes (honest[1]) of three
      CHECK(honest[0].get("{contested}") == "someone-else");
    } else {
      Answer a = try_lock(loop, client, "held", 10s);
      REQUIRE_FALSE(a.error);
      // The round may have decided before honest[0] ran its SET: wait for it,
      // or the DEL could come first.
      REQUIRE(eventually([&] { return honest[0].get("{held}") == a.lock.value; }));
      honest[0].command({"DEL", "{held}"});  // honest[0] now answers 0, honest[1] still 1
      if (!bad_extend.empty()) {
        CHECK(extend(loop, client, a.lock, 10s).error == errc::not_held);
      } else {
        CHECK(unlock(loop, client, a.lock) == errc::not_held);
      }
    }
    INFO(said.all());
    CHECK(said.mentioning("protocol error") >= 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master that answers NOSCRIPT to everything gets one EVAL per command, not an endless loop",
          "[hostile]") {
  // (c)
  Cluster honest(2);
  FakeMaster fake;
  fake.set_script([&fake](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "EVALSHA") || is_command(argv, "EVAL")) {
      return resp::error("NOSCRIPT No matching script. Please use EVAL.");
    }
    return healthy(fake, argv);
  });
  LoopFixture loop;
  Said said;
  constexpr int calls = 50;
  {
    Client client(loop.get(), fake_and_two(fake, honest, said));
    Answer a = try_lock(loop, client, "scripted", 30s);
    REQUIRE_FALSE(a.error);
    int failed = 0;
    for (int i = 0; i < calls; ++i) {
      failed += extend(loop, client, a.lock, 30s).error ? 1 : 0;
      // The re-run goes out only when nothing was written after the command.
      // The honest pair answers first; without this pause the next call is
      // written before the NOSCRIPT reply is read, whenever the fake is slow.
      if (i == 0) REQUIRE(loop.run_until([&] { return fake.commands("EVAL") >= 1; }, 2s));
    }
    CHECK(failed == 0);  // every call answered, by the honest pair
    // Room for a re-send loop to show itself, had there been one.
    loop.run_until([] { return false; }, 300ms);
    CHECK(fake.commands("EVALSHA") == calls);
    CHECK(fake.commands("EVAL") <= calls);
    INFO(said.all());
    CHECK(said.mentioning("NOSCRIPT") >= 1);
    CHECK(said.mentioning("NOSCRIPT") <= static_cast<std::size_t>(calls));
  }
  REQUIRE(loop.close());
}

TEST_CASE("bytes no command waits for, or more than any reply, drop the connection instead of growing memory",
          "[hostile]") {
  // (d)
  Cluster honest(2);
  FakeMaster fake;
  std::atomic<bool> huge_reply{false};  // the next SET gets huge_bulk_start(), once
  fake.set_script([&fake, &huge_reply](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "SET") && huge_reply.exchange(false)) return huge_bulk_start();
    return healthy(fake, argv);
  });
  LoopFixture loop;
  Said said;
  {
    Options options = fake_and_two(fake, honest, said);
    // A reply cut off by its deadline is not what is tested here.
    options.command_timeout = 10s;
    Client client(loop.get(), options);
    // honest[1] says no, so the round waits for the fake's yes: once it is
    // answered, the fake's connection has nothing left to answer.
    honest[1].set("{warm}", "someone-else", 30s);
    REQUIRE_FALSE(try_lock(loop, client, "warm", 10s).error);
    REQUIRE(fake.connections_accepted() == 1);
    std::size_t before = heap_in_use();

    SECTION("unsolicited bytes while idle") {
      fake.push(huge_bulk_start());
    }
    SECTION("a reply larger than any we ask for") {
      huge_reply = true;
      CHECK_FALSE(try_lock(loop, client, "big", 10s).error);  // the honest pair
    }
    // Dropped well before command_timeout, and what was read went with it
    // (16 MB were sent; the fake frees its copy once its write ends).
    CHECK(loop.run_until([&] { return fake.connections_accepted() >= 2; }, 2s));
    CHECK(loop.run_until([&] { return heap_in_use() < before + 4 * MiB; }, 2s));
    INFO("heap grew by " << (static_cast<long long>(heap_in_use()) - static_cast<long long>(before))
                         << " bytes");
    INFO(said.all());
    CHECK(said.mentioning("protocol error") >= 1);
    CHECK_FALSE(try_lock(loop, client, "after", 10s).error);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an uptime_in_seconds out of bounds counts as just restarted under restart_quarantine",
          "[hostile]") {
  // (e) N = 1, the fake only: it votes or the call is unavailable. Before,
  // 2^63-1 overflowed (UBSan), and values that overflow to a large uptime, or
  // a number with junk after it, let a master vote at once.
  std::string uptime;
  bool wait_it_out = false;
  SECTION("2^63-1") {
    uptime = "9223372036854775807";
    wait_it_out = true;
  }
  SECTION("seconds whose milliseconds overflow to about 31 years") {
    uptime = "18446745073709551";
  }
  SECTION("more digits than a long long") {
    uptime = "99999999999999999999";
  }
  SECTION("a number followed by junk") {
    uptime = "12abc";
  }
  SECTION("negative") {
    uptime = "-5";
  }
  FakeMaster fake;
  fake.set_info_field("uptime_in_seconds", uptime);
  fake.set_script([&fake](const Argv& argv) { return healthy(fake, argv); });
  LoopFixture loop;
  Said said;
  {
    Options options;
    options.masters = {fake.endpoint()};
    options.retry_count = 0;
    options.restart_quarantine = 1000ms;
    options.diagnostics = said.sink();
    auto started = steady::now();
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "uptime", 1000ms);
    CHECK(a.error == errc::unavailable);
    CHECK(fake.commands("SET") == 1);  // it was asked, and said OK
    INFO(said.all());
    CHECK(said.mentioning("uptime_in_seconds") >= 1);
    if (wait_it_out) {
      // Just restarted, not never: it votes once quarantine + 1 s have passed.
      bool acquired = false;
      for (int i = 0; i < 200 && !acquired && steady::now() - started < scaled(6s); ++i) {
        acquired = !try_lock(loop, client, "uptime", 1000ms).error;
        if (!acquired) loop.run_until([] { return false; }, 20ms);
      }
      CHECK(acquired);
      CHECK(steady::now() - started >= 2000ms);
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("with a real uptime the fake votes at once under restart_quarantine (control for the test above)",
          "[hostile]") {
  FakeMaster fake;  // uptime_in_seconds 100000
  fake.set_script([&fake](const Argv& argv) { return healthy(fake, argv); });
  LoopFixture loop;
  {
    Options options;
    options.masters = {fake.endpoint()};
    options.retry_count = 0;
    options.restart_quarantine = 1000ms;
    Client client(loop.get(), options);
    CHECK_FALSE(try_lock(loop, client, "uptime", 1000ms).error);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a master that completes the handshake and then breaks every command is reconnected with backoff",
          "[hostile]") {
  // (f) A completed handshake proves nothing: before, it reset the backoff,
  // and each failed command cost a new connection at once.
  std::string bad;
  SECTION("garbage") {
    bad = "!!!\r\n";
  }
  SECTION("a reply of the wrong type") {
    bad = resp::integer(1);
  }
  Cluster honest(2);
  FakeMaster fake;
  fake.set_script([&fake, bad](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "SET")) return bad;
    return healthy(fake, argv);
  });
  LoopFixture loop;
  Said said;
  {
    Client client(loop.get(), fake_and_two(fake, honest, said));
    auto start = steady::now();
    int calls = 0;
    int failed = 0;
    // A steady stream of calls, one every few milliseconds, for 2.5 s.
    while (steady::now() - start < 2500ms && calls < 2500) {
      failed += try_lock(loop, client, "backoff" + std::to_string(calls), 2s).error ? 1 : 0;
      ++calls;
      loop.run_until([] { return false; }, 2ms);
    }
    CHECK(failed == 0);  // the honest pair
    INFO(calls << " calls, " << fake.connections_accepted() << " connections, " << fake.commands("SET")
               << " SETs reached the fake");
    CHECK(fake.connections_accepted() >= 4);  // it was dropped, again and again
    CHECK(fake.connections_accepted() < 30);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a refused handshake is said once per change, not once per reconnect", "[hostile]") {
  // (i) N = 1 with no calls: the Client reconnects on its own.
  std::atomic<int> auths{0};
  FakeMaster fake;
  LoopFixture loop;
  Said said;
  Options options;
  options.masters = {fake.endpoint()};
  std::size_t expected_lines = 1;
  std::size_t connections = 4;
  std::string what;
  SECTION("AUTH answered with an error reply") {
    options.masters[0].password = "secret";
    fake.set_script([&fake](const Argv& argv) -> std::optional<std::string> {
      if (is_command(argv, "AUTH")) return resp::error("WRONGPASS invalid username-password pair");
      return healthy(fake, argv);
    });
    what = "WRONGPASS";
  }
  SECTION("SCRIPT LOAD answered with garbage") {
    fake.set_script([&fake](const Argv& argv) -> std::optional<std::string> {
      if (is_command(argv, "SCRIPT")) return std::string("!!!\r\n");
      return healthy(fake, argv);
    });
    what = "protocol error";
  }
  SECTION("SCRIPT LOAD answered with the wrong type") {
    fake.set_script([&fake](const Argv& argv) -> std::optional<std::string> {
      if (is_command(argv, "SCRIPT")) return resp::status("OK");
      return healthy(fake, argv);
    });
    what = "protocol error";
  }
  SECTION("a refusal that changes is said again, once") {
    options.masters[0].password = "secret";
    fake.set_script([&fake, &auths](const Argv& argv) -> std::optional<std::string> {
      if (is_command(argv, "AUTH")) {
        return ++auths <= 3 ? resp::error("WRONGPASS invalid username-password pair")
                            : resp::error("NOPERM this user has no permissions to run 'auth'");
      }
      return healthy(fake, argv);
    });
    what = "NOPERM";
    expected_lines = 2;
    connections = 6;
  }
  options.diagnostics = said.sink();
  {
    Client client(loop.get(), options);
    CHECK(loop.run_until([&] { return fake.connections_accepted() >= connections; }, 5s));
    INFO(said.all());
    CHECK(said.lines.size() == expected_lines);
    CHECK(said.mentioning(what) == 1);
  }
  REQUIRE(loop.close());
}
