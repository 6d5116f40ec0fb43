#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "resolver.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/hanging_resolver.hpp"
#include "support/loop.hpp"

// Masters addressed by name while the DNS of some names hangs. This
// executable links support/hanging_resolver.cpp: every getaddrinfo call in it
// goes through the interposer, and names ending in ".hang.test" block until
// the test's HangingNames releases them. Each test uses names of its own, so
// a lookup left over from an earlier test cannot skew its counts.

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

Endpoint by_name(const std::string& host, int port = 6379) {
  Endpoint e;
  e.host = host;
  e.port = port;
  return e;
}

void run_for(LoopFixture& loop, std::chrono::milliseconds how_long) {
  static_cast<void>(loop.run_until([] { return false; }, how_long));
}

// Releases the hanging names after `after` (scaled) unless stopped first: a
// destructor that waits for the lookups then fails the test by its duration
// instead of waiting for the interposer's 30 s cap.
class ReleaseLater {
 public:
  ReleaseLater(HangingNames& names, std::chrono::milliseconds after)
      : thread_([this, &names, after] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!stopped_changed_.wait_for(lock, scaled(after), [this] { return stopped_; })) names.release();
        }) {}
  ~ReleaseLater() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    stopped_changed_.notify_all();
    thread_.join();
  }
  ReleaseLater(const ReleaseLater&) = delete;
  ReleaseLater& operator=(const ReleaseLater&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable stopped_changed_;
  bool stopped_ = false;  // guarded by mutex_
  std::thread thread_;    // last: it starts once the members above exist
};

}  // namespace

TEST_CASE("a lookup answers on the loop thread, on a later turn", "[dns][lookup]") {
  HangingNames names;
  LoopFixture loop;
  int calls = 0;
  int status = -1;
  Addresses found;
  std::thread::id called_on;
  {
    auto lookup = Lookup::start(loop.get(), "localhost", 6379, [&](int s, Addresses a) {
      ++calls;
      status = s;
      found = std::move(a);
      called_on = std::this_thread::get_id();
    });
    REQUIRE(lookup);
    REQUIRE(eventually([&] { return names.calls("localhost") == 1 && names.in_flight("localhost") == 0; }));
    CHECK(calls == 0);
    REQUIRE(loop.run_until([&] { return calls > 0; }, 2s));
    run_for(loop, 20ms);
  }
  CHECK(calls == 1);
  CHECK(status == 0);
  CHECK_FALSE(found.empty());
  CHECK(called_on == std::this_thread::get_id());
  REQUIRE(loop.close());
}

TEST_CASE("an abandoned lookup never calls back, and its thread ends on its own", "[dns][lookup]") {
  HangingNames names;
  LoopFixture loop;
  bool called = false;
  auto lookup = Lookup::start(loop.get(), "i.hang.test", 6379, [&](int, Addresses) { called = true; });
  REQUIRE(lookup);
  REQUIRE(eventually([&] { return names.in_flight("i.hang.test") == 1; }));

  SECTION("destroyed while getaddrinfo runs") {
    lookup.reset();
    names.release();
    REQUIRE(eventually([&] { return names.in_flight("i.hang.test") == 0; }));
  }
  SECTION("destroyed after the answer came, before the loop ran its callback") {
    // Out of getaddrinfo; the thread may still be on its way to the shared
    // mutex. Either order must drop the answer.
    names.release();
    REQUIRE(eventually([&] { return names.in_flight("i.hang.test") == 0; }));
    lookup.reset();
  }
  run_for(loop, 20ms);
  CHECK_FALSE(called);
  REQUIRE(loop.close());
}

TEST_CASE("masters addressed by name lock while the lookups of two other masters hang", "[dns]") {
  HangingNames names;
  Cluster healthy(3);
  LoopFixture loop;
  {
    Options options;
    // The hanging names come first, so that their lookups start first.
    options.masters = {by_name("a.hang.test"), by_name("b.hang.test")};
    for (std::size_t i = 0; i < healthy.size(); ++i)
      options.masters.push_back(by_name("localhost", healthy[i].port()));
    // Each attempt needs all three healthy votes: 50 ms was too short under a
    // parallel test run. The hanging masters' cycles depend on connect_timeout.
    options.command_timeout = scaled(500ms);
    Client client(loop.get(), options);
    // Spread over about two seconds: several connect_timeout + backoff cycles
    // of the hanging masters, each of which used to start a new lookup.
    for (int i = 0; i < 20; ++i) {
      INFO("attempt " << i);
      Answer a = try_lock(loop, client, "job-" + std::to_string(i), 10s);
      REQUIRE_FALSE(a.error);
      run_for(loop, 100ms);
    }
    CHECK(names.calls("a.hang.test") == 1);
    CHECK(names.calls("b.hang.test") == 1);
    CHECK(names.max_in_flight("a.hang.test") == 1);
    CHECK(names.max_in_flight("b.hang.test") == 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a client destroyed while lookups hang leaves a loop that closes at once", "[dns]") {
  HangingNames names;
  LoopFixture loop;
  {
    Options options;
    options.masters = {by_name("c.hang.test"), by_name("d.hang.test"), by_name("localhost", 1)};
    Client client(loop.get(), options);
    run_for(loop, 50ms);
    REQUIRE(eventually(
        [&] { return names.in_flight("c.hang.test") == 1 && names.in_flight("d.hang.test") == 1; }));
  }
  auto started = steady::now();
  CHECK(loop.close(1s));
  CHECK(steady::now() - started < scaled(500ms));
}

TEST_CASE("a Redlock destroyed while lookups hang returns at once", "[dns]") {
  HangingNames names;
  Cluster healthy(3);
  Options options;
  for (std::size_t i = 0; i < healthy.size(); ++i)
    options.masters.push_back(by_name("localhost", healthy[i].port()));
  options.masters.push_back(by_name("e.hang.test"));
  options.masters.push_back(by_name("f.hang.test"));
  auto redlock = std::make_unique<Redlock>(options);
  CHECK(redlock->try_lock("job", 10s));
  REQUIRE(
      eventually([&] { return names.in_flight("e.hang.test") == 1 && names.in_flight("f.hang.test") == 1; }));

  ReleaseLater release(names, 3s);
  auto started = steady::now();
  redlock.reset();
  CHECK(steady::now() - started < scaled(500ms));
}

TEST_CASE("a master reconnects to the addresses it resolved before, without a new lookup", "[dns]") {
  HangingNames names;
  Cluster healthy(3);
  LoopFixture loop;
  {
    Options options;
    for (std::size_t i = 0; i < healthy.size(); ++i)
      options.masters.push_back(by_name("localhost", healthy[i].port()));
    // With two masters that never connect, the quorum (3 of 5) needs every
    // healthy master: a lock taken after the restart proves master 0 is back.
    options.masters.push_back(by_name("g.hang.test"));
    options.masters.push_back(by_name("h.hang.test"));
    Client client(loop.get(), options);
    REQUIRE_FALSE(try_lock(loop, client, "before", 10s).error);
    const int lookups = names.calls("localhost");
    CHECK(lookups == 3);

    healthy[0].restart(false);
    bool locked = false;
    const auto until = steady::now() + scaled(5s);
    while (!locked && steady::now() < until) {
      locked = !try_lock(loop, client, "after", 10s).error;
      if (!locked) run_for(loop, 20ms);
    }
    REQUIRE(locked);
    CHECK(names.calls("localhost") == lookups);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a name that does not resolve is named once, with the resolver's reason", "[dns][diagnostics]") {
  HangingNames names;
  names.release();  // ".hang.test" names now fail at once with EAI_NONAME
  LoopFixture loop;
  std::vector<std::string> said;
  {
    Options options;
    options.masters = {by_name("nowhere.hang.test")};
    options.retry_count = 0;
    options.diagnostics = [&](std::string_view line) { said.emplace_back(line); };
    Client client(loop.get(), options);
    CHECK(try_lock(loop, client, "r", 1s).error == errc::unavailable);
    // The Client looks the name up again on each reconnect.
    CHECK(loop.run_until([&] { return names.calls("nowhere.hang.test") >= 3; }, 10s));
    REQUIRE(said.size() == 1);
    CHECK(said[0].find("nowhere.hang.test:6379") != std::string::npos);
    CHECK(said[0].find("cannot resolve host name 'nowhere.hang.test'") != std::string::npos);
    auto errors = client.master_errors();
    REQUIRE(errors.size() == 1);
    CHECK(errors[0].cause.find("cannot resolve host name") == 0);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a name whose DNS never answers is named once, as a connect timeout", "[dns][diagnostics]") {
  HangingNames names;
  LoopFixture loop;
  std::vector<std::string> said;
  {
    Options options;
    options.masters = {by_name("silent.hang.test")};
    options.connect_timeout = 30ms;
    options.diagnostics = [&](std::string_view line) { said.emplace_back(line); };
    Client client(loop.get(), options);
    run_for(loop, 300ms);  // several connect timeouts and reconnects
    REQUIRE(said.size() == 1);
    CHECK(said[0].find("no answer from DNS for 'silent.hang.test' within connect_timeout (30 ms)") !=
          std::string::npos);
  }
  REQUIRE(loop.close());
}
