#include "operation.hpp"

#include <utility>

#include "quorum.hpp"
#include "scripts.hpp"
#include "token.hpp"

namespace redlock {

Context::Context(uv_loop_t* l, Options o)
    : loop(l), options(std::move(o)), clock(options.clock), rng(random_seed()) {
}

Operation::Operation(Context& context, Kind kind, Lock lock, milliseconds ttl, int attempts, Callback cb)
    : context_(context),
      kind_(kind),
      lock_(std::move(lock)),
      ttl_(ttl),
      attempts_left_(attempts),
      cb_(std::move(cb)),
      key_(context.options.key_prefix + lock_.resource) {
}

std::shared_ptr<const Command> Operation::make_command() const {
  std::string ttl = std::to_string(ttl_.count());
  switch (kind_) {
    case Kind::acquire:
      return Command::plain({"SET", key_, lock_.value, "NX", "PX", ttl});
    case Kind::extend:
      return Command::script(scripts::extend, {key_, lock_.value, ttl});
    case Kind::continue_lock:
      return Command::script(scripts::continue_lock, {key_, lock_.value, ttl});
    case Kind::unlock:
      return Command::script(scripts::unlock, {key_, lock_.value});
  }
  return nullptr;
}

void Operation::start() {
  command_ = make_command();
  attempt();
}

void Operation::attempt() {
  --attempts_left_;
  // Every attempt takes its own t0, before any byte of it is written.
  uv_update_time(context_.loop);
  TimePoint t0 = context_.clock.now();
  if (kind_ == Kind::extend && t0 >= lock_.valid_until) {
    // Too late to extend: someone else may already hold it.
    lost(errc::not_held);
    return;
  }
  round_ = Round::start(context_.masters, command_, t0, [this](const Outcome& o) { on_decided(o); });
}

void Operation::on_decided(const Outcome& outcome) {
  TimePoint valid_until = quorum::valid_until(
      outcome.t0, ttl_, quorum::drift(ttl_, context_.options.drift_factor, context_.options.drift_constant));
  bool still_valid = outcome.reached && context_.clock.now() < valid_until;
  switch (kind_) {
    case Kind::acquire:
      if (!still_valid) {
        // A quorum that answered too slowly gives a lock that is already dead.
        attempt_failed(outcome.reached ? errc::unavailable : outcome.error);
        return;
      }
      break;
    case Kind::extend:
    case Kind::continue_lock:
      if (!still_valid) {
        lost(outcome.error == errc::unavailable ? errc::unavailable : errc::not_held);
        return;
      }
      // Held without a gap only if this round began before the old lock ran
      // out; an extend that succeeded always was.
      lock_.continued = kind_ == Kind::extend || outcome.t0 < lock_.valid_until;
      break;
    case Kind::unlock:
      if (!outcome.reached) {
        finish(outcome.error == errc::unavailable ? errc::unavailable : errc::not_held);
        return;
      }
      finish({});
      return;
  }
  lock_.valid_until = valid_until;
  finish({});
}

void Operation::attempt_failed(errc error) {
  release_everywhere();
  if (attempts_left_ <= 0) {
    finish(error);
    return;
  }
  std::uniform_int_distribution<long long> jitter(0, context_.options.retry_jitter.count());
  auto delay = context_.options.retry_delay.count() + jitter(context_.rng);
  if (!retry_timer_) retry_timer_ = make_timer(context_.loop, this);
  uv_timer_start(
      retry_timer_.get(), [](uv_timer_t* t) { owner_of<Operation>(t)->attempt(); },
      static_cast<std::uint64_t>(delay), 0);
}

void Operation::lost(errc error) {
  release_everywhere();
  finish(error);
}

// Sent to every master, including those that have not answered: a command
// that timed out may still have run, and a late yes must not leave our key.
// Written now, before the caller hears of the failure.
void Operation::release_everywhere() {
  auto command = Command::script(scripts::unlock, {key_, lock_.value});
  for (const auto& m : context_.masters) {
    m->send(command, {});
    m->flush();
  }
}

void Operation::finish(std::error_code error) {
  round_.reset();
  retry_timer_.close();
  auto cb = std::exchange(cb_, nullptr);
  Lock lock = error ? Lock{} : std::move(lock_);
  // One closure answers the caller and then frees this operation (we may be
  // deep inside its own call stack now).
  context_.post([cb = std::move(cb), error, lock = std::move(lock), self = context_.retire(*this)]() mutable {
    cb(error, std::move(lock));
  });
}

void Operation::cancel() {
  // A SET, extend or continue already written may still succeed; whoever
  // waits for this resource must not wait out its ttl.
  if (round_ && kind_ != Kind::unlock) release_everywhere();
  round_.reset();
  retry_timer_.close();
  if (!cb_) return;
  auto cb = std::exchange(cb_, nullptr);
  context_.post([cb = std::move(cb)] { cb(make_error_code(errc::closed), Lock{}); });
}

}  // namespace redlock
