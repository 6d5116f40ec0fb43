#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
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
using steady = std::chrono::steady_clock;

namespace {

// A call that waits, driven by the test: its answer once it came.
struct Waiting {
  std::shared_ptr<Answer> answer = std::make_shared<Answer>();
  Client::CallId id = 0;

  Client::LockCallback callback() {
    return [a = answer](std::error_code e, Lock l) {
      ++a->calls;
      a->error = e;
      a->lock = std::move(l);
    };
  }
  bool done() const { return answer->calls > 0; }
};

Waiting lock_shared(Client& client, const std::string& resource, milliseconds ttl, milliseconds wait) {
  Waiting call;
  call.id = client.lock_shared(resource, ttl, wait, call.callback());
  return call;
}

Waiting lock_exclusive(Client& client, const std::string& resource, milliseconds ttl, milliseconds wait) {
  Waiting call;
  call.id = client.lock(resource, ttl, wait, call.callback());
  return call;
}

Answer try_lock_shared(LoopFixture& loop, Client& c, const std::string& resource, milliseconds ttl) {
  return await_answer(loop,
                      [&](Client::LockCallback cb) { c.try_lock_shared(resource, ttl, std::move(cb)); });
}

// How many masters keep shared holders of `resource`, and how many
// masters' lock keys hold the shared mark.
int with_holders(Cluster& masters, const std::string& resource) {
  int n = 0;
  for (std::size_t i = 0; i < masters.size(); ++i)
    n += masters[i].running() && masters[i].command({"EXISTS", "{" + resource + "}:shared"}) == "1" ? 1 : 0;
  return n;
}

bool nothing_left(Cluster& masters, const std::string& resource) {
  return held_nowhere(masters, "{" + resource + "}") &&
         eventually([&] { return with_holders(masters, resource) == 0; });
}

// A writer that waits: a lock() of "book", or a lock_all of "book" and "shelf".
Waiting writer_waits(Client& writer, bool several, milliseconds ttl = 10s, milliseconds wait = 20s) {
  if (!several) return lock_exclusive(writer, "book", ttl, wait);
  Waiting call;
  call.id = writer.lock_all({"book", "shelf"}, ttl, wait, call.callback());
  return call;
}

// Every master has a writer-waiting mark of "book", or will within 5 s.
bool marked_everywhere(LoopFixture& loop, Cluster& masters) {
  return loop.run_until(
      [&] {
        for (std::size_t m = 0; m < masters.size(); ++m) {
          if (masters[m].command({"EXISTS", "{book}:writer-waiting"}) != "1") return false;
        }
        return true;
      },
      5s);
}

// A shared hold of "book" ends on every master but `kept` (a reader's unlock
// that has not reached it yet, or masters that restarted empty).
void drop_shared_hold_but_at(Cluster& masters, std::size_t kept) {
  for (std::size_t m = 0; m < masters.size(); ++m) {
    if (m != kept) REQUIRE(masters[m].command({"DEL", "{book}", "{book}:shared"}) == "2");
  }
}

}  // namespace

TEST_CASE("shared holders hold together, and a writer gets the lock when the last of them unlocks",
          "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), masters.options());
    Client b(loop.get(), masters.options());
    Client w(loop.get(), masters.options());
    Answer first = try_lock_shared(loop, a, "table", 10s);
    Answer second = try_lock_shared(loop, b, "table", 10s);
    REQUIRE_FALSE(first.error);
    REQUIRE_FALSE(second.error);
    CHECK(first.lock.shared);
    CHECK(first.lock.valid());
    CHECK(held_everywhere(masters, "{table}", "redlock:shared"));
    CHECK(masters[0].command({"ZCARD", "{table}:shared"}) == "2");

    CHECK(try_lock(loop, w, "table", 10s).error == errc::not_acquired);
    Waiting writer = lock_exclusive(w, "table", 10s, 20s);
    (void)loop.run_until([&] { return writer.done(); }, 300ms);
    CHECK_FALSE(writer.done());

    CHECK_FALSE(unlock(loop, a, first.lock));
    (void)loop.run_until([&] { return writer.done(); }, 300ms);
    CHECK_FALSE(writer.done());  // b still holds it

    auto released = steady::now();
    CHECK_FALSE(unlock(loop, b, second.lock));
    REQUIRE(loop.run_until([&] { return writer.done(); }, 5s));
    REQUIRE_FALSE(writer.answer->error);
    CHECK_FALSE(writer.answer->lock.shared);
    CHECK(steady::now() - released < 2s);  // woken by the release, not a timer near its deadline
    CHECK(held_everywhere(masters, "{table}", writer.answer->lock.value));
    CHECK(with_holders(masters, "table") == 0);
    CHECK_FALSE(unlock(loop, w, writer.answer->lock));
    CHECK(nothing_left(masters, "table"));
    a.close(nullptr);
    b.close(nullptr);
    w.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an exclusive holder keeps shared locks out, and shared waiters get in together at its release",
          "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client w(loop.get(), masters.options());
    Client a(loop.get(), masters.options());
    Client b(loop.get(), masters.options());
    Answer held = try_lock(loop, w, "table", 10s);
    REQUIRE_FALSE(held.error);
    CHECK(try_lock_shared(loop, a, "table", 10s).error == errc::not_acquired);
    Waiting ra = lock_shared(a, "table", 10s, 20s);
    Waiting rb = lock_shared(b, "table", 10s, 20s);
    (void)loop.run_until([&] { return ra.done() || rb.done(); }, 300ms);
    CHECK_FALSE(ra.done());
    CHECK_FALSE(rb.done());

    CHECK_FALSE(unlock(loop, w, held.lock));
    REQUIRE(loop.run_until([&] { return ra.done() && rb.done(); }, 5s));
    REQUIRE_FALSE(ra.answer->error);
    REQUIRE_FALSE(rb.answer->error);
    CHECK(ra.answer->lock.valid());
    CHECK(rb.answer->lock.valid());
    CHECK(masters[1].command({"ZCARD", "{table}:shared"}) == "2");
    CHECK_FALSE(unlock(loop, a, ra.answer->lock));
    CHECK_FALSE(unlock(loop, b, rb.answer->lock));
    CHECK(nothing_left(masters, "table"));
    w.close(nullptr);
    a.close(nullptr);
    b.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a writer waiting keeps new shared holders out, so a stream of readers cannot starve it",
          "[shared]") {
  Cluster masters(3);
  // A loaded machine must not fail the gate's vote: its veto keeps the reader out.
  Options options = masters.options();
  options.command_timeout = 500ms;
  LoopFixture loop;
  {
    Client r(loop.get(), options);
    Client w(loop.get(), options);
    Answer reading = try_lock_shared(loop, r, "table", 10s);
    REQUIRE_FALSE(reading.error);
    Waiting writer = lock_exclusive(w, "table", 10s, 20s);
    // The writer was refused by the reader: it now waits, and has said so everywhere.
    REQUIRE(loop.run_until(
        [&] {
          for (std::size_t i = 0; i < masters.size(); ++i) {
            if (masters[i].command({"EXISTS", "{table}:writer-waiting"}) != "1") return false;
          }
          return true;
        },
        2s));
    CHECK_FALSE(writer.done());
    // A new reader is kept out, while the one holding may still renew.
    CHECK(try_lock_shared(loop, r, "table", 10s).error == errc::not_acquired);
    Answer renewed = extend(loop, r, reading.lock, 10s);
    CHECK_FALSE(renewed.error);

    CHECK_FALSE(unlock(loop, r, renewed.lock));
    REQUIRE(loop.run_until([&] { return writer.done(); }, 5s));
    REQUIRE_FALSE(writer.answer->error);
    // The writer has it: the mark is gone with its wait.
    CHECK(eventually([&] { return masters[0].command({"EXISTS", "{table}:writer-waiting"}) == "0"; }));
    CHECK_FALSE(unlock(loop, w, writer.answer->lock));
    Answer after = try_lock_shared(loop, r, "table", 10s);
    CHECK_FALSE(after.error);
    if (!after.error) CHECK_FALSE(unlock(loop, r, after.lock));
    r.close(nullptr);
    w.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("extend, keep and unlock of a shared lock act on its own hold only", "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), masters.options());
    Client b(loop.get(), masters.options());
    Answer longer = try_lock_shared(loop, a, "table", 2s);
    REQUIRE_FALSE(longer.error);
    // The first holder's ttl is the key's and its holders': both expire.
    REQUIRE(held_everywhere(masters, "{table}", "redlock:shared"));
    for (std::size_t m = 0; m < masters.size(); ++m) {
      INFO("master " << m);
      CHECK(masters[m].pttl("{table}") > 0);
      CHECK(masters[m].pttl("{table}") <= 2000);
      CHECK(masters[m].pttl("{table}:shared") > 0);
      CHECK(masters[m].pttl("{table}:shared") <= 2000);
    }
    Answer shorter = try_lock_shared(loop, b, "table", 2s);
    REQUIRE_FALSE(shorter.error);

    Answer extended = extend(loop, a, longer.lock, 30s);
    REQUIRE_FALSE(extended.error);
    CHECK(extended.lock.shared);
    CHECK(
        eventually([&] { return masters[0].pttl("{table}") > 20000; }));  // the key lasts as its last holder

    // b's unlock leaves a's hold, and the key, in place.
    CHECK_FALSE(unlock(loop, b, shorter.lock));
    CHECK(held_everywhere(masters, "{table}", "redlock:shared"));
    CHECK(masters[2].command({"ZCARD", "{table}:shared"}) == "1");
    // b's hold is gone: extending it is refused.
    CHECK(extend(loop, b, shorter.lock, 10s).error == errc::not_held);

    // Kept past its ttl, with renewals of its own hold.
    Answer kept = try_lock_shared(loop, b, "table", 300ms);
    REQUIRE_FALSE(kept.error);
    int renewals = 0;
    std::vector<std::error_code> lost;
    b.keep(
        kept.lock, {100ms, 0ms}, [&](std::error_code e) { lost.push_back(e); },
        [&](steady::time_point) { ++renewals; });
    (void)loop.run_until([&] { return renewals >= 6; }, 5s);
    CHECK(renewals >= 6);
    CHECK(lost.empty());
    CHECK(masters[1].command({"ZCARD", "{table}:shared"}) == "2");

    CHECK_FALSE(unlock(loop, b, kept.lock));
    CHECK_FALSE(unlock(loop, a, extended.lock));
    CHECK(nothing_left(masters, "table"));
    CHECK(lost.empty());
    a.close(nullptr);
    b.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a shared hold that ran out does not keep the key from a writer", "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client a(loop.get(), masters.options());
    Client b(loop.get(), masters.options());
    Answer brief = try_lock_shared(loop, a, "table", 200ms);
    Answer lasting = try_lock_shared(loop, b, "table", 10s);
    REQUIRE_FALSE(brief.error);
    REQUIRE_FALSE(lasting.error);
    // a's hold runs out on the masters; b's unlock then ends the key.
    REQUIRE(eventually([&] { return !brief.lock.valid(); }));
    CHECK_FALSE(unlock(loop, b, lasting.lock));
    CHECK(nothing_left(masters, "table"));
    Answer writer = try_lock(loop, b, "table", 10s);
    CHECK_FALSE(writer.error);
    // And the stale hold cannot come back by continue_lock as if held throughout.
    Answer back = continue_lock(loop, a, brief.lock, 10s);
    CHECK(back.error == errc::not_held);
    if (!writer.error) CHECK_FALSE(unlock(loop, b, writer.lock));
    a.close(nullptr);
    b.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("with fencing, shared holders get tokens and a writer after them a larger one", "[shared]") {
  Cluster masters(3);
  Options options = masters.options();
  options.fencing = true;
  LoopFixture loop;
  {
    Client a(loop.get(), options);
    Client w(loop.get(), options);
    Answer first = try_lock_shared(loop, a, "ledger", 10s);
    Answer second = try_lock_shared(loop, a, "ledger", 10s);
    REQUIRE_FALSE(first.error);
    REQUIRE_FALSE(second.error);
    CHECK(first.lock.fencing_token > 0);
    CHECK(second.lock.fencing_token > first.lock.fencing_token);
    Waiting writer = lock_exclusive(w, "ledger", 10s, 20s);
    CHECK_FALSE(unlock(loop, a, first.lock));
    CHECK_FALSE(unlock(loop, a, second.lock));
    REQUIRE(loop.run_until([&] { return writer.done(); }, 5s));
    REQUIRE_FALSE(writer.answer->error);
    CHECK(writer.answer->lock.fencing_token > second.lock.fencing_token);
    CHECK_FALSE(unlock(loop, w, writer.answer->lock));
    a.close(nullptr);
    w.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a shared lock is had with a master down, and a canceled shared wait leaves nothing behind",
          "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client w(loop.get(), masters.options());
    Client r(loop.get(), masters.options());
    masters[2].kill9();
    Answer reading = try_lock_shared(loop, r, "table", 10s);
    REQUIRE_FALSE(reading.error);
    CHECK(with_holders(masters, "table") == 2);
    CHECK_FALSE(unlock(loop, r, reading.lock));

    Answer held = try_lock(loop, w, "table", 10s);
    REQUIRE_FALSE(held.error);
    Waiting waiting = lock_shared(r, "table", 10s, 20s);
    (void)loop.run_until([&] { return waiting.done(); }, 200ms);
    REQUIRE_FALSE(waiting.done());
    r.cancel(waiting.id);
    REQUIRE(loop.run_until([&] { return waiting.done(); }, 2s));
    CHECK(waiting.answer->error == errc::canceled);
    CHECK_FALSE(unlock(loop, w, held.lock));
    CHECK(nothing_left(masters, "table"));
    w.close(nullptr);
    r.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("threads reading and writing through Redlocks: a writer is never inside beside anyone",
          "[shared]") {
  Cluster masters(3);
  Options options = masters.options();
  options.retry_delay = 20ms;
  options.retry_jitter = 20ms;
  Redlock first(options);
  Redlock second(options);
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> most_readers{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      Redlock& redlock = t % 2 == 0 ? first : second;
      const bool writer = t < 2;
      for (int i = 0; i < 6; ++i) {
        Result<Lock> lock = writer ? redlock.lock("shelf", 5s, 20s) : redlock.lock_shared("shelf", 5s, 20s);
        if (!lock) {
          ++failures;
          continue;
        }
        if (writer) {
          if (++writers != 1 || readers.load() != 0) ++overlaps;
        } else {
          int now = ++readers;
          if (writers.load() != 0) ++overlaps;
          int seen = most_readers.load();
          while (now > seen && !most_readers.compare_exchange_weak(seen, now)) {
          }
        }
        std::this_thread::sleep_for(5ms);  // the work done under the lock
        if (writer) {
          --writers;
        } else {
          --readers;
        }
        if (redlock.unlock(*lock)) ++failures;  // (Catch2 asserts from the test thread only)
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(overlaps == 0);
  CHECK(failures == 0);
  CHECK(most_readers >= 2);  // readers did share
}

TEST_CASE("a Lock both shared and a permit is refused as an invalid argument", "[shared]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Client c(loop.get(), masters.options());
    Lock forged{"table", "00000000000000000000000000000000:1:me"};
    forged.shared = true;
    forged.permit = 0;
    CHECK(unlock(loop, c, forged) == errc::invalid_argument);
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a Lock whose value is the shared mark is refused: it would end every shared hold", "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client r(loop.get(), masters.options());
    Client w(loop.get(), masters.options());
    Answer reading = try_lock_shared(loop, r, "table", 10s);
    REQUIRE_FALSE(reading.error);
    Lock forged{"table", "redlock:shared"};
    forged.valid_until = steady::now() + 10s;
    CHECK(unlock(loop, w, forged) == errc::invalid_argument);
    CHECK(extend(loop, w, forged, 10s).error == errc::invalid_argument);
    CHECK(continue_lock(loop, w, forged, 10s).error == errc::invalid_argument);
    CHECK(try_lock(loop, w, "table", 10s).error == errc::not_acquired);  // the reader still holds it
    CHECK(masters[0].command({"ZCARD", "{table}:shared"}) == "1");
    CHECK_FALSE(unlock(loop, r, reading.lock));
    r.close(nullptr);
    w.close(nullptr);
  }
  REQUIRE(loop.close());
}

// helper-19's review: a writer refused by shared holders on one master (the
// readers' gate) and granted by the others holds the lock; its mark stayed
// on that master and, after the writer's unlock, kept every reader out at the
// gate until it expired, with nothing to wake them then. (The writer asks all
// masters here after two gate refusals; the next test wins at once.)
TEST_CASE("a writer that took the lock leaves no mark that keeps readers out after its unlock",
          "[shared][all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_delay = 50ms;  // the writer asks again soon, and all masters after two gate refusals
    Client holder(loop.get(), options);
    Client writer(loop.get(), options);
    Client reader(loop.get(), masters.options());
    std::size_t gate = gate_of("{book}", options);
    Answer reading = try_lock_shared(loop, holder, "book", 30s);
    REQUIRE_FALSE(reading.error);
    const bool several = GENERATE(false, true);  // a lock(), a lock_all
    Waiting waiting_writer = writer_waits(writer, several);
    REQUIRE(marked_everywhere(loop, masters));
    // The shared hold is gone from every master but the gate (as if they had
    // restarted empty): the writer wins them and is refused at the gate.
    drop_shared_hold_but_at(masters, gate);
    REQUIRE(loop.run_until([&] { return waiting_writer.done(); }, 5s));
    REQUIRE_FALSE(waiting_writer.answer->error);
    REQUIRE(masters[gate].command({"GET", "{book}"}) == "redlock:shared");
    REQUIRE(masters[gate].command({"DEL", "{book}", "{book}:shared"}) ==
            "2");  // the reader's hold ends there too
    REQUIRE_FALSE(unlock(loop, writer, waiting_writer.answer->lock));
    REQUIRE(gone_everywhere(masters, "{book}", waiting_writer.answer->lock.value));
    // (The mark lasts retry_delay + jitter + 1 s: it would still be there.)
    for (std::size_t m = 0; m < masters.size(); ++m) {
      INFO("master " << m);
      CHECK(masters[m].command({"EXISTS", "{book}:writer-waiting"}) == "0");
    }
    Answer next_reading = try_lock_shared(loop, reader, "book", 10s);
    CHECK_FALSE(next_reading.error);
    if (!next_reading.error) CHECK_FALSE(unlock(loop, reader, next_reading.lock));
  }
  REQUIRE(loop.close());
}

// helper-20's review: as above, but the writer wins on its first attempt (no
// refusal before it), while the readers' gate still has a shared hold (the
// reader's unlock has not reached it yet).
TEST_CASE("a writer that won at once beside a reader's last hold leaves no mark after its unlock",
          "[shared][all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_delay = 10s;  // only a release can let the next reader in soon
    options.retry_jitter = 0ms;
    Client holder(loop.get(), options);
    Client writer(loop.get(), options);
    Client reader(loop.get(), options);
    std::size_t gate = gate_of("{book}", options);
    Answer reading = try_lock_shared(loop, holder, "book", 30s);
    REQUIRE_FALSE(reading.error);
    REQUIRE(eventually([&] { return with_holders(masters, "book") == 3; }));
    drop_shared_hold_but_at(masters, gate);  // the reader's unlock reached every master but the gate
    Waiting waiting_writer = writer_waits(writer, GENERATE(false, true));  // a lock(), a lock_all
    REQUIRE(loop.run_until([&] { return waiting_writer.done(); }, 5s));
    REQUIRE_FALSE(waiting_writer.answer->error);
    // The gate refused it and marked a writer waiting; then the reader's
    // unlock reaches the gate too.
    REQUIRE(eventually([&] { return masters[gate].command({"EXISTS", "{book}:writer-waiting"}) == "1"; }));
    REQUIRE(masters[gate].command({"DEL", "{book}", "{book}:shared"}) == "2");
    REQUIRE_FALSE(unlock(loop, writer, waiting_writer.answer->lock));
    REQUIRE(gone_everywhere(masters, "{book}", waiting_writer.answer->lock.value));
    for (std::size_t m = 0; m < masters.size(); ++m) {
      INFO("master " << m);
      CHECK(masters[m].command({"EXISTS", "{book}:writer-waiting"}) == "0");
    }
    auto asked = steady::now();
    Waiting next_reading = lock_shared(reader, "book", 10s, 3s);
    REQUIRE(loop.run_until([&] { return next_reading.done(); }, 5s));
    CHECK_FALSE(next_reading.answer->error);
    CHECK(steady::now() - asked < scaled(1s));
    if (!next_reading.answer->error) CHECK_FALSE(unlock(loop, reader, next_reading.answer->lock));
  }
  REQUIRE(loop.close());
}

// helper-21's review: a waiting writer whose round reached a majority too
// late (here its clock jumps 200 ms at each reading, past its 100 ms ttl)
// releases its keys; that release is not its unlock, and the writer, still
// waiting, keeps its mark at the readers' gate, where a reader's last hold
// lingers.
TEST_CASE("a writer whose round reached a majority too late keeps its mark while it still waits",
          "[shared][all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_delay = 10s;
    options.retry_jitter = 0ms;
    auto slow = std::make_shared<bool>(false);
    auto ticks = std::make_shared<long long>(0);
    Options writer_options = options;
    writer_options.retry_delay = 300ms;  // it asks every master again after two gate refusals
    writer_options.clock = [slow, ticks] {
      if (!*slow) return steady::now();
      return steady::now() + std::chrono::duration_cast<steady::duration>(200ms * ++*ticks);
    };
    Client holder(loop.get(), options);
    Client writer(loop.get(), writer_options);
    Client reader(loop.get(), options);
    std::size_t gate = gate_of("{book}", options);
    Answer reading = try_lock_shared(loop, holder, "book", 30s);
    REQUIRE_FALSE(reading.error);
    REQUIRE(eventually([&] { return with_holders(masters, "book") == 3; }));
    drop_shared_hold_but_at(masters, gate);  // the reader's unlock reached every master but the gate
    REQUIRE_FALSE(try_lock(loop, writer, "warm", 1s).error);  // its connections are up
    *slow = true;
    Waiting waiting_writer = writer_waits(writer, GENERATE(false, true), 100ms);  // a lock(), a lock_all
    // Its rounds decide too late, and their keys are released, several times.
    (void)loop.run_until([&] { return waiting_writer.done(); }, 1500ms);
    REQUIRE_FALSE(waiting_writer.done());
    REQUIRE(masters[gate].command({"GET", "{book}"}) == "redlock:shared");
    CHECK(masters[gate].command({"EXISTS", "{book}:writer-waiting"}) == "1");
    Waiting next_reading;
    next_reading.id = reader.lock_shared("book", 10s, 2s, next_reading.callback());
    REQUIRE(loop.run_until([&] { return next_reading.done() || waiting_writer.done(); }, 4s));
    CHECK_FALSE(waiting_writer.done());
    CHECK(next_reading.answer->error == errc::timeout);  // kept out while the writer waits
    if (next_reading.done() && !next_reading.answer->error) unlock(loop, reader, next_reading.answer->lock);
    writer.cancel(waiting_writer.id);
    REQUIRE(loop.run_until([&] { return waiting_writer.done(); }, 2s));
  }
  REQUIRE(loop.close());
}

// helper-21's review: closing the Client of a writer that waits between
// attempts left its marks until they expired, the readers kept out meanwhile.
TEST_CASE("a waiting writer whose Client closes takes its marks away", "[shared][all]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_delay = 10s;
    options.retry_jitter = 0ms;
    Client holder(loop.get(), options);
    Client reader(loop.get(), options);
    Answer reading = try_lock_shared(loop, holder, "book", 30s);
    REQUIRE_FALSE(reading.error);
    {
      Client writer(loop.get(), options);
      Waiting waiting_writer = writer_waits(writer, GENERATE(false, true));  // a lock(), a lock_all
      REQUIRE(marked_everywhere(loop, masters));
    }
    for (std::size_t m = 0; m < masters.size(); ++m) {
      INFO("master " << m);
      CHECK(eventually([&] { return masters[m].command({"EXISTS", "{book}:writer-waiting"}) == "0"; }));
    }
    Answer next_reading = try_lock_shared(loop, reader, "book", 10s);
    CHECK_FALSE(next_reading.error);
    if (!next_reading.error) CHECK_FALSE(unlock(loop, reader, next_reading.lock));
    CHECK_FALSE(unlock(loop, holder, reading.lock));
  }
  REQUIRE(loop.close());
}

// helper-22's review: one mark per resource held one writer's value, so a
// second writer that overwrote it and then gave up took it away while the
// first still waited (queued at the gate, deaf to releases), and readers got
// in. The mark is now a sorted set of the writers waiting, each until its
// own expiry.
TEST_CASE("a second writer that gives up leaves the first writer's mark in place", "[shared][all]") {
  const bool fencing = GENERATE(false, true);
  CAPTURE(fencing);
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.retry_delay = 10s;  // fallback timers far off
    options.retry_jitter = 0ms;
    options.fencing = fencing;
    Client holder(loop.get(), options);
    Client first(loop.get(), options);
    Client second(loop.get(), options);
    Client reader(loop.get(), options);
    std::size_t gate = gate_of("{book}", options);
    Answer reading = try_lock_shared(loop, holder, "book", 30s);
    REQUIRE_FALSE(reading.error);
    // The first writer's Client was refused lately: its wait asks the gate
    // first, and is queued there.
    Waiting probe = lock_exclusive(first, "book", 10s, 50ms);
    REQUIRE(loop.run_until([&] { return probe.done(); }, 3s));
    REQUIRE(probe.answer->error == errc::timeout);
    Waiting a = lock_exclusive(first, "book", 10s, 20s);
    REQUIRE(loop.run_until([&] { return masters[gate].command({"ZCARD", "{book}:queue"}) == "1"; }, 3s));
    REQUIRE(masters[gate].command({"ZCARD", "{book}:writer-waiting"}) == "1");
    Waiting b = writer_waits(second, GENERATE(false, true), 10s, 300ms);  // a lock(), a lock_all
    REQUIRE(loop.run_until([&] { return b.done(); }, 5s));
    CHECK(b.answer->error == errc::timeout);
    // Its mark went with it; the first writer's stays.
    REQUIRE(loop.run_until(
        [&] {
          return masters[gate].command({"ZCARD", "{book}:writer-waiting"}) == "1";
        },
        3s));
    REQUIRE_FALSE(a.done());
    Answer next_reading = try_lock_shared(loop, reader, "book", 10s);
    CHECK(next_reading.error == errc::not_acquired);  // writer preference: the first writer waits
    if (!next_reading.error) CHECK_FALSE(unlock(loop, reader, next_reading.lock));
    CHECK_FALSE(unlock(loop, holder, reading.lock));
    REQUIRE(loop.run_until([&] { return a.done(); }, 5s));
    CHECK_FALSE(a.answer->error);
    if (!a.answer->error) CHECK_FALSE(unlock(loop, first, a.answer->lock));
  }
  REQUIRE(loop.close());
}

TEST_CASE("a writer that stops waiting takes its mark away, and the readers it kept out get in at once",
          "[shared]") {
  Cluster masters(3);
  Options options = masters.options();
  // Fallback timers far off: only the writer's leaving can let the reader in soon.
  options.retry_delay = 3s;
  options.retry_jitter = 0ms;
  LoopFixture loop;
  {
    Client holder(loop.get(), options);
    Client writer(loop.get(), options);
    Client reader(loop.get(), options);
    Answer reading = try_lock_shared(loop, holder, "table", 10s);
    REQUIRE_FALSE(reading.error);
    Waiting waiting_writer = lock_exclusive(writer, "table", 10s, 20s);
    REQUIRE(loop.run_until(
        [&] {
          return masters[0].command({"EXISTS", "{table}:writer-waiting"}) == "1";
        },
        2s));
    Waiting waiting_reader = lock_shared(reader, "table", 10s, 20s);
    (void)loop.run_until([&] { return waiting_reader.done(); }, 300ms);
    REQUIRE_FALSE(waiting_reader.done());  // kept out by the writer's mark

    auto canceled = steady::now();
    writer.cancel(waiting_writer.id);
    REQUIRE(loop.run_until([&] { return waiting_reader.done(); }, 5s));
    REQUIRE_FALSE(waiting_reader.answer->error);
    CHECK(waiting_writer.answer->error == errc::canceled);
    CHECK(steady::now() - canceled < 1s);  // not the mark's expiry, nor the 3 s fallback
    CHECK(masters[1].command({"EXISTS", "{table}:writer-waiting"}) == "0");
    CHECK_FALSE(unlock(loop, reader, waiting_reader.answer->lock));
    CHECK_FALSE(unlock(loop, holder, reading.lock));
    holder.close(nullptr);
    writer.close(nullptr);
    reader.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE(
    "a shared hold that ran out can neither come back by continue_lock while a writer waits nor be "
    "unlocked as held",
    "[shared]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Client r(loop.get(), masters.options());
    Client w(loop.get(), masters.options());
    Answer lasting = try_lock_shared(loop, r, "table", 10s);
    Answer brief = try_lock_shared(loop, r, "table", 200ms);
    REQUIRE_FALSE(lasting.error);
    REQUIRE_FALSE(brief.error);
    Waiting writer = lock_exclusive(w, "table", 10s, 20s);
    REQUIRE(loop.run_until(
        [&] {
          return masters[0].command({"EXISTS", "{table}:writer-waiting"}) == "1";
        },
        2s));
    (void)loop.run_until([&] { return !brief.lock.valid(); }, 2s);
    REQUIRE(eventually([&] { return masters[0].pttl("{table}") > 0; }));
    (void)loop.run_until([&] { return false; }, 100ms);  // its hold's end passes on the masters too
    CHECK(continue_lock(loop, r, brief.lock, 10s).error == errc::not_held);
    CHECK(unlock(loop, r, brief.lock) == errc::not_held);
    CHECK_FALSE(writer.done());
    CHECK_FALSE(unlock(loop, r, lasting.lock));
    REQUIRE(loop.run_until([&] { return writer.done(); }, 5s));
    CHECK_FALSE(writer.answer->error);
    if (!writer.answer->error) CHECK_FALSE(unlock(loop, w, writer.answer->lock));
    r.close(nullptr);
    w.close(nullptr);
  }
  REQUIRE(loop.close());
}
