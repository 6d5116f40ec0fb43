#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "keeper.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
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
    CHECK(lost.calls == std::vector<std::error_code>{});
    CHECK(holders(masters, "{kept}", a.lock.value) == 3);
    CHECK_FALSE(unlock(loop, client, a.lock));
    CHECK(held_nowhere(masters, "{kept}"));
    loop.run_until([] { return false; }, 300ms);  // renewals would be due
    CHECK(lost.calls == std::vector<std::error_code>{});
    CHECK(held_nowhere(masters, "{kept}"));
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
    REQUIRE(held_everywhere(masters, "{taken}", a.lock.value));
    Lost lost;
    client.keep(a.lock, {100ms, 0ms}, lost.callback());
    for (std::size_t i = 0; i < 2; ++i) masters[i].set("{taken}", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 2s));
    loop.run_until([] { return false; }, 300ms);
    REQUIRE(lost.calls.size() == 1);
    CHECK(lost.calls[0] == errc::not_held);
    CHECK(gone_everywhere(masters, "{taken}", a.lock.value));
  }
  REQUIRE(loop.close());
}

TEST_CASE("extending a kept lock moves its renewals to the new ttl; a refused extension ends the hold",
          "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "stretched", 300ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    int renewals = 0;
    client.keep(a.lock, {}, lost.callback(), [&](steady::time_point) { ++renewals; });
    Answer longer = extend(loop, client, a.lock, 3000ms);
    REQUIRE_FALSE(longer.error);
    CHECK(renewals == 1);  // the extension counts as one, with its validity
    // Renewing at the old ttl would leave at most 300 ms on the masters; the
    // period follows the ttl too (1 s), so wait for one renewal after it.
    REQUIRE(loop.run_until([&] { return renewals >= 2; }, 3000ms));
    // A round decides at a majority: the last master may answer a moment later.
    for (std::size_t i = 0; i < masters.size(); ++i)
      CHECK(eventually([&] { return masters[i].pttl("{stretched}") > 1500; }));
    CHECK(lost.calls.empty());

    for (std::size_t i = 0; i < 2; ++i) masters[i].set("{stretched}", "someone-else", 10s);
    Answer refused = extend(loop, client, longer.lock, 3000ms);
    CHECK(refused.error == errc::not_held);
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 1000ms));
    loop.run_until([] { return false; }, 300ms);  // a second notice would come within this
    REQUIRE(lost.calls.size() == 1);
    CHECK(lost.calls[0] == errc::not_held);
    CHECK(gone_everywhere(masters, "{stretched}", a.lock.value));
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
    CHECK(held_nowhere(masters, "{stalled}"));
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
    CHECK(held_nowhere(masters, "{capped}"));
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
    // Only the swapped value may end a hold: a slow reply on a busy machine
    // must not turn into a lost vote.
    Options options = masters.options();
    options.command_timeout = scaled(500ms);
    Client client(loop.get(), options);
    std::vector<Lock> locks;
    for (int i = 0; i < 5; ++i) {
      Answer a = try_lock(loop, client, "batch:" + std::to_string(i), 600ms);
      REQUIRE_FALSE(a.error);
      locks.push_back(a.lock);
    }
    std::vector<Lost> lost(locks.size());
    for (std::size_t i = 0; i < locks.size(); ++i) client.keep(locks[i], {100ms, 0ms}, lost[i].callback());
    for (std::size_t m = 0; m < 2; ++m) masters[m].set("{batch:2}", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return !lost[2].calls.empty(); }, 2s));
    loop.run_until([] { return false; }, 900ms);  // beyond the ttl of the others
    CHECK(lost[2].calls == std::vector<std::error_code>{make_error_code(errc::not_held)});
    CHECK(gone_everywhere(masters, "{batch:2}", locks[2].value));
    CHECK(masters[0].get("{batch:2}") == "someone-else");
    for (std::size_t i : {0, 1, 3, 4}) {
      CHECK(lost[i].calls.empty());
      CHECK(holders(masters, "{batch:" + std::to_string(i) + "}", locks[i].value) == 3);
      CHECK_FALSE(unlock(loop, client, locks[i]));
    }
  }
  REQUIRE(loop.close());
}

TEST_CASE("renewals keep a 300 ms lock held for seconds while contenders get not_acquired", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    // Only the renewals may keep it: a busy machine (sanitizers) must not
    // turn a slow reply into a lost vote.
    Options options = masters.options();
    options.command_timeout = scaled(500ms);
    Client holder(loop.get(), options);
    Client contender(loop.get(), options);  // a refusal, never a timed-out vote
    auto started = steady::now();
    Answer a = lock(loop, holder, "long", 300ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    holder.keep(a.lock, {}, lost.callback());
    int attempts = 0;
    int refused = 0;
    // Back to back for three seconds, ten ttls: each attempt must be refused.
    for (int i = 0; i < 100000 && steady::now() - started < 3s; ++i) {
      Answer c = try_lock(loop, contender, "long", 300ms);
      ++attempts;
      refused += c.error == errc::not_acquired ? 1 : 0;
      loop.run_until([] { return false; }, 20ms);
    }
    CHECK(attempts > 20);
    CHECK(refused == attempts);
    CHECK(lost.calls == std::vector<std::error_code>{});
    CHECK(holders(masters, "{long}", a.lock.value) == 3);
    CHECK_FALSE(unlock(loop, holder, a.lock));
    CHECK(held_nowhere(masters, "{long}"));
    CHECK_FALSE(try_lock(loop, contender, "long", 300ms).error);
  }
  REQUIRE(loop.close());
}

TEST_CASE("renewals go on with a minority of masters killed", "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = scaled(500ms);
    Client client(loop.get(), options);
    Answer a = lock(loop, client, "minority", 300ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    int renewed = 0;
    client.keep(a.lock, {}, lost.callback(), [&](steady::time_point) { ++renewed; });
    masters[2].kill9();
    int before = renewed;
    loop.run_until([] { return false; }, 1500ms);  // five ttls
    CHECK(renewed - before >= 5);
    CHECK(lost.calls == std::vector<std::error_code>{});
    CHECK(masters[0].get("{minority}") == a.lock.value);
    CHECK(masters[1].get("{minority}") == a.lock.value);
    CHECK_FALSE(unlock(loop, client, a.lock));
  }
  REQUIRE(loop.close());
}

TEST_CASE("with a majority of masters killed, on_lost(unavailable) comes before the validity ends",
          "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "majority", 600ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    steady::time_point valid_until = a.lock.valid_until;
    client.keep(a.lock, {100ms, 0ms}, lost.callback(), [&](steady::time_point v) { valid_until = v; });
    REQUIRE(loop.run_until([&] { return valid_until > a.lock.valid_until; }, 2s));
    masters[0].kill9();
    masters[1].kill9();
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 2s));
    CHECK(lost.calls[0] == errc::unavailable);
    CHECK(lost.at < valid_until);
    loop.run_until([] { return false; }, 300ms);
    CHECK(lost.calls.size() == 1);
    // Our value is deleted on the master still up.
    CHECK(eventually([&] { return masters[2].get("{majority}") != a.lock.value; }));
  }
  REQUIRE(loop.close());
}

TEST_CASE("renewal racing unlock, 10^4 times: no key left behind, no on_lost after unlock", "[keep][race]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    // A loaded machine must not turn a late reply into a lost vote: the race
    // is between renewal and unlock, not with the command timeout.
    Options options = masters.options();
    options.command_timeout = 1000ms;
    Client client(loop.get(), options);
    constexpr int rounds = 10000;
    std::mt19937 rng(13);
    int lost_before_unlock = 0;  // a renewal refused before unlock: allowed, counted
    int lost_after_unlock = 0;   // never
    int unlock_errors = 0;
    int done = 0;
    auto started = steady::now();
    for (int i = 0; i < rounds && steady::now() - started < scaled(120s); ++i) {
      std::string resource = "race:" + std::to_string(i % 100);
      Answer a = lock(loop, client, resource, 200ms);  // retries: the first may come before the connections
      REQUIRE_FALSE(a.error);
      auto unlocked = std::make_shared<bool>(false);
      // Renewing every millisecond: a renewal is in flight, about to be
      // written or just answered when unlock comes.
      client.keep(a.lock, {1ms, 0ms},
                  [&, unlocked](std::error_code) { ++(*unlocked ? lost_after_unlock : lost_before_unlock); });
      for (int turns = std::uniform_int_distribution<int>(0, 6)(rng); turns > 0; --turns) {
        uv_run(loop.get(), UV_RUN_NOWAIT);
      }
      *unlocked = true;
      if (unlock(loop, client, a.lock)) ++unlock_errors;
      ++done;
    }
    CHECK(done == rounds);
    loop.run_until([] { return false; }, 100ms);  // anything still posted runs
    CHECK(lost_after_unlock == 0);
    CHECK(lost_before_unlock <= rounds / 100);
    CHECK(unlock_errors <= lost_before_unlock);  // only a lock already lost can fail to unlock
    for (std::size_t m = 0; m < masters.size(); ++m) {
      CHECK(eventually([&] { return masters[m].command({"DBSIZE"}) == "0"; }));
    }
  }
  REQUIRE(loop.close());
}

namespace {

// What a child process that keeps a lock reports on its pipe, one byte each:
// 'r' a renewal, 'e' expired, 'n' not_held, 'u' unavailable, '?' anything else.
char event_byte(std::error_code e) {
  if (e == errc::expired) return 'e';
  if (e == errc::not_held) return 'n';
  if (e == errc::unavailable) return 'u';
  return '?';
}

[[noreturn]] void keep_in_child(const Options& options, int out, const std::string& resource) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  {
    Options patient = options;
    patient.command_timeout = scaled(500ms);  // only the pause may end the hold
    Client client(&loop, patient);
    bool ended = false;
    client.lock(resource, 300ms, [&](std::error_code e, Lock l) {  // retries: the connections may be slow
      if (e) {
        ended = true;
        (void)!write(out, "L", 1);
        return;
      }
      (void)!write(out, l.value.data(), l.value.size());
      (void)!write(out, "\n", 1);
      client.keep(
          l, {100ms, 0ms},
          [&, out](std::error_code lost) {
            char c = event_byte(lost);
            (void)!write(out, &c, 1);
            ended = true;
          },
          [out](steady::time_point) { (void)!write(out, "r", 1); });
    });
    while (!ended) uv_run(&loop, UV_RUN_ONCE);
    client.close(nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  _exit(0);
}

// Reads what is in the pipe now, or waits up to `deadline` for something.
std::string read_pipe(int fd, std::chrono::milliseconds deadline) {
  std::string got;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(scaled(deadline).count())) <= 0) return got;
  char buffer[256];
  for (int i = 0; i < 1000; ++i) {
    pollfd again{fd, POLLIN, 0};
    if (poll(&again, 1, 0) <= 0) break;
    ssize_t n = read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    got.append(buffer, static_cast<std::size_t>(n));
  }
  return got;
}

}  // namespace

TEST_CASE("a client SIGSTOPped past its validity reports expired first", "[keep][sigstop]") {
  Cluster masters(3);
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(fds[0]);
    keep_in_child(masters.options(), fds[1], "paused");
  }
  close(fds[1]);
  struct Reap {
    pid_t pid;
    ~Reap() {
      if (pid <= 0) return;
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{child};
  // The value, a line end, then one letter per event.
  std::string value = read_pipe(fds[0], 5s);
  for (int i = 0; i < 50 && value.find('\n') == std::string::npos; ++i) value += read_pipe(fds[0], 100ms);
  REQUIRE(value.find('\n') != std::string::npos);
  std::string events = value.substr(value.find('\n') + 1);
  value.resize(value.find('\n'));
  // Held and renewed at least once before the pause.
  for (int i = 0; i < 100 && events.find('r') == std::string::npos; ++i) events += read_pipe(fds[0], 100ms);
  REQUIRE(events.find('r') != std::string::npos);
  REQUIRE(kill(child, SIGSTOP) == 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, WUNTRACED) == child);
  REQUIRE(WIFSTOPPED(status));
  events += read_pipe(fds[0], 0ms);  // written before it stopped
  CHECK(events.find_first_not_of('r') == std::string::npos);
  std::this_thread::sleep_for(600ms);  // the pause itself: twice the ttl
  CHECK(holders(masters, "{paused}", value) == 0);
  REQUIRE(kill(child, SIGCONT) == 0);
  std::string after = read_pipe(fds[0], 5s);
  REQUIRE_FALSE(after.empty());
  CHECK(after[0] == 'e');
  CHECK(gone_everywhere(masters, "{paused}", value));
  REQUIRE(waitpid(child, &status, 0) == child);
  reap.pid = -1;
  CHECK(WIFEXITED(status));
  close(fds[0]);
}

// Hardening 2, item 2. The masters run commands in the order they were
// written; the keeper must let the last one's answer stand.
TEST_CASE(
    "an extension written while a renewal falls due: the validity that stands is the one the masters ran "
    "last",
    "[keep][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 3000ms;  // the masters are paused below, not failed
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "racing", 1500ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    steady::time_point reported{};
    client.keep(a.lock, {100ms, 0ms}, lost.callback(), [&](steady::time_point v) { reported = v; });
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].pause();
    auto extension = std::make_shared<Answer>();
    bool answered = false;
    client.extend(a.lock, 10000ms, [&, extension](std::error_code e, Lock l) {
      extension->error = e;
      extension->lock = std::move(l);
      answered = true;
    });
    // Two renewal periods pass with the extension unanswered: a renewal
    // written now would run after it on every master, at 1.5 s.
    loop.run_until([] { return false; }, 250ms);
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].resume();
    REQUIRE(loop.run_until([&] { return answered; }, 3000ms));
    REQUIRE_FALSE(extension->error);
    loop.run_until([] { return false; }, 50ms);  // anything still in flight answers
    CHECK(reported > steady::now() + 8000ms);
    // What the masters hold must cover what the hold reports.
    for (std::size_t i = 0; i < masters.size(); ++i) CHECK(masters[i].pttl("{racing}") > 8000);
    CHECK(lost.calls.empty());
    CHECK_FALSE(unlock(loop, client, a.lock));
  }
  REQUIRE(loop.close());
}

// Hardening 2, item 4.
TEST_CASE("extending or continuing a kept lock with the Lock as first taken uses the hold's validity",
          "[keep][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.fencing = true;
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "first-taken", 300ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    int renewals = 0;
    client.keep(a.lock, {}, lost.callback(), [&](steady::time_point) { ++renewals; });
    // Renewals carry it well past the first ttl.
    REQUIRE(
        loop.run_until([&] { return renewals >= 4 && steady::now() > a.lock.valid_until + 100ms; }, 3000ms));
    Answer extended = extend(loop, client, a.lock, 600ms);
    REQUIRE_FALSE(extended.error);
    CHECK(extended.lock.fencing_token == a.lock.fencing_token);
    Answer continued = continue_lock(loop, client, a.lock, 600ms);
    REQUIRE_FALSE(continued.error);
    CHECK(continued.lock.continued);
    CHECK(continued.lock.fencing_token == a.lock.fencing_token);
    loop.run_until([] { return false; }, 100ms);
    CHECK(lost.calls.empty());
    CHECK(holders(masters, "{first-taken}", a.lock.value) == 3);
    CHECK_FALSE(unlock(loop, client, a.lock));
  }
  REQUIRE(loop.close());
}

// Found by the review of hardening 2: a keep that ends while two of the
// caller's extensions are in flight answers both with its error.
TEST_CASE("every extension in flight when a keep ends is answered with the keep's error",
          "[keep][hardening]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 3000ms;  // the masters are paused below, not failed
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "ended-meanwhile", 10s);
    REQUIRE_FALSE(a.error);
    Lost lost;
    client.keep(a.lock, {0ms, 300ms}, lost.callback());
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].pause();
    std::vector<std::error_code> answers;
    for (int i = 0; i < 2; ++i)
      client.extend(a.lock, 10s, [&](std::error_code e, const Lock&) { answers.push_back(e); });
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 2s));  // max_hold, masters still paused
    for (std::size_t i = 0; i < masters.size(); ++i) masters[i].resume();
    REQUIRE(loop.run_until([&] { return answers.size() == 2; }, 5s));
    CHECK(answers[0] == errc::timeout);
    CHECK(answers[1] == errc::timeout);
    CHECK(lost.calls == std::vector<std::error_code>{make_error_code(errc::timeout)});
    CHECK(gone_everywhere(masters, "{ended-meanwhile}", a.lock.value));
  }
  REQUIRE(loop.close());
}

TEST_CASE("release_on_loss false leaves our value to its ttl after a loss, for the holder to release",
          "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = try_lock(loop, client, "left-behind", 600ms);
    REQUIRE_FALSE(a.error);
    Lost lost;
    KeepOptions keep;
    keep.every = 100ms;
    keep.release_on_loss = false;
    client.keep(a.lock, keep, lost.callback());
    for (std::size_t m = 0; m < 2; ++m) masters[m].set("{left-behind}", "someone-else", 10s);
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 2s));
    CHECK(lost.calls[0] == errc::not_held);
    loop.run_until([] { return false; }, 100ms);  // a release would have run by now
    CHECK(masters[2].get("{left-behind}") == a.lock.value);
    CHECK(unlock(loop, client, a.lock) == errc::not_held);
    CHECK(gone_everywhere(masters, "{left-behind}", a.lock.value));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a kept lock hears its loss when masters that restarted empty reconnect, not at its next renewal",
          "[keep]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer a = lock(loop, client, "job", 30s);  // renewed every 10 s
    REQUIRE_FALSE(a.error);
    Lost lost;
    client.keep(a.lock, {}, lost.callback());
    (void)loop.run_until([] { return false; }, 200ms);
    // A majority restarts empty: our value is gone there.
    auto restarted = steady::now();
    masters[0].restart(false);
    masters[1].restart(false);
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 8s));
    CHECK(lost.calls == std::vector<std::error_code>{make_error_code(errc::not_held)});
    CHECK(lost.at - restarted < 5s);  // the reconnect and one round, not the 10 s renewal period
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

namespace {

// Has each master send keyspace events of DEL and expiry (off by default).
void send_keyspace_notifications(Cluster& masters) {
  for (std::size_t i = 0; i < masters.size(); ++i)
    REQUIRE(masters[i].command({"CONFIG", "SET", "notify-keyspace-events", "Kgx"}) == "OK");
}

std::string keyspace_channel(const std::string& key) {
  return "__keyspace@0__:" + key;
}

// Whether `key`'s keyspace channel comes to have `subscribers` on every master.
bool keyspace_subscribers(LoopFixture& loop, Cluster& masters, const std::string& key, int subscribers,
                          milliseconds deadline = 5s) {
  return loop.run_until(
      [&] { return masters.subscribed_on(keyspace_channel(key), subscribers).size() == masters.size(); },
      deadline);
}

// "job" locked for 30 s (renewed every 10 s) and kept, once every master
// carries its keyspace channel.
Lock keep_job(LoopFixture& loop, Client& client, Cluster& masters, Lost& lost) {
  Answer a = lock(loop, client, "job", 30s);
  REQUIRE_FALSE(a.error);
  client.keep(a.lock, {}, lost.callback());
  REQUIRE(keyspace_subscribers(loop, masters, "{job}", 1));
  return a.lock;
}

}  // namespace

TEST_CASE(
    "a kept lock whose key is deleted on every master hears it about a round trip later, where the "
    "masters send keyspace notifications",
    "[keep][notifications]") {
  Cluster masters(3);
  send_keyspace_notifications(masters);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Lost lost;
    (void)keep_job(loop, client, masters, lost);
    // Gone as DEL, or renamed away (RENAME: 'g' events too).
    bool renamed = GENERATE(false, true);
    auto deleted = steady::now();
    for (std::size_t i = 0; i < masters.size(); ++i) {
      if (renamed) {
        REQUIRE(masters[i].command({"RENAME", "{job}", "{job}:old"}) == "OK");
      } else {
        REQUIRE(masters[i].command({"DEL", "{job}"}) == "1");
      }
    }
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 8s));
    CHECK(lost.calls == std::vector<std::error_code>{make_error_code(errc::not_held)});
    CHECK(lost.at - deleted < 2s);  // a notification and a renewal's round, not the 10 s period
    // The hold ended: its keys are not listened to any more.
    CHECK(keyspace_subscribers(loop, masters, "{job}", 0));
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a kept lock whose key is deleted on one master is renewed at once and stays held",
          "[keep][notifications]") {
  Cluster masters(3);
  send_keyspace_notifications(masters);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Lost lost;
    Lock job = keep_job(loop, client, masters, lost);
    auto before = client.stats().renewals;
    REQUIRE(masters[0].command({"DEL", "{job}"}) == "1");
    REQUIRE(loop.run_until([&] { return client.stats().renewals > before; }, 3s));  // not in 10 s
    (void)loop.run_until([] { return false; }, 100ms);
    CHECK(lost.calls.empty());
    // A renewal never writes a key back where it is gone.
    CHECK_FALSE(masters[0].get("{job}"));
    CHECK(masters[1].get("{job}") == job.value);
    CHECK(unlock(loop, client, job) == std::error_code{});
    CHECK(keyspace_subscribers(loop, masters, "{job}", 0));
    CHECK(lost.calls.empty());
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a shared hold and a lock_all hear the deletion of their own keys only", "[keep][notifications]") {
  Cluster masters(3);
  send_keyspace_notifications(masters);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Answer shared =
        await_answer(loop, [&](Client::LockCallback cb) { client.try_lock_shared("doc", 30s, cb); });
    REQUIRE_FALSE(shared.error);
    Answer all = await_answer(loop, [&](Client::LockCallback cb) {
      client.lock_all({"a", "b"}, 30s, 1s, cb);
    });
    REQUIRE_FALSE(all.error);
    Lost shared_lost;
    Lost all_lost;
    client.keep(shared.lock, {}, shared_lost.callback());
    client.keep(all.lock, {}, all_lost.callback());
    REQUIRE(keyspace_subscribers(loop, masters, "{doc}:shared", 1));
    REQUIRE(keyspace_subscribers(loop, masters, "{b}", 1));
    auto deleted = steady::now();
    for (std::size_t i = 0; i < masters.size(); ++i) REQUIRE(masters[i].command({"DEL", "{b}"}) == "1");
    REQUIRE(loop.run_until([&] { return !all_lost.calls.empty(); }, 8s));
    CHECK(all_lost.at - deleted < 2s);
    CHECK(shared_lost.calls.empty());
    // Either of a shared hold's keys: the holders' set, or the lock key
    // whose mark keeps exclusive lockers out.
    std::string shared_key = GENERATE(std::string("{doc}:shared"), std::string("{doc}"));
    deleted = steady::now();
    for (std::size_t i = 0; i < masters.size(); ++i) REQUIRE(masters[i].command({"DEL", shared_key}) == "1");
    REQUIRE(loop.run_until([&] { return !shared_lost.calls.empty(); }, 8s));
    CHECK(shared_lost.at - deleted < 2s);
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "a kept lock subscribes to no keyspace channel where the masters send no notifications, or with "
    "Options::keyspace_notifications false, and hears a deletion at its next renewal",
    "[keep][notifications]") {
  Cluster masters(3);
  bool masters_send = GENERATE(false, true);
  if (masters_send) send_keyspace_notifications(masters);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.keyspace_notifications = !masters_send;
    Client client(loop.get(), options);
    Answer a = lock(loop, client, "job", 30s);
    REQUIRE_FALSE(a.error);
    Lost lost;
    KeepOptions every_second;
    every_second.every = 1s;
    client.keep(a.lock, every_second, lost.callback());
    // Long enough for connections to open and CONFIG GET to be answered.
    (void)loop.run_until([] { return false; }, 300ms);
    CHECK(masters.subscribed_on(keyspace_channel("{job}"), 0).size() == 3);
    auto deleted = steady::now();
    for (std::size_t i = 0; i < masters.size(); ++i) REQUIRE(masters[i].command({"DEL", "{job}"}) == "1");
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 5s));
    CHECK(lost.calls == std::vector<std::error_code>{make_error_code(errc::not_held)});
    CHECK(lost.at - deleted < 1s + 500ms);  // the next renewal, a second at most after the keep's last
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a kept lock hears a deletion made while its notification connections were reconnecting",
          "[keep][notifications]") {
  Cluster masters(3);
  send_keyspace_notifications(masters);
  LoopFixture loop;
  {
    Client client(loop.get(), masters.options());
    Lost lost;
    (void)keep_job(loop, client, masters, lost);
    // The subscriber connections drop (an operator, an output buffer limit),
    // and the key goes before they are back: no notice reaches us.
    auto deleted = steady::now();
    for (std::size_t i = 0; i < masters.size(); ++i) {
      masters[i].command({"CLIENT", "KILL", "TYPE", "pubsub"});
      REQUIRE(masters[i].command({"DEL", "{job}"}) == "1");
    }
    REQUIRE(loop.run_until([&] { return !lost.calls.empty(); }, 8s));
    CHECK(lost.calls == std::vector<std::error_code>{make_error_code(errc::not_held)});
    CHECK(lost.at - deleted < 2s);  // renewed once subscribed again, not at the 10 s period
    client.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("10,000 kept locks whose keys all go on one master are renewed without a stall, and none is lost",
          "[keep][notifications][batch]") {
  Cluster masters(3);
  send_keyspace_notifications(masters);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.command_timeout = 1000ms;  // thousands of commands in one write
    Client client(loop.get(), options);
    constexpr int count = 10000;
    std::vector<std::string> keys{"DEL"};
    int answered = 0;
    std::vector<Lost> lost(count);
    for (int i = 0; i < count; ++i) {
      std::string resource = "many:" + std::to_string(i);
      keys.push_back("{" + resource + "}");
      client.try_lock(resource, 3s, [&, i](std::error_code e, Lock l) {
        ++answered;
        if (!e) client.keep(l, {}, lost[static_cast<std::size_t>(i)].callback());
      });
    }
    REQUIRE(loop.run_until([&] { return answered == count; }, 20s));
    REQUIRE(keyspace_subscribers(loop, masters, keys.back(), 1, 10s));
    auto before = client.stats().renewals;
    // 10,000 notices from master 0; the other two still hold every lock.
    REQUIRE(masters[0].command(keys) == std::to_string(count));
    REQUIRE(loop.run_until([&] { return client.stats().renewals >= before + count; }, 5s));
    for (const Lost& l : lost) CHECK(l.calls.empty());
    client.close(nullptr);
    (void)loop.run_until([] { return false; }, 100ms);  // the posted on_lost(closed) run while `lost` lives
  }
  REQUIRE(loop.close());
}

TEST_CASE("a loss heard while two extensions are in flight renews once the last of them is answered",
          "[keep][notifications]") {
  LoopFixture loop;
  int renewals_sent = 0;
  {
    Keeper keeper(loop.get(), Keeper::Hooks{
                                  [&](std::vector<Renewal::Item>, Renewal::Decided) {
                                    ++renewals_sent;
                                    return std::shared_ptr<void>(std::make_shared<int>(0));
                                  },
                                  [](const Lock&) {},
                                  [](const Lock&) {},
                                  [&](std::function<void()> fn) { fn(); },
                                  [] { return steady::now(); },
                                  {},
                                  {},
                              });
    Lock l;
    l.resource = "job";
    l.value = "v";
    l.ttl = 30s;
    l.valid_until = steady::now() + 30s;
    KeepOptions every_10s;
    every_10s.every = 10s;
    keeper.keep(
        l, every_10s, [](std::error_code) {}, nullptr);
    keeper.extending("v");  // two extensions written; the masters run both ...
    keeper.extending("v");
    keeper.renew_now("v");                             // ... and then a loss is heard
    (void)loop.run_until([] { return false; }, 20ms);  // the due tick runs, and skips the hold
    CHECK(renewals_sent == 0);
    Lock extended = l;
    extended.valid_until = steady::now() + 30s;
    REQUIRE_FALSE(keeper.extension_decided(extended, {}));  // both ran before the loss
    REQUIRE_FALSE(keeper.extension_decided(extended, {}));
    CHECK(loop.run_until([&] { return renewals_sent == 1; }, 2s));  // not at the 10 s period
    keeper.close();
  }
  REQUIRE(loop.close());
}
