#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include "fifo.hpp"

using redlock::Fifo;

namespace {

std::vector<int> contents(Fifo<int>& q) {
  return {q.begin(), q.end()};
}

}  // namespace

TEST_CASE("a Fifo gives its elements back in the order they were pushed", "[fifo]") {
  Fifo<int> q;
  CHECK(q.empty());
  for (int i = 0; i < 5; ++i) q.push_back(i);
  CHECK(q.size() == 5);
  CHECK(q.front() == 0);
  q.pop_front();
  q.pop_front();
  CHECK(contents(q) == std::vector<int>{2, 3, 4});
  CHECK(std::vector<int>(q.rbegin(), q.rend()) == std::vector<int>{4, 3, 2});
  q.push_front(1);  // into a popped slot
  CHECK(contents(q) == std::vector<int>{1, 2, 3, 4});
  while (!q.empty()) q.pop_front();
  q.push_front(7);  // into an empty queue
  q.push_back(8);
  CHECK(contents(q) == std::vector<int>{7, 8});
}

TEST_CASE("a Fifo that never empties keeps its order and its size bounded", "[fifo]") {
  Fifo<int> q;
  int next_in = 0;
  int next_out = 0;
  for (int i = 0; i < 10; ++i) q.push_back(next_in++);
  for (int round = 0; round < 10000; ++round) {
    q.push_back(next_in++);
    REQUIRE(q.front() == next_out);
    q.pop_front();
    ++next_out;
  }
  CHECK(q.size() == 10);
  CHECK(contents(q) ==
        std::vector<int>{10000, 10001, 10002, 10003, 10004, 10005, 10006, 10007, 10008, 10009});
  // Compaction dropped the popped slots: not the 10,010 pushed.
  CHECK(q.slots() < 100);
}

TEST_CASE("a popped element's resources go at once", "[fifo]") {
  Fifo<std::shared_ptr<int>> q;
  auto shared = std::make_shared<int>(1);
  q.push_back(shared);
  q.push_back(std::make_shared<int>(2));
  CHECK(shared.use_count() == 2);
  q.pop_front();
  CHECK(shared.use_count() == 1);
}

TEST_CASE("a Fifo erases a range and swaps", "[fifo]") {
  Fifo<int> q;
  for (int i = 0; i < 8; ++i) q.push_back(i);
  q.pop_front();
  q.erase(std::remove_if(q.begin(), q.end(), [](int v) { return v % 2 == 0; }), q.end());
  CHECK(contents(q) == std::vector<int>{1, 3, 5, 7});
  Fifo<int> other;
  other.push_back(42);
  q.swap(other);
  CHECK(contents(q) == std::vector<int>{42});
  CHECK(contents(other) == std::vector<int>{1, 3, 5, 7});
}
