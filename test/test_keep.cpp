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

// Script calls a master has run (EVALSHA and EVAL; the commands a script
// makes inside are counted apart, under their own names).
long long script_calls(RedisServer& server) {
  std::string info = server.command({"INFO", "commandstats"});
  long long calls = 0;
  for (std::string name : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
    auto at = info.find(name);
    if (at != std::string::npos) calls += std::stoll(info.substr(at + name.size()));
  }
  return calls;
}

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

TEST_CASE("10,000 kept locks are renewed by a handful of script calls per master per tick", "[keep][batch]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 1000ms;  // a thousand SETs queued at once
    Client client(loop.get(), options);
    constexpr int count = 10000;
    std::vector<Lock> locks;
    int answered = 0;
    for (int i = 0; i < count; ++i) {
      client.try_lock("many:" + std::to_string(i), 3000ms, [&](std::error_code e, Lock l) {
        ++answered;
        if (!e) locks.push_back(std::move(l));
      });
      if (i % 1000 == 999) REQUIRE(loop.run_until([&] { return answered == i + 1; }, 10s));
    }
    REQUIRE(locks.size() == static_cast<std::size_t>(count));
    int lost = 0;
    for (const Lock& l : locks) client.keep(l, {1000ms, 0ms}, [&](std::error_code) { ++lost; });
    std::vector<long long> before;
    for (std::size_t m = 0; m < masters.size(); ++m) before.push_back(script_calls(masters[m]));
    auto started = steady::now();
    loop.run_until([] { return false; }, 3500ms);  // longer than the ttl: only renewals keep the keys
    double ticks = std::chrono::duration<double>(steady::now() - started) / 1000ms;
    CHECK(lost == 0);
    for (std::size_t m = 0; m < masters.size(); ++m) {
      long long calls = script_calls(masters[m]) - before[m];
      INFO("master " << m << ": " << calls << " script calls in " << ticks << " ticks");
      // 1,000 locks a call: 10 calls a tick, and no more than a few extra
      // for holds that fell due apart.
      CHECK(calls >= 10);
      CHECK(calls <= static_cast<long long>(15 * (ticks + 1)));
      CHECK(masters[m].command({"DBSIZE"}) == std::to_string(count));
    }
    client.close(nullptr);
    REQUIRE(loop.run_until([&] { return lost == count; }, 5s));  // each hold ends once, with closed
  }
  REQUIRE(loop.close());
}

TEST_CASE("one batch answers per lock: a lock taken over is lost, the others go on", "[keep][batch]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    std::vector<Lock> locks;
    for (int i = 0; i < 5; ++i) {
      Answer a = try_lock(loop, client, "batch:" + std::to_string(i), 600ms);
      REQUIRE_FALSE(a.error);
      locks.push_back(a.lock);
    }
    std::vector<Lost> lost(locks.size());
    for (std::size_t i = 0; i < locks.size(); ++i) client.keep(locks[i], {100ms, 0ms}, lost[i].callback());
    for (std::size_t m = 0; m < 2; ++m) masters[m].set("batch:2", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return !lost[2].calls.empty(); }, 2s));
    loop.run_until([] { return false; }, 900ms);  // beyond the ttl of the others
    CHECK(lost[2].calls == std::vector<std::error_code>{make_error_code(errc::not_held)});
    CHECK(gone_everywhere(masters, "batch:2", locks[2].value));
    CHECK(masters[0].get("batch:2") == "someone-else");
    for (std::size_t i : {0, 1, 3, 4}) {
      CHECK(lost[i].calls.empty());
      CHECK(holders(masters, "batch:" + std::to_string(i), locks[i].value) == 3);
      CHECK_FALSE(unlock(loop, client, locks[i]));
    }
  }
  REQUIRE(loop.close());
}
