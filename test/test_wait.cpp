#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "scripts.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"
#include "support/monitor.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

// A waiter that could only poll would wait this long between attempts.
Options slow_polling(Options o) {
  o.retry_delay = 10s;
  o.retry_jitter = 0ms;
  return o;
}

// One lock(resource, ttl, wait) in flight, and when it was answered.
struct Waiting {
  std::shared_ptr<Answer> answer = std::make_shared<Answer>();
  std::shared_ptr<steady::time_point> answered_at = std::make_shared<steady::time_point>();
  Client::CallId id = 0;

  Waiting(Client& client, const std::string& resource, milliseconds ttl, milliseconds wait) {
    id = client.lock(resource, ttl, wait, [a = answer, at = answered_at](std::error_code e, Lock l) {
      *at = steady::now();
      ++a->calls;
      a->error = e;
      a->lock = std::move(l);
    });
  }
  bool done() const { return answer->calls > 0; }
};

// The members of `key`'s wait queue on `master`, space-separated ("" when empty).
std::string queue_at(RedisServer& master, const std::string& key) {
  return master.command({"ZRANGE", key + ":queue", "0", "-1"});
}

// Waits until the one waiter of `key` is queued at `gate` alone, and returns
// its wake channel. The queue is then made to live a minute, so that only a
// ZREM or a pop takes the entry out while the test looks, not its expiry.
std::string queued_alone(LoopFixture& loop, Cluster& masters, std::size_t gate, const std::string& key) {
  REQUIRE(loop.run_until([&] { return masters.queued_on(key, 1) == std::vector<std::size_t>{gate}; }, 5s));
  std::string channel = queue_at(masters[gate], key);
  REQUIRE(channel.rfind("wake:", 0) != std::string::npos);
  REQUIRE(masters[gate].command({"PEXPIRE", key + ":queue", "60000"}) == "1");
  return channel;
}

// The master that is `key`'s gate while its usual gate (gate_of) does not vote.
std::size_t second_gate_of(const std::string& key, const Options& options) {
  std::size_t gate = gate_of(key, options);
  Options others = options;
  others.masters.erase(others.masters.begin() + static_cast<std::ptrdiff_t>(gate));
  std::size_t second = gate_of(key, others);
  return second >= gate ? second + 1 : second;
}

// Makes the paused master `gate` stop voting for `client`: a command it never
// answers drops the client's command connection there (its subscriber
// connection, which sends nothing, stays up).
void stop_voting_at(LoopFixture& loop, Client& client, std::size_t gate, const std::string& resource) {
  Answer other = try_lock(loop, client, resource, 1s);
  REQUIRE_FALSE(other.error);  // the other masters are a majority
  CHECK_FALSE(unlock(loop, client, other.lock));
  REQUIRE(loop.run_until([&] { return client.stats().masters[gate].state != MasterState::up; }, 5s));
}

bool queue_empties(LoopFixture& loop, RedisServer& master, const std::string& key) {
  return loop.run_until([&] { return queue_at(master, key).empty(); }, 3s);
}

// try_lock, then its value on every master: it answers at a majority's yes.
Answer try_lock_everywhere(LoopFixture& loop, Client& client, Cluster& masters, const std::string& resource,
                           milliseconds ttl) {
  Answer held = try_lock(loop, client, resource, ttl);
  REQUIRE_FALSE(held.error);
  std::string key = "{" + resource + "}";
  REQUIRE(loop.run_until([&] { return holders(masters, key, held.lock.value) == 3; }, 5s));
  return held;
}

// Waits until nobody listens to `key`'s releases on `master` (a queued
// waiter stops listening once its linger is over).
bool unsubscribed_at(LoopFixture& loop, RedisServer& master, const std::string& key) {
  std::string nobody = key + ":released 0";
  return loop.run_until(
      [&] {
        return master.command({"PUBSUB", "NUMSUB", key + ":released"}) == nobody;
      },
      3s);
}

// Options whose masters are reached through a FaultProxy each (in `proxies`).
Options through_proxies(Cluster& masters, std::vector<std::unique_ptr<FaultProxy>>& proxies,
                        milliseconds command_timeout) {
  Options o = masters.options();
  o.masters = proxy_each(masters, proxies);
  o.command_timeout = command_timeout;
  return o;
}

// Lets the loop run so that a waiter's first attempt fails and it sleeps.
void let_it_try(LoopFixture& loop) {
  loop.run_until([] { return false; }, 50ms);
}

}  // namespace

TEST_CASE("a waiter takes the lock within a few milliseconds of its release, not at retry_delay", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "handoff", 30s);
    REQUIRE_FALSE(held.error);
    Waiting waiter(waiter_client, "handoff", 10s, 20s);
    let_it_try(loop);
    REQUIRE_FALSE(waiter.done());

    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(100ms));
    CHECK(held_everywhere(masters, "{handoff}", waiter.answer->lock.value));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a waiter takes the lock soon after a crashed holder's keys expire", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    auto holder = std::make_unique<Client>(loop.get(), masters.options());
    Answer held = try_lock(loop, *holder, "crashed", 400ms);
    REQUIRE_FALSE(held.error);
    auto taken = steady::now();
    holder.reset();  // gone without unlocking: nobody publishes a release

    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Waiting waiter(waiter_client, "crashed", 10s, 20s);
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - taken >= 350ms);
    CHECK(*waiter.answered_at - taken < 400ms + scaled(150ms));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a wait that runs out while others hold the lock answers timeout", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "busy", 30s);
    REQUIRE_FALSE(held.error);

    SECTION("200 ms") {
      auto started = steady::now();
      Waiting waiter(waiter_client, "busy", 10s, 200ms);
      REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
      CHECK(waiter.answer->error == errc::timeout);
      CHECK(*waiter.answered_at - started >= 190ms);
      CHECK(*waiter.answered_at - started < 200ms + scaled(150ms));
    }
    SECTION("0: one attempt") {
      Waiting waiter(waiter_client, "busy", 10s, 0ms);
      REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
      CHECK(waiter.answer->error == errc::timeout);
    }
    SECTION("a negative wait is refused") {
      Waiting waiter(waiter_client, "busy", 10s, -1ms);
      REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
      CHECK(waiter.answer->error == errc::invalid_argument);
    }
    CHECK(held_everywhere(masters, "{busy}", held.lock.value));  // nobody touched the holder's keys
  }
  REQUIRE(loop.close());
}

TEST_CASE("waiters of one Client are served first come, first served", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiters(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "queue", 30s);
    REQUIRE_FALSE(held.error);
    std::vector<int> order;
    std::vector<Lock> locks(4);
    for (int i = 0; i < 4; ++i) {
      waiters.lock("queue", 10s, 20s, [&, i](std::error_code e, const Lock& l) {
        REQUIRE_FALSE(e);
        order.push_back(i);
        locks[static_cast<std::size_t>(i)] = l;
        // Each holder hands over at once.
        waiters.unlock(l, [](std::error_code) {});
      });
    }
    let_it_try(loop);
    REQUIRE(order.empty());
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return order.size() == 4; }, 5s));
    CHECK(order == std::vector<int>{0, 1, 2, 3});
  }
  REQUIRE(loop.close());
}

TEST_CASE("a waiter whose subscriber connections were killed still wakes by retry_delay", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Options options = masters.options();
    options.retry_delay = 500ms;
    options.retry_jitter = 0ms;
    Client waiter_client(loop.get(), options);
    Answer held = try_lock(loop, holder, "deaf", 30s);
    REQUIRE_FALSE(held.error);
    Waiting waiter(waiter_client, "deaf", 10s, 20s);
    let_it_try(loop);
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].command({"CLIENT", "KILL", "TYPE", "pubsub"});
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 500ms + scaled(200ms));
  }
  REQUIRE(loop.close());
}

TEST_CASE("with one master down, a release heard from the others still hands over at once", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "minority", 30s);
    REQUIRE_FALSE(held.error);
    masters[0].kill9();
    Waiting waiter(waiter_client, "minority", 10s, 20s);
    let_it_try(loop);
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(200ms));
  }
  REQUIRE(loop.close());
}

TEST_CASE("the gate master restarted while a waiter is queued there: the next release still wakes it at once",
          "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "restart", 30s);
    REQUIRE_FALSE(held.error);
    Waiting waiter(waiter_client, "restart", 10s, 20s);
    std::vector<std::size_t> gate;
    REQUIRE(loop.run_until([&] { return (gate = masters.queued_on("{restart}", 1)).size() == 1; }, 5s));

    // A new process: the queue and the holder's key there are gone, and so is
    // the waiter's subscriber connection, which comes back.
    masters[gate[0]].restart(false);
    const std::vector<std::string> wake_channels{"PUBSUB", "CHANNELS", "wake:*"};
    REQUIRE(loop.run_until([&] { return !masters[gate[0]].command(wake_channels).empty(); }, 5s));
    REQUIRE_FALSE(waiter.done());

    // Nothing but a release message or the queue would wake the waiter
    // before 10 s (retry_delay) or 30 s (the holder's keys).
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(200ms));
    // A majority: the restarted master's connection may still be coming back
    // when the attempt is written, and a round decides without it.
    CHECK(eventually([&] { return holders(masters, "{restart}", waiter.answer->lock.value) >= 2; }));
  }
  REQUIRE(loop.close());
}

// Every vote a Client's attempts got or failed to get, on all masters.
std::uint64_t votes_asked(const Client& client) {
  std::uint64_t n = 0;
  for (const MasterStats& m : client.stats().masters) n += m.votes_granted + m.votes_refused + m.votes_failed;
  return n;
}

// Polls, within 5 s, until `client`'s attempts are over (it asked no vote for
// a while) and `also` holds.
template <class Also>
bool attempts_over(LoopFixture& loop, const Client& client, Also also) {
  std::uint64_t asked = votes_asked(client);
  return loop.run_until(
      [&] {
        std::uint64_t before = asked;
        let_it_try(loop);
        asked = votes_asked(client);
        return asked == before && also();
      },
      5s);
}

TEST_CASE("a key's releases are heard from a majority of the masters, the same ones in every Client",
          "[wait]") {
  Cluster masters(5);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Options reversed = slow_polling(masters.options());
    std::reverse(reversed.masters.begin(), reversed.masters.end());
    Client first(loop.get(), slow_polling(masters.options()));
    Client second(loop.get(), reversed);
    Answer held = try_lock(loop, holder, "majority", 30s);
    REQUIRE_FALSE(held.error);
    // The holder's key is gone from the gate master (as if the holder had
    // taken the lock while it was away), so the gate lets the waiters through,
    // the majority refuses them, and they are not queued: they listen.
    // try_lock answers at a majority's yes: the gate's may still be on its way.
    REQUIRE(loop.run_until([&] { return holders(masters, "{majority}", held.lock.value) == 5; }, 5s));
    std::size_t gate = gate_of("{majority}", masters.options());
    masters[gate].command({"DEL", "{majority}"});
    // One after the other, so that neither is refused at the gate by the
    // other's passing attempt (and queued there).
    const std::string channel = "{majority}:released";
    Waiting a(first, "majority", 10s, 20s);
    REQUIRE(loop.run_until([&] { return masters.subscribed_on(channel, 1).size() == 3; }, 5s));
    // Its attempts (the first, and one per subscription it made) are over
    // when it asks nothing more for a while and the gate's key is free: a
    // fixed pause was once too short under ASan, and the second waiter met
    // the first's attempt at the gate and queued there.
    REQUIRE(attempts_over(loop, first, [&] {
      return masters[gate].command({"EXISTS", "{majority}"}) == "0";
    }));
    Waiting b(second, "majority", 10s, 20s);
    // Both Clients subscribe on the same three masters; the other two carry nothing.
    REQUIRE(loop.run_until([&] { return masters.subscribed_on(channel, 2).size() == 3; }, 5s));
    CHECK(masters.subscribed_on(channel, 0).size() == 2);
    CHECK(masters.queued_on("{majority}", 0).size() == 5);

    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return a.done() || b.done(); }, 5s));
    const Waiting& taker = a.done() ? a : b;
    REQUIRE_FALSE(taker.answer->error);
    CHECK(*taker.answered_at - released < scaled(100ms));
  }
  REQUIRE(loop.close());
}

TEST_CASE("an unlock nobody listens for is a compare-and-delete: nothing published, nothing left", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    std::vector<long long> before;  // the connections' ACL probe publishes once
    for (int i = 0; i < 3; ++i) {
      Answer held = try_lock_everywhere(loop, client, masters, "alone", 10s);
      if (before.empty()) {
        for (std::size_t m = 0; m < masters.size(); ++m) before.push_back(publishes(masters[m]));
      }
      REQUIRE_FALSE(unlock(loop, client, held.lock));
      REQUIRE(loop.run_until([&] { return holders(masters, "{alone}", held.lock.value) == 0; }, 5s));
    }
    for (std::size_t i = 0; i < masters.size(); ++i) {
      INFO("master " << i);
      CHECK(publishes(masters[i]) == before[i]);
      CHECK(masters[i].command({"EXISTS", "{alone}:listening"}) == "0");
    }
  }
  REQUIRE(loop.close());
}

// A listener's markers last 3 s at least (retry_delay + jitter + 1 s: 11 s
// here) and are renewed every third of that while it listens. Its loop may
// also stall for longer than 3 s (helper-14's review: with 3 s markers the
// release then went unpublished and the waiter slept to its retry_delay).
TEST_CASE("a waiter that listens for longer than a marker lasts still hears the release at once", "[wait]") {
  Cluster masters(5);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "long-listen", 30s);
    REQUIRE_FALSE(held.error);
    REQUIRE(loop.run_until([&] { return holders(masters, "{long-listen}", held.lock.value) == 5; }, 5s));
    // Not at the gate: the waiter passes it, is refused by the rest, and listens.
    std::size_t gate = gate_of("{long-listen}", masters.options());
    masters[gate].command({"DEL", "{long-listen}"});
    Waiting waiter(waiter_client, "long-listen", 10s, 20s);
    const std::string channel = "{long-listen}:released";
    REQUIRE(loop.run_until([&] { return masters.subscribed_on(channel, 1).size() == 3; }, 5s));
    CHECK(masters.queued_on("{long-listen}", 0).size() == 5);
    // Its attempts (one per subscription confirmed) are over when it asks
    // nothing more for a while: a confirmation read after the stall would
    // make it try, and win, without any release heard.
    REQUIRE(attempts_over(loop, waiter_client, [] { return true; }));
    steady::time_point released;
    SECTION("its loop runs past a marker's 11 s, then the holder unlocks") {
      auto until = steady::now() + 12s;
      loop.run_until([&] { return steady::now() >= until; }, 20s);
      REQUIRE_FALSE(waiter.done());
      released = steady::now();
      REQUIRE_FALSE(unlock(loop, holder, held.lock));
    }
    SECTION("its loop stalls for 3.5 s, during which another process unlocks") {
      std::this_thread::sleep_for(3500ms);
      released = steady::now();
      for (std::size_t i = 0; i < masters.size(); ++i) {
        masters[i].command({"EVAL", std::string(scripts::unlock.body), "2", "{long-listen}",
                            "{long-listen}:listening", held.lock.value});
      }
    }
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(200ms));  // its retry_delay is 10 s
  }
  REQUIRE(loop.close());
}

// helper-14's review: a waiter queued at its gate stopped listening to
// releases, and heard none when the gate died, until its retry_delay.
TEST_CASE("a waiter queued at a gate that dies listens to the others and wakes at the release", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock_everywhere(loop, holder, masters, "gate-dies", 30s);
    Waiting waiter(waiter_client, "gate-dies", 10s, 25s);
    std::vector<std::size_t> gate;
    REQUIRE(loop.run_until([&] { return (gate = masters.queued_on("{gate-dies}", 1)).size() == 1; }, 5s));
    // Queued, it stopped listening to releases (after a linger).
    const std::string channel = "{gate-dies}:released";
    REQUIRE(loop.run_until([&] { return masters.subscribed_on(channel, 0).size() == 3; }, 5s));
    masters[gate[0]].kill9();
    // Its subscriber there dropped: it listens on the others now.
    REQUIRE(loop.run_until([&] { return !masters.subscribed_on(channel, 1).empty(); }, 5s));
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 15s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(1s));  // its retry_delay is 10 s
  }
  REQUIRE(loop.close());
}

TEST_CASE("Clients waiting for one resource are woken one per release, in the order they queued", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    constexpr int n = 3;
    std::vector<std::unique_ptr<Client>> clients;
    clients.reserve(n);
    for (int i = 0; i < n; ++i)
      clients.push_back(std::make_unique<Client>(loop.get(), slow_polling(masters.options())));
    Answer held = try_lock(loop, holder, "fifo", 30s);
    REQUIRE_FALSE(held.error);
    std::vector<std::unique_ptr<Waiting>> waiting;
    waiting.reserve(n);
    for (int i = 0; i < n; ++i) {
      waiting.push_back(std::make_unique<Waiting>(*clients[i], "fifo", 30s, 20s));
      REQUIRE(loop.run_until([&] { return masters.queued_on("{fifo}", i + 1).size() == 1; }, 5s));
    }
    let_it_try(loop);  // the answers to the attempts that queued them arrive

    Client* releaser = &holder;
    Lock released_lock = held.lock;
    for (std::size_t turn = 0; turn < n; ++turn) {
      INFO("turn " << turn);
      std::vector<std::uint64_t> asked;
      asked.reserve(n);
      for (const auto& c : clients) asked.push_back(votes_asked(*c));
      auto released = steady::now();
      REQUIRE_FALSE(unlock(loop, *releaser, released_lock));
      REQUIRE(loop.run_until([&] { return waiting[turn]->done(); }, 5s));
      REQUIRE_FALSE(waiting[turn]->answer->error);
      CHECK(*waiting[turn]->answered_at - released < scaled(200ms));
      // The others were not woken: no attempt of theirs, even a while later.
      let_it_try(loop);
      for (std::size_t later = turn + 1; later < n; ++later) {
        CHECK_FALSE(waiting[later]->done());
        CHECK(votes_asked(*clients[later]) == asked[later]);
      }
      releaser = clients[turn].get();
      released_lock = waiting[turn]->answer->lock;
    }
    REQUIRE_FALSE(unlock(loop, *releaser, released_lock));
    CHECK(masters.queued_on("{fifo}", 0).size() == masters.size());
  }
  REQUIRE(loop.close());
}

// A Client refused on a key lately asks the gate first on its next lock(); a
// yes there counts as that master's vote, and the round asks only the others.
TEST_CASE("after the gate alone said yes, a waiter's attempt asks each master once", "[wait]") {
  for (int n : {1, 3}) {
    INFO(n << " masters");
    Cluster masters(n);
    LoopFixture loop;
    {
      Client holder(loop.get(), masters.options());
      Client client(loop.get(), slow_polling(masters.options()));
      Answer held = try_lock(loop, holder, "past-gate", 30s);
      REQUIRE_FALSE(held.error);
      Waiting refused_first(client, "past-gate", 30s, 20s);
      REQUIRE(loop.run_until([&] { return masters.queued_on("{past-gate}", 1).size() == 1; }, 5s));
      REQUIRE_FALSE(unlock(loop, holder, held.lock));
      REQUIRE(loop.run_until([&] { return refused_first.done(); }, 5s));
      REQUIRE_FALSE(refused_first.answer->error);
      REQUIRE_FALSE(unlock(loop, client, refused_first.answer->lock));
      let_it_try(loop);  // the answers of the last master, after the round decided

      std::uint64_t asked = votes_asked(client);
      Waiting again(client, "past-gate", 30s, 20s);
      REQUIRE(loop.run_until([&] { return again.done(); }, 5s));
      REQUIRE_FALSE(again.answer->error);
      let_it_try(loop);
      CHECK(votes_asked(client) - asked == static_cast<std::uint64_t>(n));
      CHECK(holders(masters, "{past-gate}", again.answer->lock.value) == n);
      REQUIRE_FALSE(unlock(loop, client, again.answer->lock));
    }
    REQUIRE(loop.close());
  }
}

TEST_CASE(
    "a waiter whose wait ran out leaves the queue, and a wake for a Client that no longer waits is passed on",
    "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client quitter_client(loop.get(), slow_polling(masters.options()));
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "pass", 30s);
    REQUIRE_FALSE(held.error);

    Waiting quitter(quitter_client, "pass", 30s, 300ms);
    std::vector<std::size_t> gate;
    REQUIRE(loop.run_until([&] { return (gate = masters.queued_on("{pass}", 1)).size() == 1; }, 5s));
    const std::vector<std::string> queue{"ZRANGE", "{pass}:queue", "0", "-1"};
    const std::string quitter_channel = masters[gate[0]].command(queue);
    REQUIRE(loop.run_until([&] { return quitter.done(); }, 5s));
    CHECK(quitter.answer->error == errc::timeout);
    REQUIRE(loop.run_until([&] { return masters.queued_on("{pass}", 0).size() == masters.size(); }, 5s));

    Waiting waiter(waiter_client, "pass", 30s, 20s);
    REQUIRE(loop.run_until([&] { return masters.queued_on("{pass}", 1).size() == 1; }, 5s));
    // As if the quitter's way out of the queue had been lost: it is back at
    // the head, alive and subscribed, and wants nothing.
    masters[gate[0]].command({"ZADD", "pass:queue", "0", quitter_channel});
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(200ms));  // not at retry_delay (10 s)
  }
  REQUIRE(loop.close());
}

TEST_CASE("close answers every waiter with closed and the loop closes clean", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    auto waiters = std::make_unique<Client>(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "closing", 30s);
    REQUIRE_FALSE(held.error);
    std::vector<std::error_code> answers;
    for (int i = 0; i < 3; ++i) {
      waiters->lock("closing", 10s, 20s, [&](std::error_code e, const Lock&) { answers.push_back(e); });
    }
    let_it_try(loop);
    SECTION("close") {
      waiters->close(nullptr);
    }
    SECTION("destruction") {
      waiters.reset();
    }
    REQUIRE(loop.run_until([&] { return answers.size() == 3; }, 5s));
    for (auto e : answers) CHECK(e == errc::closed);
    CHECK(held_everywhere(masters, "{closing}", held.lock.value));
    holder.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("the blocking facade waits too: a thread takes the lock as another releases it",
          "[wait][blocking]") {
  Cluster masters(3);
  Redlock first(masters.options());
  Redlock second(slow_polling(masters.options()));
  Result<Lock> held = first.lock("threads", 30s, 0ms);
  REQUIRE(held);
  Result<Lock> waited = make_error_code(errc::closed);
  steady::time_point answered;
  std::thread waiter([&] {
    waited = second.lock("threads", 10s, 20s);
    answered = steady::now();
  });
  // The waiter's first attempt fails while we hold it; give it the time.
  std::this_thread::sleep_for(100ms);
  auto released = steady::now();
  CHECK_FALSE(first.unlock(*held));
  waiter.join();
  REQUIRE(waited);
  CHECK(answered - released < scaled(200ms));
}

TEST_CASE("lock() with a retry count: a release ends its pause, and it gives up as polling would", "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Answer held = try_lock(loop, holder, "counted", 30s);
    REQUIRE_FALSE(held.error);
    Options options = masters.options();
    options.retry_count = 2;
    options.retry_jitter = 0ms;
    options.command_timeout = 50ms;

    SECTION("woken by the release") {
      options.retry_delay = 5s;
      Client waiter(loop.get(), options);
      Answer a;
      waiter.lock("counted", 10s, [&](std::error_code e, Lock l) {
        ++a.calls;
        a.error = e;
        a.lock = std::move(l);
      });
      let_it_try(loop);
      auto released = steady::now();
      REQUIRE_FALSE(unlock(loop, holder, held.lock));
      REQUIRE(loop.run_until([&] { return a.calls > 0; }, 5s));
      CHECK_FALSE(a.error);
      CHECK(steady::now() - released < scaled(200ms));
    }
    SECTION("held throughout: not_acquired after the time polling could take, 3 x 50 + 2 x 100 ms") {
      options.retry_delay = 100ms;
      Client waiter(loop.get(), options);
      auto started = steady::now();
      Answer a = lock(loop, waiter, "counted", 10s);
      auto took = steady::now() - started;
      CHECK(a.error == errc::not_acquired);
      CHECK(took >= 190ms);  // at least its two pauses
      CHECK(took < 350ms + scaled(150ms));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("a Client that releases a resource another Client waits for lets the waiter take it first",
          "[wait]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client releaser(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    int taken_by_waiter = 0;
    for (int round = 0; round < 10; ++round) {
      Answer held = try_lock(loop, releaser, "barge", 30s);
      REQUIRE_FALSE(held.error);
      Waiting waiter(waiter_client, "barge", 10s, 20s);
      let_it_try(loop);
      // The releaser unlocks and at once wants the lock back.
      std::vector<int> order;
      Lock again;
      releaser.unlock(held.lock, [&](std::error_code e) {
        REQUIRE_FALSE(e);
        releaser.lock("barge", 10s, 20s, [&](std::error_code e2, Lock l) {
          REQUIRE_FALSE(e2);
          order.push_back(1);
          again = std::move(l);
        });
      });
      REQUIRE(loop.run_until([&] { return waiter.done() || !order.empty(); }, 5s));
      if (waiter.done()) {
        ++taken_by_waiter;
        REQUIRE_FALSE(waiter.answer->error);
        REQUIRE_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
        REQUIRE(loop.run_until([&] { return order.size() == 1; }, 5s));
        REQUIRE_FALSE(unlock(loop, releaser, again));
      } else {  // the releaser barged in
        REQUIRE_FALSE(unlock(loop, releaser, again));
        REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
        REQUIRE_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
      }
    }
    // The waiter heard the release and went first (9 or 10 of 10 here; 2 to
    // 4 of 10 when the releaser does not yield). The yield lasts a few round
    // trips: under a sanitizer (a timeout multiplier above 1) the waiter can
    // need longer, and 5 or 6 of 10 were seen there with and without the
    // yield's latest changes, so the count is checked in plain builds only.
    if (test_timeout_multiplier() == 1.0) {
      CHECK(taken_by_waiter >= 8);
    } else {
      WARN("waiter first in " << taken_by_waiter << " of 10 rounds (checked in plain builds)");
    }
  }
  REQUIRE(loop.close());
}

// Two Clients queued at the gate of `key`, `first` before `second`: their
// wake channels. The queue is then made to live a minute.
std::pair<std::string, std::string> queued_two(LoopFixture& loop, Cluster& masters, std::size_t gate,
                                               const std::string& key) {
  REQUIRE(loop.run_until([&] { return masters.queued_on(key, 2) == std::vector<std::size_t>{gate}; }, 5s));
  std::string both = queue_at(masters[gate], key);
  auto space = both.find(' ');
  REQUIRE(space != std::string::npos);
  REQUIRE(masters[gate].command({"PEXPIRE", key + ":queue", "60000"}) == "1");
  return {both.substr(0, space), both.substr(space + 1)};
}

// Found under ASan in the test above: an unlock decided by the other masters
// before the gate answered, so the releaser did not know it had woken anyone,
// and its next try_lock (plain SET NX) took the key the gate had just reserved
// for the queue's head. The head's claim was refused and it queued again, at
// the back; the releaser's next unlock then woke nobody while the reservation
// lasted (and, once it woke someone, helper-18's review found, the one now
// at the head, not the one whose turn it was).
TEST_CASE("a waiter whose reserved turn another Client took is served next, before those queued after it",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 10s;  // the reservation lasts this long: past the second unlock
    Client releaser(loop.get(), options);
    Client first_client(loop.get(), slow_polling(masters.options()));
    Client second_client(loop.get(), slow_polling(masters.options()));
    std::size_t gate = gate_of("{turn}", options);
    std::size_t slow = (gate + 1) % 3;
    Answer held = try_lock_everywhere(loop, releaser, masters, "turn", 30s);
    Waiting first(first_client, "turn", 10s, 20s);
    std::string first_channel = queued_alone(loop, masters, gate, "{turn}");
    let_it_try(loop);  // a later score
    Waiting second(second_client, "turn", 10s, 20s);
    REQUIRE(queued_two(loop, masters, gate, "{turn}").first == first_channel);
    // The gate runs the unlock (it wakes and reserves for `first`) and then
    // the releaser's SET, both written while it was paused, in that order.
    masters[gate].pause();
    REQUIRE_FALSE(unlock(loop, releaser, held.lock));
    Answer again = try_lock(loop, releaser, "turn", 30s);
    REQUIRE_FALSE(again.error);
    // With `slow` paused, the gate's refusal of the woken waiter's claim is one
    // of the two that decide it: it knows it is queued again.
    masters[slow].pause();
    masters[gate].resume();
    REQUIRE(loop.run_until([&] { return masters[gate].command({"ZCARD", "{turn}:queue"}) == "2"; }, 5s));
    REQUIRE(masters[gate].command({"GET", "{turn}"}) == again.lock.value);
    REQUIRE(masters[gate].command({"GET", "{turn}:reserved"}) == first_channel);
    let_it_try(loop);
    REQUIRE_FALSE(first.done());
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, releaser, again.lock));
    REQUIRE(loop.run_until([&] { return first.done(); }, 5s));
    REQUIRE_FALSE(first.answer->error);
    CHECK(*first.answered_at - released < scaled(500ms));  // woken, not its retry_delay of 10 s
    CHECK_FALSE(second.done());
    masters[slow].resume();
    CHECK_FALSE(unlock(loop, first_client, first.answer->lock));
    REQUIRE(loop.run_until([&] { return second.done(); }, 5s));
    REQUIRE_FALSE(second.answer->error);
    CHECK_FALSE(unlock(loop, second_client, second.answer->lock));
  }
  REQUIRE(loop.close());
}

// helper-18's review: the try_lock's SET and its unlock both reach the gate
// after the release that reserved the key for the queue's head and before
// that head's claim. The reservation is live: the head keeps its turn and the
// next in the queue is not woken.
TEST_CASE("an unlock that reaches the gate before the woken head claims wakes that head, nobody else",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 10s;
    Client releaser(loop.get(), options);
    Client first_client(loop.get(), slow_polling(masters.options()));
    Client second_client(loop.get(), slow_polling(masters.options()));
    std::size_t gate = gate_of("{early}", options);
    Answer held = try_lock_everywhere(loop, releaser, masters, "early", 30s);
    Waiting first(first_client, "early", 10s, 20s);
    (void)queued_alone(loop, masters, gate, "{early}");
    let_it_try(loop);
    Waiting second(second_client, "early", 10s, 20s);
    (void)queued_two(loop, masters, gate, "{early}");
    REQUIRE(attempts_over(loop, second_client, [] { return true; }));
    std::uint64_t second_asked = votes_asked(second_client);
    // At the gate, in this order: the release (it wakes and reserves for
    // `first`), the try_lock's SET and its unlock; then first's claim.
    masters[gate].pause();
    REQUIRE_FALSE(unlock(loop, releaser, held.lock));
    Answer again = try_lock(loop, releaser, "early", 30s);
    REQUIRE_FALSE(again.error);
    REQUIRE_FALSE(unlock(loop, releaser, again.lock));
    masters[gate].resume();
    REQUIRE(loop.run_until([&] { return first.done(); }, 5s));
    REQUIRE_FALSE(first.answer->error);
    CHECK(held_everywhere(masters, "{early}", first.answer->lock.value));
    let_it_try(loop);
    CHECK_FALSE(second.done());
    CHECK(votes_asked(second_client) == second_asked);  // not woken
    CHECK_FALSE(unlock(loop, first_client, first.answer->lock));
    REQUIRE(loop.run_until([&] { return second.done(); }, 5s));
    REQUIRE_FALSE(second.answer->error);
    CHECK_FALSE(unlock(loop, second_client, second.answer->lock));
  }
  REQUIRE(loop.close());
}

// Hardening 2, from the review of a SIGSTOPped gate: an attempt written to a
// paused gate runs when it comes back, after its owner has gone, and leaves a
// key nobody releases there. It must not turn every waiter away for its ttl.
TEST_CASE("a key nobody will release at the gate turns waiters away for a few retry delays, not its ttl",
          "[wait][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_delay = 100ms;
    options.retry_jitter = 0ms;
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock(loop, holder, "orphaned", 10s);
    REQUIRE_FALSE(held.error);
    std::size_t gate = gate_of("{orphaned}", options);
    masters[gate].set("{orphaned}", "orphan", 30s);  // the holder holds the other two
    Waiting waiter(waiter_client, "orphaned", 10s, 8s);
    REQUIRE(loop.run_until([&] { return masters.queued_on("{orphaned}", 1).size() == 1; }, 5s));
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    auto released = steady::now();
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 8s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 2s);
    CHECK(holders(masters, "{orphaned}", waiter.answer->lock.value) == 2);
    CHECK(masters[gate].get("{orphaned}") == "orphan");  // never written over
    CHECK_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
  }
  REQUIRE(loop.close());
}

// Hardening 2, reasoned: the holder's key is gone from the gate (the gate was
// down when it was taken, or lost it), so its unlock finds nothing of its own
// there; the queue must still be woken, not wait for retry_delay.
TEST_CASE("a queued waiter is woken by an unlock whose key the gate no longer has", "[wait][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "gate-forgot", 30s);
    REQUIRE_FALSE(held.error);
    Waiting waiter(waiter_client, "gate-forgot", 10s, 8s);
    std::vector<std::size_t> gate;
    REQUIRE(loop.run_until([&] { return (gate = masters.queued_on("{gate-forgot}", 1)).size() == 1; }, 5s));
    masters[gate[0]].command({"DEL", "{gate-forgot}"});
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    auto released = steady::now();
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 8s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 1s);  // retry_delay is 10 s
    CHECK_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
  }
  REQUIRE(loop.close());
}

// Hardening 2, reasoned: a waiter that died waiting "without end" leaves its
// queue for a few retry delays, not for as long as it would have waited.
TEST_CASE("a queue whose only waiter died expires within retry_delay + jitter + 1 s", "[wait][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Answer held = try_lock(loop, holder, "deserted", 30s);
    REQUIRE_FALSE(held.error);
    std::vector<std::size_t> gate;
    {
      Client waiter_client(loop.get(), masters.options());
      Waiting waiter(waiter_client, "deserted", 10s, std::chrono::hours(24 * 365));
      REQUIRE(loop.run_until([&] { return (gate = masters.queued_on("{deserted}", 1)).size() == 1; }, 5s));
      // It dies without leaving the queue: its process is gone, nothing says so.
      long long left = masters[gate[0]].pttl("{deserted}:queue");
      CHECK(left > 0);
      CHECK(left <= 200 + 200 + 1000);  // retry_delay + retry_jitter + 1 s
    }
    CHECK_FALSE(unlock(loop, holder, held.lock));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a waiter that wins the other masters while the gate refuses leaves no entry in the gate's queue",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock(loop, holder, "won", 10s);
    REQUIRE_FALSE(held.error);
    std::size_t gate = gate_of("{won}", options);
    // A key nobody releases at the gate (a release that never got there).
    masters[gate].set("{won}", "orphan", 30s);
    Waiting waiter(waiter_client, "won", 10s, 8s);
    std::string channel = queued_alone(loop, masters, gate, "{won}");
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 8s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(holders(masters, "{won}", waiter.answer->lock.value) == 2);
    INFO("wake channel " << channel);
    CHECK(queue_empties(loop, masters[gate], "{won}"));
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

// (Found by review of a version that sent the ZREM of a line that emptied
// while its request's answer was still to come once that answer came: after
// the next line's request, so it took the next line's entry out.)
TEST_CASE("a new wait for a key whose last wait left before the gate answered stays in the gate's queue",
          "[wait][queue][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    std::vector<std::unique_ptr<FaultProxy>> proxies;
    Options options = through_proxies(masters, proxies, 1500ms);
    // Under a second: a retry still finds the key contended and asks the gate.
    options.retry_delay = 800ms;
    options.retry_jitter = 0ms;
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "again", 60s);
    std::size_t gate = gate_of("{again}", options);
    Waiting first(waiter_client, "again", 60s, 30s);
    (void)queued_alone(loop, masters, gate, "{again}");
    REQUIRE(unsubscribed_at(loop, masters[gate], "{again}"));
    Monitor monitor(masters[gate]);
    // Its next attempt (its timer) reaches the gate slowly; it is cancelled
    // meanwhile, and a second wait starts and asks the gate before the
    // first's answer is back.
    auto before = proxies[gate]->requests_seen();
    proxies[gate]->delay(300ms);
    REQUIRE(loop.run_until([&] { return proxies[gate]->requests_seen() > before; }, 5s));
    waiter_client.cancel(first.id);
    REQUIRE(loop.run_until([&] { return first.done(); }, 2s));
    REQUIRE(first.answer->error == errc::canceled);
    auto seen = proxies[gate]->requests_seen();
    Waiting second(waiter_client, "again", 60s, 30s);
    REQUIRE(loop.run_until([&] { return proxies[gate]->requests_seen() > seen; }, 2s));
    proxies[gate]->pass();
    // Both requests to queue us ran at the gate (the proxy keeps the order).
    REQUIRE(loop.run_until(
        [&] { return positions(monitor.requests(), scripts::acquire_or_queue.sha1).size() >= 2; }, 3s));
    REQUIRE_FALSE(second.done());
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return second.done(); }, 5s));
    REQUIRE_FALSE(second.answer->error);
    REQUIRE_FALSE(unlock(loop, waiter_client, second.answer->lock));
    REQUIRE(loop.run_until([&] { return !masters[gate].get("{again}"); }, 5s));
    const std::vector<std::string>& requests = monitor.requests();
    INFO("the gate's requests:\n" << joined(requests));
    // No ZREM ran between the second wait's request (the second that queues
    // us) and the holder's unlock: none took its entry out.
    std::vector<std::size_t> queue_requests = positions(requests, scripts::acquire_or_queue.sha1);
    REQUIRE(queue_requests.size() >= 2);
    std::size_t second_request = queue_requests[1];
    std::vector<std::size_t> unlocks = positions(requests, scripts::unlock_and_wake.sha1);
    auto holder_unlock =
        std::find_if(unlocks.begin(), unlocks.end(), [&](std::size_t i) { return i >= second_request; });
    REQUIRE(holder_unlock != unlocks.end());
    for (std::size_t i = second_request; i < *holder_unlock; ++i)
      CHECK(count_command({requests[i]}, "ZREM") == 0);
    // Woken by the release, not by its timer.
    CHECK(*second.answered_at - released < 400ms);
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "a Client closed or destroyed while its last request's answer is awaited leaves no entry in the queue",
    "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    std::vector<std::unique_ptr<FaultProxy>> proxies;
    Options options = through_proxies(masters, proxies, 1500ms);
    options.retry_delay = 600ms;
    options.retry_jitter = 0ms;
    Client holder(loop.get(), options);
    auto waiter_client = std::make_unique<Client>(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "gone", 60s);
    std::size_t gate = gate_of("{gone}", options);
    Waiting waiter(*waiter_client, "gone", 60s, 30s);
    std::string channel = queued_alone(loop, masters, gate, "{gone}");
    REQUIRE(unsubscribed_at(loop, masters[gate], "{gone}"));
    // Its next attempt (its timer) waits in the paused gate's socket: the
    // gate runs it when it resumes, after the Client is gone.
    auto before = proxies[gate]->requests_seen();
    masters[gate].pause();
    REQUIRE(loop.run_until([&] { return proxies[gate]->requests_seen() > before; }, 3s));
    waiter_client->cancel(waiter.id);
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 2s));
    bool destroy = GENERATE(true, false);
    if (destroy) {
      waiter_client.reset();
    } else {
      bool closed = false;
      waiter_client->close([&closed] { closed = true; });
      masters[gate].resume();
      REQUIRE(loop.run_until([&] { return closed; }, 8s));
    }
    masters[gate].resume();
    INFO("wake channel " << channel);
    CHECK(queue_empties(loop, masters[gate], "{gone}"));
    waiter_client.reset();
    CHECK_FALSE(unlock(loop, holder, held.lock));
  }
  REQUIRE(loop.close());
}

TEST_CASE("an unlock written before the gate's answer to the attempt still finds our queue entry gone",
          "[wait][queue][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    std::vector<std::unique_ptr<FaultProxy>> proxies;
    Options options = through_proxies(masters, proxies, 1500ms);
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "early", 30s);
    std::size_t gate = gate_of("{early}", options);
    // A key nobody releases at the gate: the waiter's next attempt is refused
    // there, queued again, and wins on the others.
    masters[gate].set("{early}", "orphan", 30s);
    Waiting waiter(waiter_client, "early", 10s, 8s);
    (void)queued_alone(loop, masters, gate, "{early}");
    Monitor monitor(masters[gate]);
    proxies[gate]->delay(100ms);
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 8s));
    REQUIRE_FALSE(waiter.answer->error);
    // Unlocked before the gate's refusal is back: the gate, free by then,
    // would wake the head of its queue.
    masters[gate].command({"DEL", "{early}"});
    REQUIRE_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
    // The gate's requests from the holder's unlock on; the second unlock is
    // the waiter's.
    std::vector<std::string> requests;
    REQUIRE(loop.run_until(
        [&] {
          requests = monitor.requests();
          return positions(requests, scripts::unlock_and_wake.sha1).size() >= 2;
        },
        3s));
    INFO("the gate's requests:\n" << joined(requests));
    auto zrems = positions(requests, "\"ZREM\"");
    REQUIRE(zrems.size() == 1);
    CHECK(zrems[0] < positions(requests, scripts::unlock_and_wake.sha1)[1]);
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a wait that ends while the gate does not answer leaves no entry in its queue once it answers",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "late", 30s);
    std::size_t gate = gate_of("{late}", options);
    bool cancel = GENERATE(false, true);
    Waiting waiter(waiter_client, "late", 10s, cancel ? 20s : 2s);
    std::string channel = queued_alone(loop, masters, gate, "{late}");
    masters[gate].pause();
    if (cancel) {
      let_it_try(loop);  // an attempt goes to the gate and waits there
      waiter_client.cancel(waiter.id);
    }
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    CHECK(waiter.answer->error == (cancel ? errc::canceled : errc::timeout));
    masters[gate].resume();
    INFO("wake channel " << channel);
    CHECK(queue_empties(loop, masters[gate], "{late}"));
    CHECK_FALSE(unlock(loop, holder, held.lock));
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("closing or destroying a Client whose waiter is queued takes it out of the queue",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    Client holder(loop.get(), options);
    auto waiter_client = std::make_unique<Client>(loop.get(), options);
    Answer held = try_lock(loop, holder, "closed", 30s);
    REQUIRE_FALSE(held.error);
    std::size_t gate = gate_of("{closed}", options);
    Waiting waiter(*waiter_client, "closed", 10s, 20s);
    std::string channel = queued_alone(loop, masters, gate, "{closed}");
    if (GENERATE(false, true)) {
      waiter_client->close(nullptr);
    } else {
      waiter_client.reset();
    }
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    CHECK(waiter.answer->error == errc::closed);
    INFO("wake channel " << channel);
    CHECK(queue_empties(loop, masters[gate], "{closed}"));
    waiter_client.reset();
    CHECK_FALSE(unlock(loop, holder, held.lock));
  }
  REQUIRE(loop.close());
}

// The gate stops answering for a moment: the waiter's connection to it drops,
// the next master in rank is its gate meanwhile, and it queues there too. Once
// the gate is back, unlocks wake the queue there; the other is never popped.
TEST_CASE("a waiter queued at a master that stopped being the gate leaves no entry there", "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "moved", 30s);
    std::size_t gate = gate_of("{moved}", options);
    std::size_t second = second_gate_of("{moved}", options);
    Waiting waiter(waiter_client, "moved", 10s, 20s);
    std::string channel = queued_alone(loop, masters, gate, "{moved}");
    masters[gate].pause();
    REQUIRE(loop.run_until([&] { return queue_at(masters[second], "{moved}") == channel; }, 5s));
    REQUIRE(masters[second].command({"PEXPIRE", "{moved}:queue", "60000"}) == "1");
    masters[gate].resume();
    // Back: its queue (ours is still in it) is the gate's again.
    REQUIRE(loop.run_until([&] { return waiter_client.stats().masters[gate].state == MasterState::up; }, 5s));
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    INFO("wake channel " << channel << ", gate " << gate << ", second " << second);
    CHECK(queue_empties(loop, masters[gate], "{moved}"));
    CHECK(queue_empties(loop, masters[second], "{moved}"));
    CHECK_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

// The same with a waiter that queued at the second master because its Client
// saw the gate down when it began to wait: once the gate votes again, the
// unlocks wake the queue there, and the waiter must queue there too, not
// sleep to its retry_delay with its entry at the second (helper-27's finding).
TEST_CASE(
    "a waiter queued at the second master moves to the gate when it votes again, and the next release wakes "
    "it",
    "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), slow_polling(options));
    Answer held = try_lock_everywhere(loop, holder, masters, "requeued", 30s);
    std::size_t gate = gate_of("{requeued}", options);
    std::size_t second = second_gate_of("{requeued}", options);
    // A first wait opens the waiter's subscriber connections, which stay up.
    Waiting first(waiter_client, "requeued", 10s, 300ms);
    REQUIRE(loop.run_until([&] { return first.done(); }, 5s));
    REQUIRE(first.answer->error == errc::timeout);
    masters[gate].pause();
    stop_voting_at(loop, waiter_client, gate, "requeued-other");
    Waiting waiter(waiter_client, "requeued", 10s, 20s);
    REQUIRE(loop.run_until([&] { return !queue_at(masters[second], "{requeued}").empty(); }, 5s));
    std::string channel = queue_at(masters[second], "{requeued}");
    REQUIRE(channel.rfind("wake:", 0) != std::string::npos);
    masters[gate].resume();
    REQUIRE(loop.run_until([&] { return waiter_client.stats().masters[gate].state == MasterState::up; }, 5s));
    // Back: the waiter queues at the gate, where unlocks wake the queue.
    REQUIRE(loop.run_until([&] { return queue_at(masters[gate], "{requeued}") == channel; }, 5s));
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 1s);  // not its retry_delay (10 s)
    CHECK(queue_empties(loop, masters[gate], "{requeued}"));
    CHECK(queue_empties(loop, masters[second], "{requeued}"));
    CHECK_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

// helper-28's review: the gate's command connections time out (it is
// paused), but a waiter's subscriber there, which sends nothing, stays up:
// the waiter stayed queued where no unlock wakes, to its retry_delay.
TEST_CASE(
    "a waiter queued at its gate moves to the next master when the gate stops voting, and wakes at the "
    "release",
    "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), slow_polling(options));
    Answer held = try_lock_everywhere(loop, holder, masters, "stalled", 30s);
    std::size_t gate = gate_of("{stalled}", options);
    std::size_t second = second_gate_of("{stalled}", options);
    Waiting waiter(waiter_client, "stalled", 10s, 20s);
    std::string channel = queued_alone(loop, masters, gate, "{stalled}");
    // Queued, it stops listening to releases after a linger: the gate has
    // answered that UNSUBSCRIBE before it pauses.
    for (std::size_t i = 0; i < masters.size(); ++i) REQUIRE(unsubscribed_at(loop, masters[i], "{stalled}"));
    masters[gate].pause();
    stop_voting_at(loop, waiter_client, gate, "stalled-other");
    stop_voting_at(loop, holder, gate, "stalled-other");
    REQUIRE(loop.run_until([&] { return queue_at(masters[second], "{stalled}") == channel; }, 5s));
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 1s);  // not its retry_delay (10 s)
    masters[gate].resume();
    CHECK_FALSE(unlock(loop, waiter_client, waiter.answer->lock));
    waiter_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

// helper-28's review: a waiter cancelled as the gate popped it, its Client
// closed before it read the wake, left the key reserved for nobody, and the
// next waiter slept to its retry_delay. The unlock here is another
// process's, run on the masters while our loop does not run.
TEST_CASE("a waiter cancelled and closed as the gate wakes it passes the wake on to the next",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = slow_polling(masters.options());
    Client holder(loop.get(), masters.options());
    Client first_client(loop.get(), options);
    Client second_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "passed", 30s);
    std::size_t gate = gate_of("{passed}", options);
    Waiting first(first_client, "passed", 10s, 20s);
    queued_alone(loop, masters, gate, "{passed}");
    Waiting second(second_client, "passed", 10s, 20s);
    REQUIRE(loop.run_until([&] { return masters[gate].command({"ZCARD", "{passed}:queue"}) == "2"; }, 5s));
    std::string reservation = std::to_string(options.command_timeout.count());
    for (std::size_t i = 0; i < masters.size(); ++i) {
      const Script& script = i == gate ? scripts::unlock_and_wake : scripts::unlock;
      std::vector<std::string> argv{"EVAL",     std::string(script.body), "2",
                                    "{passed}", "{passed}:listening",     held.lock.value};
      if (i == gate) argv.push_back(reservation);
      masters[i].command(argv);
    }
    REQUIRE(masters[gate].command({"EXISTS", "{passed}:reserved"}) == "1");  // kept for the first
    first_client.cancel(first.id);
    first_client.close(nullptr);
    auto released = steady::now();
    REQUIRE(loop.run_until([&] { return second.done(); }, 15s));
    REQUIRE_FALSE(second.answer->error);
    CHECK(*second.answered_at - released < 1s);  // not its retry_delay (10 s)
    CHECK_FALSE(unlock(loop, second_client, second.answer->lock));
    second_client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an unlock from a Client whose connections are not up yet wakes the waiter queued at the gate",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client holder(loop.get(), masters.options());
    Client waiter_client(loop.get(), slow_polling(masters.options()));
    Answer held = try_lock(loop, holder, "fresh", 30s);
    REQUIRE_FALSE(held.error);
    std::size_t gate = gate_of("{fresh}", masters.options());
    Waiting waiter(waiter_client, "fresh", 10s, 20s);
    (void)queued_alone(loop, masters, gate, "{fresh}");
    // As `redlock release` does: a new Client's first call is the unlock.
    Client releaser(loop.get(), masters.options());
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, releaser, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 5s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < scaled(200ms));  // not its 10 s retry_delay
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "an unlock from a new Client whose connection to the gate is not up yet wakes the waiter queued there",
    "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = slow_polling(masters.options());
    options.command_timeout = 5s;  // no connection drops during the CLIENT PAUSE below
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "slow-gate", 60s);
    std::size_t gate = gate_of("{slow-gate}", options);
    Waiting waiter(waiter_client, "slow-gate", 10s, 40s);
    (void)queued_alone(loop, masters, gate, "{slow-gate}");
    // The gate runs no new command for 1.5 s: a new Client's handshake there waits.
    REQUIRE(masters[gate].command({"CLIENT", "PAUSE", "1500", "ALL"}) == "OK");
    Client releaser(loop.get(), options);
    REQUIRE(loop.run_until(
        [&] {
          auto s = releaser.stats().masters;
          int up = 0;
          for (std::size_t i = 0; i < s.size(); ++i) up += i != gate && s[i].state == MasterState::up ? 1 : 0;
          return up == 2;
        },
        1s));
    REQUIRE(releaser.stats().masters[gate].state != MasterState::up);
    auto released = steady::now();
    releaser.unlock(held.lock, nullptr);
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 15s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 2500ms);  // the pause, not the 10 s retry_delay
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "a new Client's unlock wakes a waiter queued at the next master while the usual gate was down for it",
    "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = slow_polling(masters.options());
    Client holder(loop.get(), options);
    Client waiter_client(loop.get(), options);
    Answer held = try_lock_everywhere(loop, holder, masters, "gate-down", 60s);
    std::size_t gate = gate_of("{gate-down}", options);
    masters[gate].pause();
    Waiting waiter(waiter_client, "gate-down", 10s, 40s);
    // Queued at another master, its gate while the usual one is paused.
    REQUIRE(loop.run_until(
        [&] {
          for (std::size_t i = 0; i < masters.size(); ++i) {
            if (i != gate && queue_at(masters[i], "{gate-down}").rfind("wake:", 0) == 0) return true;
          }
          return false;
        },
        8s));
    Client releaser(loop.get(), options);
    auto released = steady::now();
    REQUIRE_FALSE(unlock(loop, releaser, held.lock));
    REQUIRE(loop.run_until([&] { return waiter.done(); }, 15s));
    REQUIRE_FALSE(waiter.answer->error);
    CHECK(*waiter.answered_at - released < 2s);  // not the 10 s retry_delay
    masters[gate].resume();
  }
  REQUIRE(loop.close());
}

TEST_CASE("a Client closed with a queue wake it has not read passes the wake on to the next waiter",
          "[wait][queue]") {
  Cluster masters(3);
  LoopFixture loop;
  LoopFixture holder_loop;  // the holder runs apart, so that A's loop does not read the wake meanwhile
  {
    Options options = slow_polling(masters.options());
    options.command_timeout = 1s;  // the reservation lasts this long: long enough to see it
    Client holder(holder_loop.get(), options);
    auto a = std::make_unique<Client>(loop.get(), options);
    Client b(loop.get(), options);
    Answer held = try_lock_everywhere(holder_loop, holder, masters, "unread", 30s);
    std::size_t gate = gate_of("{unread}", options);
    Waiting wa(*a, "unread", 10s, 25s);
    REQUIRE(loop.run_until([&] { return masters.queued_on("{unread}", 1) == std::vector<std::size_t>{gate}; },
                           5s));
    Waiting wb(b, "unread", 10s, 25s);
    REQUIRE(loop.run_until([&] { return masters.queued_on("{unread}", 2) == std::vector<std::size_t>{gate}; },
                           5s));
    REQUIRE_FALSE(unlock(holder_loop, holder, held.lock));
    // The gate popped A and reserved the key for it; A's loop has not run since.
    REQUIRE(eventually([&] {
      return masters[gate].command({"GET", "{unread}:reserved"}).rfind("wake:", 0) == 0;
    }));
    bool close_a = GENERATE(true, false);
    auto stopped = steady::now();
    if (close_a) {
      a->close(nullptr);
    } else {
      a->cancel(wa.id);  // the line leaves; the wake is heard with no line and passed on
    }
    REQUIRE(loop.run_until([&] { return wb.done(); }, 15s));
    REQUIRE_FALSE(wb.answer->error);
    CHECK(*wb.answered_at - stopped < 2s);  // not B's 10 s retry_delay
    REQUIRE_FALSE(unlock(loop, b, wb.answer->lock));
    a.reset();
  }
  REQUIRE(holder_loop.close());
  REQUIRE(loop.close());
}
