// Hardening 2, item 3: no resource name can reach another resource's keys.

#include <catch2/catch.hpp>

#include <redlock/redlock.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "keys.hpp"
#include "support/calls.hpp"
#include "support/cluster.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// Every key and channel of `resource`, with what it is.
std::vector<std::pair<std::string, std::string>> keys_of(const std::string& prefix,
                                                         const std::string& resource) {
  std::vector<std::pair<std::string, std::string>> all;
  // The resource's lock, and two permits of it as a semaphore (each a lock
  // with helpers of its own).
  for (int permit : {-1, 0, 1}) {
    std::string lock = keys::held(prefix, resource, permit);
    std::string what = permit < 0 ? "" : "permit " + std::to_string(permit) + " ";
    all.insert(all.end(), {{lock, what + "lock"},
                           {keys::fencing(lock), what + "fencing"},
                           {keys::queue(lock), what + "queue"},
                           {keys::reservation(lock), what + "reservation"},
                           {keys::release_channel(lock), what + "channel"}});
  }
  return all;
}

// Names built from the pieces a hostile name would use, each once.
std::set<std::string> hostile_names() {
  const std::vector<std::string> pieces{"x",        "{",       "}",  ":",        "queue",
                                        "reserved", "fencing", "}:", "released", "permit:0"};
  std::vector<std::string> names{""};
  std::set<std::string> all;
  for (int length = 1; length <= 4; ++length) {
    std::vector<std::string> longer;
    for (const std::string& n : names) {
      for (const std::string& p : pieces) longer.push_back(n + p);
    }
    all.insert(longer.begin(), longer.end());
    names = std::move(longer);
  }
  return all;
}

// A waiter on `resource`: its answer, once it comes.
std::shared_ptr<Answer> wait_for(Client& client, const std::string& resource) {
  auto answer = std::make_shared<Answer>();
  client.lock(resource, 10s, 10s, [answer](std::error_code e, Lock l) {
    ++answer->calls;
    answer->error = e;
    answer->lock = std::move(l);
  });
  return answer;
}

}  // namespace

TEST_CASE("no two resources share a key or a channel, whatever their names", "[keys]") {
  std::set<std::string> names = hostile_names();
  for (const std::string prefix : {"", "app:", "{", "}"}) {
    std::map<std::string, std::pair<std::string, std::string>> owner;  // key -> (resource, what)
    for (const std::string& name : names) {
      for (auto& [key, what] : keys_of(prefix, name)) {
        auto [it, added] = owner.emplace(key, std::make_pair(name, what));
        INFO("prefix '" << prefix << "': '" << key << "' is both " << it->second.second << " of '"
                        << it->second.first << "' and " << what << " of '" << name << "'");
        CHECK(added);
      }
    }
  }
}

TEST_CASE("a lock named like another resource's helper is untouched by that resource's waiting and fencing",
          "[keys]") {
  int n = GENERATE(1, 3);
  Cluster masters(n);
  LoopFixture loop;
  {
    Options options = masters.options();
    options.fencing = GENERATE(false, true);
    options.retry_delay = 10s;  // only a release message wakes a waiter in time
    options.retry_jitter = 0ms;
    Client bystander(loop.get(), options);
    Client holder(loop.get(), options);
    Client waiter(loop.get(), options);
    std::vector<Lock> aliases;
    for (std::string alias : {"x:reserved", "x:queue", "x:fencing", "x:released"}) {
      Answer a = try_lock(loop, bystander, alias, 30s);
      REQUIRE_FALSE(a.error);
      aliases.push_back(a.lock);
    }

    // x is held, a waiter queues for it, the holder lets go: the queue wakes
    // the waiter, which claims x.
    Answer held = try_lock(loop, holder, "x", 10s);
    REQUIRE_FALSE(held.error);
    auto waiting = wait_for(waiter, "x");
    loop.run_until([] { return false; }, 100ms);  // refused, queued
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return waiting->calls > 0; }, 5s));
    REQUIRE_FALSE(waiting->error);
    REQUIRE_FALSE(unlock(loop, waiter, waiting->lock));
    // And x is free for the next waiter at once, though x:reserved is held.
    auto next = wait_for(waiter, "x");
    REQUIRE(loop.run_until([&] { return next->calls > 0; }, 1s));
    CHECK_FALSE(next->error);

    for (const Lock& alias : aliases) {
      INFO(alias.resource);
      CHECK(holders(masters, keys::lock("", alias.resource), alias.value) == n);
      CHECK(try_lock(loop, holder, alias.resource, 10s).error == errc::not_acquired);
      CHECK_FALSE(unlock(loop, bystander, alias));
    }
    CHECK_FALSE(unlock(loop, waiter, next->lock));
  }
  REQUIRE(loop.close());
}
