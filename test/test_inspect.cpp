#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// Every answer an inspect() call got (there must be exactly one).
struct Answers {
  std::vector<std::error_code> errors;
  Inspection last;
  Inspector::Callback callback() {
    return [this](std::error_code ec, Inspection i) {
      errors.push_back(ec);
      last = std::move(i);
    };
  }
};

}  // namespace

TEST_CASE("inspect reports each master and who holds each resource", "[inspect]") {
  Cluster masters(3);
  masters[0].set("{held}", "ours", 30s);
  masters[1].set("{held}", "ours", 20s);
  masters[2].set("{held}", "theirs", 10s);
  masters[2].set("{minority}", "alone", 10s);
  LoopFixture loop;
  {
    Inspector inspector(loop.get(), masters.options());
    Answers answers;
    inspector.inspect({"held", "minority", "free"}, answers.callback());
    CHECK(answers.errors.empty());  // never inside the call
    REQUIRE(loop.run_until([&] { return !answers.errors.empty(); }, 5s));
    REQUIRE(answers.errors.size() == 1);
    CHECK_FALSE(answers.errors[0]);
    const Inspection& i = answers.last;
    REQUIRE(i.masters.size() == 3);
    for (std::size_t m = 0; m < 3; ++m) {
      const MasterReport& r = i.masters[m];
      CHECK(r.endpoint == masters.options().masters[m].to_string());
      CHECK(r.reachable);
      CHECK(r.error.empty());
      CHECK(r.role == "master");
      CHECK_FALSE(r.quarantined);
      CHECK(r.maxmemory_policy == "noeviction");
      CHECK(r.round_trip.count() > 0);
      REQUIRE(r.keys.size() == 3);
      CHECK_FALSE(r.keys[2].present);
    }
    CHECK(i.masters[1].keys[0].value == "ours");
    CHECK(i.masters[1].keys[0].ttl <= 20s);
    CHECK(i.masters[1].keys[0].ttl > 10s);
    REQUIRE(i.resources.size() == 3);
    CHECK(i.resources[0].value == "ours");
    CHECK(i.resources[0].holders == 2);
    CHECK(i.resources[0].quorum);
    CHECK(i.resources[0].ttl <= 20s);  // the least time left among the holders
    CHECK(i.resources[0].ttl > 10s);
    CHECK(i.resources[1].holders == 1);
    CHECK_FALSE(i.resources[1].quorum);
    CHECK(i.resources[2].holders == 0);
    CHECK(i.resources[2].value.empty());
    inspector.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("inspect says who holds a resource, since when, its last token and how many wait", "[inspect]") {
  Cluster masters(3);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.fencing = true;
    options.owner = "billing-7";
    Client holder(loop.get(), options);
    Client waiter(loop.get(), masters.options());
    auto before = std::chrono::system_clock::now();
    Answer held = try_lock(loop, holder, "invoices", 30s);
    REQUIRE_FALSE(held.error);
    bool waited = false;
    waiter.lock("invoices", 30s, 20s, [&](std::error_code, const Lock&) { waited = true; });
    REQUIRE(loop.run_until([&] { return !masters.queued_on("{invoices}", 1).empty(); }, 5s));
    masters[0].set("{foreign}", "a value of another library", 30s);

    Inspector inspector(loop.get(), masters.options());
    Answers answers;
    inspector.inspect({"invoices", "foreign", "free"}, answers.callback());
    REQUIRE(loop.run_until([&] { return !answers.errors.empty(); }, 5s));
    REQUIRE_FALSE(answers.errors[0]);
    const ResourceReport& r = answers.last.resources[0];
    CHECK(r.value == held.lock.value);
    CHECK(r.owner == "billing-7");
    CHECK(r.mode == "exclusive");
    CHECK(r.since >= std::chrono::time_point_cast<std::chrono::milliseconds>(before));
    CHECK(r.since <= std::chrono::system_clock::now());
    CHECK(r.fencing_token == held.lock.fencing_token);
    CHECK(r.waiting == 1);
    const ResourceReport& foreign = answers.last.resources[1];
    CHECK(foreign.mode == "exclusive");
    CHECK(foreign.owner.empty());
    CHECK(foreign.since.time_since_epoch().count() == 0);
    CHECK(foreign.fencing_token == 0);
    const ResourceReport& free = answers.last.resources[2];
    CHECK(free.mode.empty());
    CHECK(free.waiting == 0);

    CHECK_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waited; }, 5s));
    inspector.close(nullptr);
    holder.close(nullptr);
    waiter.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("inspect says why a master did not answer and how long quarantine lasts", "[inspect]") {
  Cluster masters(3);
  masters[1].kill9();
  Options options = masters.options();
  options.restart_quarantine = 60s;
  LoopFixture loop;
  {
    Inspector inspector(loop.get(), options);
    Answers answers;
    inspector.inspect({}, answers.callback());
    REQUIRE(loop.run_until([&] { return !answers.errors.empty(); }, 5s));
    const Inspection& i = answers.last;
    CHECK_FALSE(i.masters[1].reachable);
    // What the connection said, not only that no answer came in time.
    CHECK(i.masters[1].error == "cannot connect: connection refused");
    CHECK(i.masters[0].reachable);
    CHECK(i.masters[0].quarantined);
    CHECK(i.masters[0].quarantine_left <= 61s);
    CHECK(i.masters[0].quarantine_left > 50s);
    CHECK(i.resources.empty());
  }
  REQUIRE(loop.close());
}

TEST_CASE("inspect answers a bad resource and a closed inspector, once each", "[inspect]") {
  Cluster masters(1);
  LoopFixture loop;
  {
    Inspector inspector(loop.get(), masters.options());
    Answers bad;
    inspector.inspect({"ok", ""}, bad.callback());
    Answers pending;
    inspector.inspect({"ok"}, pending.callback());
    bool closed = false;
    inspector.close([&] { closed = true; });
    Answers late;
    inspector.inspect({"ok"}, late.callback());
    REQUIRE(loop.run_until([&] { return closed && late.errors.size() == 1; }, 5s));
    REQUIRE(bad.errors.size() == 1);
    CHECK(bad.errors[0] == errc::invalid_argument);
    REQUIRE(pending.errors.size() == 1);
    CHECK(pending.errors[0] == errc::closed);
    CHECK(late.errors[0] == errc::closed);
  }
  REQUIRE(loop.close());
  CHECK_THROWS_AS(Inspector(nullptr, Options{}), std::invalid_argument);
}

namespace {

struct HolderAnswer {
  int calls = 0;
  std::error_code error;
  ResourceReport report;
};

HolderAnswer holder(LoopFixture& loop, Client& client, const std::string& resource) {
  auto answer = std::make_shared<HolderAnswer>();
  client.holder(resource, [answer](std::error_code e, ResourceReport r) {
    ++answer->calls;
    answer->error = e;
    answer->report = std::move(r);
  });
  REQUIRE(answer->calls == 0);  // never inside the call
  REQUIRE(loop.run_until([&] { return answer->calls > 0; }, 5s));
  REQUIRE(answer->calls == 1);
  return *answer;
}

}  // namespace

TEST_CASE("Client::holder says who holds a resource, how and with which token, from one read", "[inspect]") {
  Cluster masters(3);
  Options options = masters.options();
  options.fencing = true;
  options.owner = "nightly-export";
  LoopFixture loop;
  {
    Client c(loop.get(), options);
    HolderAnswer free = holder(loop, c, "report");
    REQUIRE_FALSE(free.error);
    CHECK_FALSE(free.report.quorum);
    CHECK(free.report.mode.empty());

    Answer held = try_lock(loop, c, "report", 10s);
    REQUIRE_FALSE(held.error);
    HolderAnswer exclusive = holder(loop, c, "report");
    REQUIRE_FALSE(exclusive.error);
    CHECK(exclusive.report.quorum);
    CHECK(exclusive.report.mode == "exclusive");
    CHECK(exclusive.report.owner == "nightly-export");
    CHECK(exclusive.report.value == held.lock.value);
    CHECK(exclusive.report.fencing_token == held.lock.fencing_token);
    CHECK(exclusive.report.ttl > 5s);
    CHECK_FALSE(unlock(loop, c, held.lock));

    Answer reading =
        await_answer(loop, [&](Client::LockCallback cb) { c.try_lock_shared("report", 10s, cb); });
    REQUIRE_FALSE(reading.error);
    HolderAnswer shared = holder(loop, c, "report");
    CHECK(shared.report.mode == "shared");
    CHECK(shared.report.shared_holders == 1);
    CHECK_FALSE(unlock(loop, c, reading.lock));

    // A majority down: nobody can say.
    masters[1].kill9();
    masters[2].kill9();
    CHECK(holder(loop, c, "report").error == errc::unavailable);
    c.close(nullptr);
  }
  REQUIRE(loop.close());
}

TEST_CASE("Redlock::holder answers from another thread; a bad resource is invalid_argument", "[inspect]") {
  Cluster masters(3);
  Redlock redlock(masters.options());
  Result<Lock> held = redlock.try_lock("report", 10s);
  REQUIRE(held);
  Result<ResourceReport> report = redlock.holder("report");
  REQUIRE(report);
  CHECK(report->quorum);
  CHECK(report->value == held->value);
  CHECK(redlock.holder("").error() == errc::invalid_argument);
  CHECK_FALSE(redlock.unlock(*held));
}
