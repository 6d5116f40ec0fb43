#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// What on_lost reported, and when.
struct Lost {
  std::vector<std::error_code> calls;
  steady::time_point at{};
  Client::LostCallback callback() {
    return [this](std::error_code e) {
      calls.push_back(e);
      at = steady::now();
    };
  }
};

}  // namespace

TEST_CASE("a kept lock outlives its ttl until unlock, and on_lost never runs", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "kept", 300ms);
    REQUIRE_FALSE(a.error);
    CHECK(a.lock.ttl == 300ms);
    Lost lost;
    client.keep(a.lock, {}, lost.callback());
    loop.run_until([] { return false; }, 1000ms);  // more than three ttls
    CHECK(lost.calls.empty());
    CHECK(holders(masters, "kept", a.lock.value) == 3);
    CHECK_FALSE(unlock(loop, client, a.lock));
    CHECK(held_nowhere(masters, "kept"));
    loop.run_until([] { return false; }, 300ms);  // renewals would be due
    CHECK(lost.calls.empty());
    CHECK(held_nowhere(masters, "kept"));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a refused renewal is reported once, as not_held", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "taken", 600ms);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "taken", a.lock.value));
    Lost lost;
    client.keep(a.lock, {100ms, 0ms}, lost.callback());
    for (std::size_t i = 0; i < 2; ++i) masters[i].set("taken", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 2s));
    loop.run_until([] { return false; }, 300ms);
    REQUIRE(lost.calls.size() == 1);
    CHECK(lost.calls[0] == errc::not_held);
    CHECK(gone_everywhere(masters, "taken", a.lock.value));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a stalled loop learns first that the validity ran out: expired", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "stalled", 300ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    client.keep(a.lock, {}, lost.callback());
    uv_run(loop.get(), UV_RUN_NOWAIT);
    std::this_thread::sleep_for(400ms);  // the process stalls past valid_until
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 2s));
    loop.run_until([] { return false; }, 200ms);
    REQUIRE(lost.calls.size() == 1);
    CHECK(lost.calls[0] == errc::expired);
    CHECK(held_nowhere(masters, "stalled"));
  }
  REQUIRE(loop.close());
}

TEST_CASE("max_hold ends the hold with timeout and releases the lock", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    auto started = steady::now();
    Answer a = try_lock(loop, client, "capped", 300ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    client.keep(a.lock, {0ms, 500ms}, lost.callback());
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 3s));
    CHECK(lost.calls[0] == errc::timeout);
    CHECK(lost.at - started >= 490ms);
    CHECK(lost.at - started < 500ms + scaled(200ms));
    CHECK(held_nowhere(masters, "capped"));
    loop.run_until([] { return false; }, 200ms);
    CHECK(lost.calls.size() == 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("close ends every hold with closed; a bad lock is refused", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "closing", 10s);
    REQUIRE_FALSE(a.error);
    Lost kept, twice, made_up;
    client.keep(a.lock, {}, kept.callback());
    client.keep(a.lock, {}, twice.callback());  // already kept
    Lock no_ttl{"closing", a.lock.value};
    client.keep(no_ttl, {}, made_up.callback());
    REQUIRE(loop.run_until([&] { return !twice.calls.empty() && !made_up.calls.empty(); }, 2s));
    CHECK(twice.calls[0] == errc::invalid_argument);
    CHECK(made_up.calls[0] == errc::invalid_argument);
    client.close(nullptr);
    REQUIRE(loop.run_until([&] { return !kept.calls.empty(); }, 2s));
    CHECK(kept.calls == std::vector<std::error_code>{make_error_code(errc::closed)});
  }
  REQUIRE(loop.close());
}
