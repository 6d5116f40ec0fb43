#include <redlock/election.hpp>

#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "client_access.hpp"
#include "operation.hpp"

namespace redlock {

// Shared by the caller's threads and the loop thread. The Election is made,
// called and destroyed on the loop thread only.
class Leadership::State {
 public:
  std::unique_ptr<Election> election;  // loop thread only

  void set_lost(std::error_code e) {
    std::lock_guard<std::mutex> lock(mutex_);
    lost_ = e;
  }
  std::error_code lost() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lost_;
  }

 private:
  mutable std::mutex mutex_;
  std::error_code lost_;  // guarded by mutex_
};

namespace {

// Runs `call` on the loop thread and waits for the answer it gives `done`.
template <class T>
T run_and_wait(Redlock& redlock, bool (Redlock::*on_loop)(std::function<void(Client&)>),
               std::function<void(Client&, std::function<void(T)>)> call, T closed) {
  auto answer = std::make_shared<std::promise<T>>();
  auto future = answer->get_future();
  bool queued = (redlock.*on_loop)([call = std::move(call), answer](Client& client) {
    call(client, [answer](T value) { answer->set_value(std::move(value)); });
  });
  if (!queued) return closed;
  return future.get();
}

}  // namespace

Leadership::Leadership(Redlock& redlock, std::string name, std::string id, milliseconds ttl)
    : redlock_(redlock), state_(std::make_shared<State>()) {
  using Made = std::string;  // empty: made; else why not
  Made why = run_and_wait<Made>(
      redlock_, &Redlock::on_loop,
      [state = state_, name = std::move(name), id = std::move(id), ttl](Client& client,
                                                                        std::function<void(Made)> done) {
        try {
          state->election = std::make_unique<Election>(client, name, id, ttl);
          done({});
        } catch (const std::invalid_argument& e) {
          done(e.what());
        }
      },
      "redlock::Leadership: the Redlock is closing");
  if (!why.empty()) throw std::invalid_argument(why);
}

Leadership::~Leadership() {
  // Destroyed on the loop thread: a leader resigns there.
  std::shared_ptr<State> state = state_;
  (void)run_and_wait<bool>(
      redlock_, &Redlock::on_loop,
      [state](Client&, std::function<void(bool)> done) {
        state->election.reset();
        done(true);
      },
      false);
}

Result<Leader> Leadership::campaign(std::string value, milliseconds wait) {
  using Answer = std::pair<std::error_code, Leader>;
  state_->set_lost({});
  Answer answer = run_and_wait<Answer>(
      redlock_, &Redlock::on_loop,
      [state = state_, value = std::move(value), wait](Client&, std::function<void(Answer)> done) mutable {
        if (!state->election) return done({make_error_code(errc::closed), Leader{}});
        state->election->campaign(
            std::move(value), wait,
            [done](std::error_code e, Leader l) {
              done({e, std::move(l)});
            },
            [state](std::error_code e) { state->set_lost(e); });
      },
      Answer{make_error_code(errc::closed), Leader{}});
  if (answer.first) return answer.first;
  return std::move(answer.second);
}

std::error_code Leadership::proclaim(std::string value) {
  return run_and_wait<std::error_code>(
      redlock_, &Redlock::on_loop,
      [state = state_, value = std::move(value)](Client&, std::function<void(std::error_code)> done) mutable {
        if (!state->election) return done(make_error_code(errc::closed));
        state->election->proclaim(std::move(value), done);
      },
      make_error_code(errc::closed));
}

std::error_code Leadership::resign() {
  return run_and_wait<std::error_code>(
      redlock_, &Redlock::on_loop,
      [state = state_](Client&, std::function<void(std::error_code)> done) {
        if (!state->election) return done(make_error_code(errc::closed));
        state->election->resign(done);
      },
      make_error_code(errc::closed));
}

Result<Leader> Leadership::leader() {
  using Answer = std::pair<std::error_code, Leader>;
  Answer answer = run_and_wait<Answer>(
      redlock_, &Redlock::on_loop,
      [state = state_](Client&, std::function<void(Answer)> done) {
        if (!state->election) return done({make_error_code(errc::closed), Leader{}});
        state->election->leader([done](std::error_code e, Leader l) { done({e, std::move(l)}); });
      },
      Answer{make_error_code(errc::closed), Leader{}});
  if (answer.first) return answer.first;
  return std::move(answer.second);
}

std::chrono::steady_clock::time_point Leadership::valid_until() {
  using Time = std::chrono::steady_clock::time_point;
  return run_and_wait<Time>(
      redlock_, &Redlock::on_loop,
      [state = state_](Client&, std::function<void(Time)> done) {
        done(state->election ? state->election->valid_until() : Time{});
      },
      Time{});
}

void Leadership::observe(Election::ChangeCallback on_change) {
  (void)run_and_wait<bool>(
      redlock_, &Redlock::on_loop,
      [state = state_, on_change = std::move(on_change)](Client&, std::function<void(bool)> done) mutable {
        if (state->election) state->election->observe(std::move(on_change));
        done(true);
      },
      false);
}

std::error_code Leadership::lost() const {
  return state_->lost();
}

}  // namespace redlock
