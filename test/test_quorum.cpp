#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "quorum.hpp"
#include "rendezvous.hpp"
#include "round.hpp"

using namespace redlock;
using namespace std::chrono_literals;

TEST_CASE("a majority is a strict majority of the masters", "[quorum]") {
  CHECK(quorum::majority(1) == 1);
  CHECK(quorum::majority(2) == 2);
  CHECK(quorum::majority(3) == 2);
  CHECK(quorum::majority(4) == 3);
  CHECK(quorum::majority(5) == 3);
  CHECK(quorum::majority(9) == 5);
}

TEST_CASE("a majority stays possible while the silent masters could still supply it", "[quorum]") {
  CHECK(quorum::still_possible(0, 0, 5));
  CHECK(quorum::still_possible(0, 2, 5));
  CHECK_FALSE(quorum::still_possible(0, 3, 5));
  CHECK(quorum::still_possible(2, 2, 5));
  CHECK_FALSE(quorum::still_possible(1, 3, 5));
  CHECK_FALSE(quorum::still_possible(0, 1, 1));
  CHECK_FALSE(quorum::still_possible(1, 1, 2));
}

TEST_CASE("unavailable means fewer than a majority could answer", "[quorum]") {
  CHECK_FALSE(quorum::too_few_answered(2, 5));
  CHECK(quorum::too_few_answered(3, 5));
  CHECK(quorum::too_few_answered(1, 1));
  CHECK_FALSE(quorum::too_few_answered(1, 3));
  CHECK(quorum::too_few_answered(2, 3));
}

TEST_CASE("drift is ttl times the factor plus the constant", "[quorum]") {
  CHECK(quorum::drift(10000ms, 0.01, 2ms) == 102000us);
  CHECK(quorum::drift(1000ms, 0.01, 2ms) == 12000us);
  CHECK(quorum::drift(1000ms, 0.0, 0ms) == 0us);
  SECTION("a fraction of a microsecond rounds up, never down") {
    CHECK(quorum::drift(1ms, 0.0001, 0ms) == 1us);
    CHECK(quorum::drift(333ms, 0.01, 2ms) == 5330us);
  }
}

TEST_CASE("validity ends at t0 + ttl - drift", "[quorum]") {
  auto t0 = std::chrono::steady_clock::time_point{} + 5s;
  auto until = quorum::valid_until(t0, 10000ms, quorum::drift(10000ms, 0.01, 2ms));
  CHECK(until - t0 == 9898ms);
}

TEST_CASE("replies count as yes, no or failed votes", "[round]") {
  auto reply = [](Reply::Type type, long long integer = 0, std::string str = {}) {
    Reply r;
    r.type = type;
    r.integer = integer;
    r.str = std::move(str);
    return r;
  };
  CHECK(classify(reply(Reply::Type::status, 0, "OK")) == Vote::yes);
  CHECK(classify(reply(Reply::Type::integer, 1)) == Vote::yes);
  CHECK(classify(reply(Reply::Type::integer, 2)) == Vote::yes);
  CHECK(classify(reply(Reply::Type::nil)) == Vote::no);
  CHECK(classify(reply(Reply::Type::integer, 0)) == Vote::no);
  CHECK(classify(reply(Reply::Type::error, 0, "LOADING Redis is loading the dataset in memory")) ==
        Vote::failed);
  CHECK(classify(reply(Reply::Type::error, 0, "OOM command not allowed")) == Vote::failed);
  CHECK(classify(reply(Reply::Type::status, 0, "QUEUED")) == Vote::failed);
  CHECK(classify(reply(Reply::Type::string, 0, "OK")) == Vote::failed);

  SECTION("a fencing script's {result, counter} counts as its result") {
    auto pair = [&](long long result, long long counter) {
      Reply r = reply(Reply::Type::array);
      r.elements = {reply(Reply::Type::integer, result), reply(Reply::Type::integer, counter)};
      return r;
    };
    CHECK(classify(pair(1, 1795000000000000)) == Vote::yes);
    CHECK(classify(pair(2, 7)) == Vote::yes);
    CHECK(classify(pair(0, 0)) == Vote::no);
    CHECK(classify(pair(-1500, 0)) == Vote::no);
    Reply three = pair(1, 7);
    three.elements.push_back(reply(Reply::Type::integer, 1));
    CHECK(classify(three) == Vote::failed);
  }
}

TEST_CASE("rendezvous hashing picks `count` masters per key, whatever their order", "[quorum]") {
  std::vector<Endpoint> masters;
  for (int port = 7001; port <= 7005; ++port) {
    Endpoint m;
    m.port = port;
    masters.push_back(m);
  }
  std::vector<Endpoint> reversed(masters.rbegin(), masters.rend());
  std::vector<int> picked_per_master(masters.size());
  for (int k = 0; k < 200; ++k) {
    std::string key = "resource-" + std::to_string(k);
    std::size_t picked = 0;
    for (std::size_t i = 0; i < masters.size(); ++i) {
      bool first = rendezvous_among_first(key, masters, i, 3);
      CHECK(first == rendezvous_among_first(key, reversed, masters.size() - 1 - i, 3));
      if (first) {
        ++picked;
        ++picked_per_master[i];
      }
    }
    CHECK(picked == 3);
  }
  // Keys spread over the masters: each carries about 3/5 of them.
  for (int count : picked_per_master) {
    CHECK(count > 80);
    CHECK(count < 160);
  }
}
