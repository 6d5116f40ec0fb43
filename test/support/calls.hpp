#pragma once

// Drives one Client call to its answer on a LoopFixture, checking the
// callback contract on the way: never called inside the call, at most once.

#include <catch2/catch.hpp>

#include <redlock/client.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "loop.hpp"

namespace redlock::test {

struct Answer {
  int calls = 0;
  std::error_code error;
  Lock lock;
};

/// `start(cb)` issues the call with `cb`; returns the answer once it came.
template <class Start>
Answer await_answer(LoopFixture& loop, Start start,
                    std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
  auto answer = std::make_shared<Answer>();
  start([answer](std::error_code error, Lock lock) {
    ++answer->calls;
    answer->error = error;
    answer->lock = std::move(lock);
  });
  REQUIRE(answer->calls == 0);
  REQUIRE(loop.run_until([&] { return answer->calls > 0; }, deadline));
  REQUIRE(answer->calls == 1);
  return *answer;
}

inline Answer lock(LoopFixture& loop, Client& c, const std::string& resource, std::chrono::milliseconds ttl) {
  return await_answer(loop, [&](Client::LockCallback cb) { c.lock(resource, ttl, std::move(cb)); });
}

inline Answer try_lock(LoopFixture& loop, Client& c, const std::string& resource,
                       std::chrono::milliseconds ttl) {
  return await_answer(loop, [&](Client::LockCallback cb) { c.try_lock(resource, ttl, std::move(cb)); });
}

inline Answer extend(LoopFixture& loop, Client& c, const Lock& l, std::chrono::milliseconds ttl) {
  return await_answer(loop, [&](Client::LockCallback cb) { c.extend(l, ttl, std::move(cb)); });
}

inline Answer continue_lock(LoopFixture& loop, Client& c, const Lock& l, std::chrono::milliseconds ttl) {
  return await_answer(loop, [&](Client::LockCallback cb) { c.continue_lock(l, ttl, std::move(cb)); });
}

inline std::error_code unlock(LoopFixture& loop, Client& c, const Lock& l) {
  return await_answer(loop,
                      [&](Client::LockCallback cb) {
                        c.unlock(l, [cb = std::move(cb)](std::error_code e) { cb(e, Lock{}); });
                      })
      .error;
}

}  // namespace redlock::test
