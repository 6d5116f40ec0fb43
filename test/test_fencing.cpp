#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

Options fenced(Options o) {
  o.fencing = true;
  o.retry_count = 2;
  o.retry_delay = 10ms;
  o.retry_jitter = 10ms;
  o.command_timeout = 200ms;
  return o;
}

std::uint64_t counter(RedisServer& master, const std::string& key) {
  auto stored = master.get(key + ":fencing");
  return stored ? std::stoull(*stored) : 0;
}

// Lock, check the token, unlock, again, until `target` grants in all.
struct Handoffs {
  int target = 0;
  int granted = 0;
  int failed = 0;
  int stopped = 0;  // chains that ended
  int inversions = 0;
  std::uint64_t last = 0;
};

void contend(Client& client, Handoffs& h) {
  client.lock("shared", 2s, 10s, [&client, &h](std::error_code error, Lock lock) {
    if (error) {
      ++h.failed;
      ++h.stopped;
      return;
    }
    // Grants arrive in order on this one loop: a grant needs the previous
    // holder's unlock, which is issued only after its grant was answered.
    if (lock.fencing_token <= h.last) ++h.inversions;
    h.last = lock.fencing_token;
    ++h.granted;
    client.unlock(lock, [&client, &h](std::error_code) {
      if (h.granted < h.target) {
        contend(client, h);
      } else {
        ++h.stopped;
      }
    });
  });
}

}  // namespace

TEST_CASE("without fencing the token is 0 and no counter is written", "[fencing]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "plain", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(a.lock.fencing_token == 0);
    for (std::size_t i = 0; i < masters.size(); ++i) CHECK_FALSE(masters[i].get("{plain}:fencing"));
    CHECK_FALSE(unlock(loop, client, a.lock));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a fenced lock's token is on a majority's counter and extend keeps it", "[fencing]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = fenced(masters.options());
    options.key_prefix = "app:";
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "job", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(a.lock.fencing_token > 0);
    int written = 0;
    for (std::size_t i = 0; i < masters.size(); ++i) {
      if (counter(masters[i], "app:{job}") != a.lock.fencing_token) continue;  // a straggler
      ++written;
      // The counter forgets a day after its last fence round.
      CHECK(masters[i].pttl("app:{job}:fencing") > 86'400'000 - 60'000);
      CHECK(masters[i].pttl("app:{job}:fencing") <= 86'400'000);
    }
    CHECK(written >= 2);

    Answer e = extend(loop, client, a.lock, 5s);
    REQUIRE_FALSE(e.error);
    CHECK(e.lock.fencing_token == a.lock.fencing_token);
    CHECK_FALSE(unlock(loop, client, e.lock));

    Answer b = lock(loop, client, "job", 5s);
    REQUIRE_FALSE(b.error);
    CHECK(b.lock.fencing_token > a.lock.fencing_token);
    CHECK_FALSE(unlock(loop, client, b.lock));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("tokens increase across 1,000 handoffs between 3 clients", "[fencing]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = fenced(masters.options());
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 3; ++i) clients.push_back(std::make_unique<Client>(loop.get(), options));
    Handoffs h;
    h.target = 1000;
    for (auto& c : clients) contend(*c, h);
    REQUIRE(loop.run_until([&] { return h.stopped == 3; }, 120s));
    CHECK(h.failed == 0);
    CHECK(h.granted >= 1000);
    CHECK(h.inversions == 0);
    int written = 0;
    for (std::size_t i = 0; i < masters.size(); ++i)
      written += counter(masters[i], "{shared}") == h.last ? 1 : 0;
    CHECK(written >= 2);
    for (auto& c : clients) c->close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("tokens keep increasing across a minority master killed and restarted empty", "[fencing]") {
  Cluster masters(3);
  FaultProxy to_m1(masters[1].port());
  FaultProxy to_m2(masters[2].port());
  LoopFixture loop;
  {
    Options options = fenced(masters.options());
    options.masters[1] = to_m1.endpoint();
    options.masters[2] = to_m2.endpoint();
    Client client(loop.get(), options);

    // The first token is written on masters 0 and 1 only.
    to_m2.blackhole();
    Answer a = try_lock(loop, client, "job", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(counter(masters[0], "{job}") == a.lock.fencing_token);
    CHECK(counter(masters[1], "{job}") == a.lock.fencing_token);
    CHECK(counter(masters[2], "{job}") == 0);
    CHECK_FALSE(unlock(loop, client, a.lock));

    // Master 0 forgets it; the next majority is masters 0 and 2, so no master
    // that grants remembers the first token.
    masters[0].restart(false);
    CHECK_FALSE(masters[0].get("{job}:fencing"));
    to_m2.pass();
    to_m1.blackhole();
    Answer b =
        await_answer(loop, [&](Client::LockCallback cb) { client.lock("job", 5s, 10s, std::move(cb)); });
    REQUIRE_FALSE(b.error);
    CHECK(b.lock.fencing_token > a.lock.fencing_token);
    CHECK(counter(masters[0], "{job}") == b.lock.fencing_token);
    CHECK(counter(masters[2], "{job}") == b.lock.fencing_token);
    CHECK(counter(masters[1], "{job}") == a.lock.fencing_token);
    CHECK_FALSE(unlock(loop, client, b.lock));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an attempt whose second round reaches no majority yields no token", "[fencing]") {
  Cluster masters(3);
  FaultProxy to_m1(masters[1].port());
  FaultProxy to_m2(masters[2].port());
  LoopFixture loop;
  {
    Options options = fenced(masters.options());
    options.masters[1] = to_m1.endpoint();
    options.masters[2] = to_m2.endpoint();
    Client client(loop.get(), options);
    // Connect everywhere first: the handshake's requests are not counted
    // below. A quorum answers without master 1, so warm up until it holds
    // the warm-up lock too, and until the unlock has passed its proxy.
    bool master1_up = false;
    for (int i = 0; i < 20 && !master1_up; ++i) {
      Answer warm = try_lock(loop, client, "warm-up", 5s);
      REQUIRE_FALSE(warm.error);
      master1_up = loop.run_until([&] { return masters[1].get("{warm-up}") == warm.lock.value; }, 500ms);
      CHECK_FALSE(unlock(loop, client, warm.lock));
      REQUIRE(loop.run_until([&] { return !masters[1].get("{warm-up}"); }, 5s));
    }
    REQUIRE(master1_up);

    // Master 2 never answers; master 1 grants, then swallows the second round.
    to_m2.blackhole();
    to_m1.blackhole_after(1);
    Answer a = try_lock(loop, client, "job", 5s);
    CHECK(a.error == errc::unavailable);
    CHECK(a.lock.fencing_token == 0);
    std::uint64_t raised = counter(masters[0], "{job}");
    CHECK(raised > 0);  // the second round ran on master 0 alone
    auto value = masters[1].get("{job}");
    REQUIRE(value);  // the first round did grant on master 1
    CHECK(counter(masters[1], "{job}") == 0);
    CHECK(eventually([&] { return !masters[0].get("{job}"); }));  // released where it could be

    // Faults gone: the next grant's token is above everything written.
    to_m1.pass();
    to_m2.pass();
    Answer b =
        await_answer(loop, [&](Client::LockCallback cb) { client.lock("job", 1s, 10s, std::move(cb)); });
    REQUIRE_FALSE(b.error);
    CHECK(b.lock.fencing_token > raised);
    CHECK_FALSE(unlock(loop, client, b.lock));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("continue_lock keeps its token while held and gets a larger one after a gap", "[fencing]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = fenced(masters.options());
    Client first(loop.get(), options);
    Client second(loop.get(), options);

    Answer a = try_lock(loop, first, "leader", 5s);
    REQUIRE_FALSE(a.error);
    Answer kept = continue_lock(loop, first, a.lock, 300ms);
    REQUIRE_FALSE(kept.error);
    CHECK(kept.lock.continued);
    CHECK(kept.lock.fencing_token == a.lock.fencing_token);

    // The lock runs out; another client holds it and lets it go.
    REQUIRE(loop.run_until([&] { return !kept.lock.valid(); }, 2s));
    REQUIRE(held_nowhere(masters, "{leader}"));
    Answer other = try_lock(loop, second, "leader", 5s);
    REQUIRE_FALSE(other.error);
    CHECK(other.lock.fencing_token > a.lock.fencing_token);
    CHECK_FALSE(unlock(loop, second, other.lock));

    Answer again = continue_lock(loop, first, kept.lock, 5s);
    REQUIRE_FALSE(again.error);
    CHECK_FALSE(again.lock.continued);
    CHECK(again.lock.fencing_token > other.lock.fencing_token);
    CHECK_FALSE(unlock(loop, first, again.lock));
    first.close(nullptr);
    second.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a counter that is not a number fails the vote before anything is written", "[fencing]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].set("{job}:fencing", "not-a-number");
    Client client(loop.get(), fenced(masters.options()));
    Answer a = try_lock(loop, client, "job", 5s);
    CHECK(a.error == errc::unavailable);
    CHECK(held_nowhere(masters, "{job}"));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

// Hardening 2, item 5.
TEST_CASE("fencing counters expire: a counter forgotten on every master still gives a larger token",
          "[fencing]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), fenced(masters.options()));
    Answer a = lock(loop, client, "forgetful", 5s);
    REQUIRE_FALSE(a.error);
    CHECK_FALSE(unlock(loop, client, a.lock));
    // What a released resource leaves on the masters: counters that expire.
    for (std::size_t i = 0; i < masters.size(); ++i) {
      long long left = masters[i].pttl("{forgetful}:fencing");
      CHECK((left == -2 || left > 86'400'000 - 60'000));
    }
    // They expired (a day later): every master reads its clock instead.
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].command({"DEL", "{forgetful}:fencing"});
    Answer b = lock(loop, client, "forgetful", 5s);
    REQUIRE_FALSE(b.error);
    CHECK(b.lock.fencing_token > a.lock.fencing_token);
    CHECK_FALSE(unlock(loop, client, b.lock));

    // A ttl longer than a day keeps the counter at least that long.
    Answer c = lock(loop, client, "forgetful", std::chrono::hours(48));
    REQUIRE_FALSE(c.error);
    int long_lived = 0;
    for (std::size_t i = 0; i < masters.size(); ++i)
      long_lived += masters[i].pttl("{forgetful}:fencing") > 48LL * 3'600'000 - 60'000 ? 1 : 0;
    CHECK(long_lived >= 2);
    CHECK_FALSE(unlock(loop, client, c.lock));
  }
  REQUIRE(loop.close());
}
