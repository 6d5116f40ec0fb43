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
  watches_.reserve(keys.size());
  for (std::string& key : keys) watches_.push_back(std::make_unique<Watch>(*this, std::move(key)));
}

AllCall::~AllCall() {
  // Answered calls stopped watching already; close() answers every call
  // before the Client's Waiters go.
  if (answer_) unwatch();
}

void AllCall::start() {
  for (const auto& watch : watches_) host_.waiters_of_client().watch(watch->key, *watch);
  attempt();
}

void AllCall::cancel() {
  if (!answer_) return;
  canceled_ = true;
  if (in_flight_ != 0) {
    host_.cancel_attempt(in_flight_);  // answered through on_answer
    return;
  }
  answer(make_error_code(errc::canceled), {}, true);
}

void AllCall::close() {
  answer(make_error_code(errc::closed), {}, true);
}

void AllCall::Watch::wake(std::string_view message) {
  if (Waiters::released_value(message) == call.lock_.value) return;  // the clean-up of our own attempt
  call.woken();
}

void AllCall::woken() {
  if (!answer_) return;
  if (in_flight_ != 0) {
    woken_in_flight_ = true;  // the attempt in flight may fail before the release: try again then
    return;
  }
  if (timer_) uv_timer_stop(timer_.get());
  attempt();
}

void AllCall::attempt() {
  woken_in_flight_ = false;
  tried_ = true;
  free_in_ms_ = -1;
  auto self = shared_from_this();
  in_flight_ = host_.attempt_all(
      lock_, ttl_, !once_,
      [self](std::error_code error, Lock lock) { self->on_answer(error, std::move(lock)); },
      [self](long long free_in_ms) { self->free_in_ms_ = free_in_ms; });
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
  for (const auto& watch : watches_) {
    host_.waiters_of_client().refused(watch->key);
    host_.waiters_of_client().listen(watch->key);
  }
  if (std::exchange(woken_in_flight_, false)) return attempt();
  auto pause = static_cast<std::uint64_t>(host_.pause().count());
  // The holders' keys expire on enough masters then (one more ms: PTTL rounds down).
  if (free_in_ms_ >= 0) pause = std::min(pause, static_cast<std::uint64_t>(free_in_ms_) + 1);
  sleep(std::min(left_ms(), pause));
}

// Until woken, or `ms`.
void AllCall::sleep(std::uint64_t ms) {
  if (!timer_) timer_ = make_timer(host_.event_loop(), this);
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        AllCall* call = owner_of<AllCall>(t);
        if (call->left_ms() > 0) return call->attempt();
        std::error_code last = call->last_;
        call->answer(!last || last == errc::not_acquired ? make_error_code(errc::timeout) : last, {});
      },
      ms, 0);
}

void AllCall::answer(std::error_code error, Lock lock, bool later) {
  auto answer = std::exchange(answer_, nullptr);
  if (!answer) return;
  auto self = shared_from_this();  // all_call_done() drops the host's reference
  if (error && tried_ && !once_) {
    for (const auto& watch : watches_) host_.writer_gone(watch->key, lock_.value);
  }
  unwatch();
  timer_.close();
  host_.all_call_done(id_, error);
  if (!later) return answer(error, error ? Lock{} : std::move(lock));
  host_.post_answer([self = std::move(self), answer = std::move(answer), error]() { answer(error, Lock{}); });
}

void AllCall::unwatch() {
  for (const auto& watch : watches_) host_.waiters_of_client().unwatch(watch->key, *watch);
  watches_.clear();
}

std::uint64_t AllCall::left_ms() const {
  std::uint64_t now = uv_now(host_.event_loop());
  return deadline_ > now ? deadline_ - now : 0;
}

}  // namespace redlock
