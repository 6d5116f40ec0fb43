#include "all_call.hpp"

#include <redlock/error.hpp>

#include <algorithm>
#include <utility>

namespace redlock {

AllCall::AllCall(AllHost& host, std::uint64_t id, Lock lock, std::vector<std::string> keys,
                 std::chrono::milliseconds ttl, std::chrono::milliseconds wait, AllHost::Answer answer)
    : host_(host),
      id_(id),
      lock_(std::move(lock)),
      ttl_(ttl),
      deadline_(uv_now(host.event_loop()) + static_cast<std::uint64_t>(wait.count())),
      once_(wait.count() == 0),
      answer_(std::move(answer)) {
  places_.reserve(keys.size());
  for (std::string& key : keys) places_.push_back(std::make_unique<Place>(*this, std::move(key)));
}

AllCall::~AllCall() {
  // Answered calls left their lines already; close() answers every call
  // before the Client's Waiters go.
  if (answer_) leave_lines();
}

void AllCall::start() {
  // Joins every line on one turn: the calls ahead of it in one line are
  // ahead in all the lines they share.
  for (const auto& place : places_) host_.lines().enlist(place->key, *place);
  if (first_everywhere()) {
    attempt();
  } else {
    sleep(left_ms());
  }
}

void AllCall::cancel() {
  if (!answer_) return;
  canceled_ = true;
  if (in_flight_ != 0) {
    host_.cancel_attempt(in_flight_);  // answered through on_answer
    return;
  }
  answer(make_error_code(errc::canceled), {});
}

void AllCall::close() {
  answer(make_error_code(errc::closed), {});
}

void AllCall::Place::wake(std::string_view message) {
  if (Waiters::released_value(message) == call.lock_.value) return;  // the clean-up of our own attempt
  if (message == Waiters::queue_wake) woken_by_queue = true;
  call.woken();
}

void AllCall::woken() {
  if (!answer_) return;
  if (in_flight_ != 0) {
    woken_in_flight_ = true;  // the attempt in flight may fail before the release: try again then
    return;
  }
  if (!first_everywhere()) return;  // the line ahead wakes us when it leaves
  if (timer_) uv_timer_stop(timer_.get());
  attempt();
}

bool AllCall::first_everywhere() const {
  return std::all_of(places_.begin(), places_.end(),
                     [this](const auto& place) { return host_.lines().first_in_line(place->key, *place); });
}

void AllCall::attempt() {
  woken_in_flight_ = false;
  tried_ = true;
  auto self = shared_from_this();
  in_flight_ = host_.attempt_all(
      lock_, ttl_, [self](std::error_code error, Lock lock) { self->on_answer(error, std::move(lock)); });
}

void AllCall::on_answer(std::error_code error, Lock lock) {
  in_flight_ = 0;
  if (!answer_) return;
  if (!error) return answer({}, std::move(lock));
  if (canceled_) return answer(make_error_code(errc::canceled), {});
  if (error != errc::not_acquired && error != errc::unavailable) return answer(error, {});
  last_ = error;
  // A wait that ran out says timeout; a single attempt (wait 0) says what it met.
  if (left_ms() == 0)
    return answer(error == errc::not_acquired && !once_ ? make_error_code(errc::timeout) : error, {});
  for (const auto& place : places_) {
    host_.lines().refused(place->key);
    host_.lines().listen(place->key);
  }
  if (std::exchange(woken_in_flight_, false) && first_everywhere()) return attempt();
  sleep(std::min<std::uint64_t>(left_ms(), static_cast<std::uint64_t>(host_.pause().count())));
}

// Until woken, `ms` at most (0: woken only, or the deadline).
void AllCall::sleep(std::uint64_t ms) {
  if (!timer_) timer_ = make_timer(host_.event_loop(), this);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        AllCall* call = owner_of<AllCall>(t);
        if (call->left_ms() == 0) {
          std::error_code last = call->last_;
          call->answer(!last || last == errc::not_acquired ? make_error_code(errc::timeout) : last, {});
        } else if (call->first_everywhere()) {
          call->attempt();
        } else {
          call->sleep(call->left_ms());
        }
      },
      ms == 0 ? left_ms() : ms, 0);
}

void AllCall::answer(std::error_code error, Lock lock) {
  auto answer = std::exchange(answer_, nullptr);
  if (!answer) return;
  auto self = shared_from_this();  // all_call_done() drops the host's reference
  if (error && error != errc::closed && tried_) {
    for (const auto& place : places_) host_.writer_gone(place->key, lock_.value);
  }
  leave_lines();
  timer_.close();
  host_.all_call_done(id_, error);
  // The closure keeps this call alive until it has run: we may be deep in a
  // Waiters callback now.
  host_.post_answer([self = std::move(self), answer = std::move(answer), error, lock = std::move(lock)]() {
    answer(error, error ? Lock{} : lock);
  });
}

void AllCall::leave_lines() {
  for (const auto& place : places_) {
    host_.lines().leave(place->key, *place, std::exchange(place->woken_by_queue, false));
  }
  places_.clear();
}

std::uint64_t AllCall::left_ms() const {
  std::uint64_t now = uv_now(host_.event_loop());
  return deadline_ > now ? deadline_ - now : 0;
}

}  // namespace redlock
