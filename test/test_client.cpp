#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

TEST_CASE("every call is answered exactly once, never inside the call", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    std::vector<int> calls(6, 0);
    Lock held;
    client.try_lock("a", 5s, [&](std::error_code e, Lock l) {
      ++calls[0];
      REQUIRE_FALSE(e);
      held = l;
    });
    client.try_lock("", 5s, [&](std::error_code e, Lock) {
      ++calls[1];
      CHECK(e == errc::invalid_argument);
    });
    client.lock("b", 0ms, [&](std::error_code e, Lock) {
      ++calls[2];
      CHECK(e == errc::invalid_argument);
    });
    CHECK(calls == std::vector<int>(6, 0));
    REQUIRE(loop.run_until([&] { return calls[0] && calls[1] && calls[2]; }, 5s));

    client.extend(held, 5s, [&](std::error_code e, Lock) {
      ++calls[3];
      CHECK_FALSE(e);
    });
    client.unlock(held, [&](std::error_code e) {
      ++calls[4];
      CHECK_FALSE(e);
    });
    client.unlock(held, [&](std::error_code e) {
      ++calls[5];
      CHECK(e == errc::not_held);
    });
    CHECK(calls[3] + calls[4] + calls[5] == 0);
    REQUIRE(loop.run_until([&] { return calls[3] && calls[4] && calls[5]; }, 5s));
    // Give any stray second call a chance to show itself.
    loop.run_until([] { return false; }, 50ms);
    CHECK(calls == std::vector<int>(6, 1));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("close answers operations in flight with closed, then calls back", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  auto client = std::make_unique<Client>(loop.get(), masters.options());
  std::vector<std::error_code> answers;
  bool closed = false;
  for (int i = 0; i < 5; ++i) {
    client->lock("busy" + std::to_string(i), 5s, [&](std::error_code e, Lock) { answers.push_back(e); });
  }
  client->close([&] {
    CHECK(answers.size() == 5);
    closed = true;
  });
  CHECK(answers.empty());
  REQUIRE(loop.run_until([&] { return closed; }, 5s));
  for (auto e : answers) CHECK(e == errc::closed);

  SECTION("calls after close are answered with closed") {
    Answer late = try_lock(loop, *client, "late", 1s);
    CHECK(late.error == errc::closed);
  }
  client.reset();
  REQUIRE(loop.close());
}

TEST_CASE("destroying the client with rounds in flight is safe and answers them", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  std::vector<std::error_code> answers;
  {
    Client client(loop.get(), masters.options());
    for (int i = 0; i < 5; ++i) {
      client.lock("x" + std::to_string(i), 5s, [&](std::error_code e, Lock) { answers.push_back(e); });
    }
    // Let the commands reach the wire, so that replies are on their way.
    loop.run_until([] { return false; }, 1ms);
  }
  REQUIRE(loop.run_until([&] { return answers.size() == 5; }, 5s));
  for (auto e : answers) CHECK((e == errc::closed || !e));
  REQUIRE(loop.close());
}

TEST_CASE("a callback may destroy its own client", "[client]") {
  Cluster masters(1);
  LoopFixture loop;
  auto client = std::make_unique<Client>(loop.get(), masters.options());
  int calls = 0;
  std::error_code second;
  client->try_lock("self", 5s, [&](std::error_code e, Lock) {
    ++calls;
    CHECK_FALSE(e);
    client.reset();
  });
  client->try_lock("self", 5s, [&](std::error_code e, Lock) {
    ++calls;
    second = e;
  });
  REQUIRE(loop.run_until([&] { return calls == 2; }, 5s));
  CHECK(!client);
  // The second answer came with the first, or as closed by the destruction.
  CHECK((second == errc::not_acquired || second == errc::closed));
  REQUIRE(loop.close());
}

TEST_CASE("closing with an undecided acquisition releases what it may have taken", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 10s;
    Client client(loop.get(), options);
    Answer warm = try_lock(loop, client, "warm", 5s);
    REQUIRE_FALSE(warm.error);
    // Master 0 will say yes, master 1 no, master 2 nothing: the round cannot decide.
    masters[1].set("{stuck}", "someone", 60s);
    masters[2].pause();
    std::error_code answer;
    bool answered = false;
    client.try_lock("stuck", 60s, [&](std::error_code e, Lock) {
      answer = e;
      answered = true;
    });
    REQUIRE(loop.run_until([&] { return masters[0].get("{stuck}").has_value(); }, 5s));
    client.close(nullptr);
    REQUIRE(loop.run_until([&] { return answered; }, 5s));
    CHECK(answer == errc::closed);
    // Without the release, our value would block "stuck" on master 0 for 60 s.
    CHECK(eventually([&] { return !masters[0].get("{stuck}"); }));
    CHECK(masters[1].get("{stuck}") == "someone");
    masters[2].resume();
  }
  REQUIRE(loop.close());
}

TEST_CASE("an unlock issued just before close or destruction still reaches every master", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    auto client = std::make_unique<Client>(loop.get(), masters.options());
    Answer a = try_lock(loop, *client, "closing", 30s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{closing}", a.lock.value));
    std::error_code unlocked;
    bool answered = false;
    client->unlock(a.lock, [&](std::error_code e) {
      unlocked = e;
      answered = true;
    });
    SECTION("close") {
      client->close(nullptr);
    }
    SECTION("destruction") {
      client.reset();
    }
    REQUIRE(loop.run_until([&] { return answered; }, 5s));
    CHECK(unlocked == errc::closed);            // the caller is not told how it went
    CHECK(held_nowhere(masters, "{closing}"));  // but the masters got it
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "an unlock queued behind more than the sockets can buffer still reaches the master at close, "
    "however long the caller was busy before",
    "[client]") {
  Cluster masters(1);
  Options options = masters.options();
  options.command_timeout = 5s;  // what the paused master has not answered stays pending
  LoopFixture loop;
  {
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "behind", 30s);
    REQUIRE_FALSE(a.error);
    masters[0].pause();
    // 6 MB of unlocks (of locks nobody holds), more than the kernel buffers
    // of both ends take (3.5 MB here) while the master reads nothing: the unlock after
    // them is still in the Client when it closes.
    const std::string filler(std::size_t{60} * 1024, 'x');
    for (int i = 0; i < 100; ++i) {
      Lock nobodys = a.lock;
      nobodys.resource = filler + std::to_string(i);
      client.unlock(nobodys, [](std::error_code) {});
    }
    client.unlock(a.lock, [](std::error_code) {});
    // The caller is busy past the close's bound (500 ms here) before it
    // closes: the bound starts at the close, not at the loop's last turn.
    std::this_thread::sleep_for(600ms);
  }
  masters[0].resume();
  REQUIRE(loop.close());  // runs the loop until the closing connection is done
  CHECK(held_nowhere(masters, "{behind}"));
}

TEST_CASE("close with an extend in flight leaves the caller's lock in place", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "kept", 30s);
    REQUIRE_FALSE(a.error);
    REQUIRE(held_everywhere(masters, "{kept}", a.lock.value));
    bool answered = false;
    client.extend(a.lock, 30s, [&](std::error_code, Lock) { answered = true; });
    client.close(nullptr);
    REQUIRE(loop.run_until([&] { return answered; }, 5s));
    REQUIRE(a.lock.valid());
    // The caller still sees a valid lock; nothing deleted it under them.
    loop.run_until([] { return false; }, 50ms);
    CHECK(holders(masters, "{kept}", a.lock.value) == 3);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a call after close opens no handle: the loop closes while the Client lives", "[client]") {
  Cluster masters(1);
  LoopFixture loop;
  Client client(loop.get(), masters.options());
  bool closed = false;
  client.close([&] { closed = true; });
  REQUIRE(loop.run_until([&] { return closed; }, 5s));
  Answer a = try_lock(loop, client, "late", 5s);
  CHECK(a.error == errc::closed);
  std::error_code unlocked;
  client.unlock(a.lock, [&](std::error_code e) { unlocked = e; });
  CHECK(loop.close());  // while `client` still exists
  CHECK(unlocked == errc::closed);
}

TEST_CASE("a loop kept busy past command_timeout costs no vote", "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 50ms;
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "busy", 30s);
    REQUIRE_FALSE(a.error);
    // The caller issues a call and then keeps the loop busy for three command
    // timeouts before returning to it (a slow callback, not a slow master).
    auto busy = [] { std::this_thread::sleep_for(150ms); };
    SECTION("extend") {
      Answer e = await_answer(loop, [&](Client::LockCallback cb) {
        client.extend(a.lock, 30s, std::move(cb));
        busy();
      });
      CHECK_FALSE(e.error);
    }
    SECTION("unlock") {
      Answer u = await_answer(loop, [&](Client::LockCallback cb) {
        client.unlock(a.lock, [cb = std::move(cb)](std::error_code e) { cb(e, Lock{}); });
        busy();
      });
      CHECK_FALSE(u.error);
      CHECK(held_nowhere(masters, "{busy}"));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("a lock that ran out while its answer waited for the loop is released, not handed over",
          "[client]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    REQUIRE_FALSE(try_lock(loop, client, "warm", 5s).error);
    // Both rounds go out in one write and are answered in one read, so both
    // answers are queued together; the first one's callback stalls the loop
    // past the second lock's validity.
    int answers = 0;
    Answer second;
    client.try_lock("first", 5s, [&](std::error_code, Lock) {
      ++answers;
      std::this_thread::sleep_for(120ms);
    });
    client.try_lock("second", 100ms, [&](std::error_code e, Lock l) {
      ++answers;
      second.error = e;
      second.lock = std::move(l);
    });
    REQUIRE(loop.run_until([&] { return answers == 2; }, 5s));
    CHECK(second.error == errc::unavailable);
    CHECK(second.lock.value.empty());
  }
  REQUIRE(loop.close());
}

TEST_CASE("replies that came in time during a loop stall are read before any deadline fails them",
          "[client]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 50ms;
    Client client(loop.get(), options);
    REQUIRE_FALSE(try_lock(loop, client, "warm", 5s).error);
    std::vector<std::error_code> answers;
    for (int i = 0; i < 5; ++i) {
      client.try_lock("stalled" + std::to_string(i), 10s,
                      [&](std::error_code e, Lock) { answers.push_back(e); });
    }
    uv_run(loop.get(), UV_RUN_NOWAIT);  // one turn: the commands are written
    // The loop stalls for three command timeouts; the masters answer meanwhile.
    std::this_thread::sleep_for(150ms);
    REQUIRE(loop.run_until([&] { return answers.size() == 5; }, 5s));
    for (auto e : answers) CHECK_FALSE(e);
  }
  REQUIRE(loop.close());
}
