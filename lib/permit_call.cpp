#include "permit_call.hpp"

#include <redlock/error.hpp>

#include <algorithm>
#include <utility>

namespace redlock {

PermitCall::PermitCall(PermitHost& host, std::uint64_t id, Lock lock, int permits,
                       std::chrono::milliseconds ttl, std::chrono::milliseconds wait,
                       PermitHost::Answer answer)
    : host_(host),
      alive_(host.host_alive()),
      id_(id),
      lock_(std::move(lock)),
      permits_(permits),
      ttl_(ttl),
      deadline_(host.now_ms() + static_cast<std::uint64_t>(wait.count())),
      answer_(std::move(answer)) {
}

void PermitCall::start() {
  // From a random permit on: callers spread over the permits instead of all
  // racing for the first.
  next_ = host_.random_below(permits_);
  attempt(std::chrono::milliseconds{0});
}

void PermitCall::cancel() {
  if (!answer_) return;
  canceled_ = true;
  if (in_flight_ != 0) host_.cancel_permit(in_flight_);
}

// One attempt on permit next_ (wait 0), or a wait on it.
void PermitCall::attempt(std::chrono::milliseconds wait) {
  Lock attempt = lock_;
  attempt.permit = next_;
  const bool waited = wait.count() > 0;
  auto self = shared_from_this();
  in_flight_ = host_.acquire_permit(
      std::move(attempt), ttl_, wait,
      [self, waited](std::error_code error, Lock lock) { self->on_answer(error, std::move(lock), waited); });
}

void PermitCall::on_answer(std::error_code error, Lock lock, bool waited) {
  in_flight_ = 0;
  if (alive_.expired()) return answer(make_error_code(errc::closed), {});
  if (!error) return answer({}, std::move(lock));
  if (canceled_) return answer(make_error_code(errc::canceled), {});
  if (error == errc::timeout) error = make_error_code(errc::not_acquired);  // the wait on one permit ran out
  if (error != errc::not_acquired && error != errc::unavailable) return answer(error, {});
  last_ = error;
  next_ = (next_ + 1) % permits_;
  if (!waited && ++scanned_ < permits_) return attempt(std::chrono::milliseconds{0});
  scanned_ = 0;
  if (left_ms() == 0) return answer(last_ == errc::not_acquired ? make_error_code(errc::timeout) : last_, {});
  if (waited) return attempt(std::chrono::milliseconds{0});  // scan them all again
  // Every permit was held: wait on one, woken by its release, for a while.
  auto wait = std::min<std::uint64_t>(left_ms(), static_cast<std::uint64_t>(host_.pause().count()));
  attempt(std::chrono::milliseconds{wait});
}

void PermitCall::answer(std::error_code error, Lock lock) {
  auto answer = std::exchange(answer_, nullptr);
  if (!answer) return;
  // Already on a later turn than the call: the acquire's own answer.
  if (!alive_.expired()) host_.permit_call_done(id_, error);
  answer(error, std::move(lock));
}

std::uint64_t PermitCall::left_ms() const {
  std::uint64_t now = host_.now_ms();
  return deadline_ > now ? deadline_ - now : 0;
}

}  // namespace redlock
