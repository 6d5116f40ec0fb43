#include "operation.hpp"

#include <algorithm>
#include <utility>

#include "keys.hpp"
#include "quorum.hpp"
#include "rendezvous.hpp"
#include "scripts.hpp"
#include "token.hpp"

namespace redlock {
namespace {

// Refusals at the gate, with no release heard meanwhile, after which a
// waiter's next attempt not started by a release asks every master.
constexpr int stale_gate_refusals = 2;

}  // namespace

Context::Context(uv_loop_t* l, Options o)
    : loop(l),
      options(std::move(o)),
      clock(options.clock),
      rng(random_seed()),
      tls(TlsContext::for_options(options)) {
}

Operation::Operation(Context& context, Kind kind, Lock lock, milliseconds ttl, int attempts, Callback cb)
    : context_(context),
      kind_(kind),
      lock_(std::move(lock)),
      ttl_(ttl),
      attempts_left_(attempts),
      cb_(std::move(cb)),
      key_(keys::held(context.options.key_prefix, lock_.resource, lock_.permit)) {
  if (context.options.fencing && (kind == Kind::acquire || kind == Kind::continue_lock))
    counter_key_ = keys::fencing(key_);
  if (lock_.shared) holders_key_ = keys::shared_holders(key_);
  for (const std::string& resource : lock_.resources)
    keys_.push_back(keys::lock(context.options.key_prefix, resource));
}

std::shared_ptr<const Command> Operation::make_command() const {
  if (lock_.shared) return make_shared_command();
  if (multi()) return make_multi_command();
  std::string ttl = std::to_string(ttl_.count());
  switch (kind_) {
    case Kind::acquire:
      if (!counter_key_.empty())
        return Command::script(scripts::acquire_fenced, {key_, counter_key_, keys::writer_waiting(key_),
                                                         lock_.value, ttl, waiting_ ? mark_ms() : "0"});
      // A waiter learns from a failed attempt when the holder's keys expire.
      if (waiting_)
        return Command::script(scripts::acquire,
                               {key_, keys::writer_waiting(key_), lock_.value, ttl, mark_ms()});
      return Command::set_nx({"SET", key_, lock_.value, "NX", "PX", ttl});
    case Kind::extend:
      return Command::script(scripts::extend, {key_, lock_.value, ttl});
    case Kind::continue_lock:
      if (!counter_key_.empty())
        return Command::script(scripts::continue_fenced, {key_, counter_key_, lock_.value, ttl});
      return Command::script(scripts::continue_lock, {key_, lock_.value, ttl});
    case Kind::unlock:
      return unlock_command(lock_.value, lock_.value, false, false);
  }
  return nullptr;
}

// make_command for a shared lock (scripts::acquire_shared and the others).
std::shared_ptr<const Command> Operation::make_shared_command() const {
  std::string ttl = std::to_string(ttl_.count());
  std::string_view fenced = counter_key_.empty() ? "0" : "1";
  switch (kind_) {
    case Kind::acquire:
      return Command::script(scripts::acquire_shared,
                             {key_, holders_key_, keys::fencing(key_), keys::writer_waiting(key_),
                              keys::reservation(key_), lock_.value, ttl, fenced, "0", ""});
    case Kind::extend:
      return Command::script(scripts::extend_shared, {key_, holders_key_, lock_.value, ttl});
    case Kind::continue_lock:
      return Command::script(scripts::continue_shared,
                             {key_, holders_key_, keys::fencing(key_), keys::writer_waiting(key_),
                              keys::reservation(key_), lock_.value, ttl, fenced});
    case Kind::unlock:
      return unlock_command(lock_.value, lock_.value, context_.waiters.subscribed(key_), false);
  }
  return nullptr;
}

std::vector<std::string> Operation::helpers(std::string (*name)(std::string_view)) const {
  std::vector<std::string> out;
  out.reserve(keys_.size());
  for (const std::string& key : keys_) out.push_back(name(key));
  return out;
}

// make_command for a lock_all (scripts::acquire_all and the others): the
// lock keys, then their helpers in blocks, then ARGV.
std::shared_ptr<const Command> Operation::make_multi_command() const {
  std::string ttl = std::to_string(ttl_.count());
  std::string fenced = counter_key_.empty() ? "0" : "1";
  std::vector<std::string> argv = keys_;
  auto append = [&argv](std::vector<std::string> more) {
    argv.insert(argv.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  };
  const std::size_t n = keys_.size();
  switch (kind_) {
    case Kind::acquire: {
      append(helpers(keys::reservation));
      append(helpers(keys::writer_waiting));
      append(helpers(keys::fencing));
      auto next_ask = context_.options.retry_delay + context_.options.retry_jitter + std::chrono::seconds(1);
      append({lock_.value, ttl, marks_writer ? std::to_string(next_ask.count()) : "0", fenced});
      return Command::script_over(scripts::acquire_all, 4 * n, argv);
    }
    case Kind::extend:
      append({lock_.value, ttl});
      return Command::script_over(scripts::extend_all, n, argv);
    case Kind::continue_lock:
      append(helpers(keys::fencing));
      append({lock_.value, ttl, "0", fenced});
      return Command::script_over(scripts::continue_all, 2 * n, argv);
    case Kind::unlock:
      return unlock_command(lock_.value, lock_.value, false, false);
  }
  return nullptr;
}

// How long a waiting writer's mark, or its wake channel in the gate's queue,
// outlives this attempt. A living waiter asks again within retry_delay +
// jitter (its fallback timer), which renews them; one that died leaves them
// to expire soon after, not when its wait would have ended.
std::string Operation::mark_ms() const {
  std::uint64_t wait_left = deadline_ - std::min(deadline_, uv_now(context_.loop));
  auto next_ask =
      static_cast<std::uint64_t>((context_.options.retry_delay + context_.options.retry_jitter).count());
  constexpr std::uint64_t slack_ms = 1000;
  return std::to_string(std::min(wait_left, next_ask) + slack_ms);
}

// How many other Clients the unlock's best answer says it told (see
// scripts::unlock; unlock_shared counts only the others already).
long long Operation::others_told(long long answer) const {
  if (lock_.shared) return answer - 1;
  long long ourselves = context_.waiters.subscribed(key_) ? 1 : 0;
  return answer >= 2 ? std::max(answer - 2 - ourselves, 0LL) : 0;
}

// The unlock script for `value`, publishing `message`; at the gate master
// also waking the head of the queue, which has a command_timeout (what a
// master has to answer) to claim the key. `subscribed` matters to a shared
// lock's unlock only: this Client listens too, and is not counted as told.
std::shared_ptr<const Command> Operation::unlock_command(std::string_view value, std::string_view message,
                                                         bool subscribed, bool at_gate) const {
  std::string_view others_only = subscribed ? "1" : "0";
  if (multi()) {
    // Every master wakes the heads of the queues it keeps (each key's gate).
    std::vector<std::string> argv = keys_;
    argv.emplace_back(value);
    argv.emplace_back(message);
    argv.push_back(std::to_string(context_.options.command_timeout.count()));
    return Command::script_over(scripts::unlock_all, keys_.size(), argv);
  }
  if (lock_.shared)
    return Command::script(scripts::unlock_shared,
                           {key_, keys::queue(key_), keys::reservation(key_), holders_key_, value,
                            keys::release_channel(key_), message, others_only,
                            std::to_string(context_.options.command_timeout.count()), at_gate ? "1" : "0"});
  // The fewest arguments: a master's time per unlock grows with each.
  std::string marker = keys::listening(key_);
  if (!at_gate) {
    if (message == value) return Command::script(scripts::unlock, {key_, marker, value});
    return Command::script(scripts::unlock, {key_, marker, value, message});
  }
  std::string reservation = std::to_string(context_.options.command_timeout.count());
  if (message == value) return Command::script(scripts::unlock_and_wake, {key_, marker, value, reservation});
  return Command::script(scripts::unlock_and_wake, {key_, marker, value, reservation, message});
}

// The acquire for a waiter's gate master: queues our wake channel there if
// refused, when our subscriber there would hear the wake. The queue lives at
// least as long as this waiter may still wait.
std::shared_ptr<const Command> Operation::make_gate_command(const Master& gate) {
  std::string_view wake_channel = context_.waiters.wake_channel_at(gate);
  if (lock_.shared) {
    // Shared waiters do not queue: they are refused while a writer waits or
    // the key is reserved for the queue's head, and wake on releases.
    asked_to_queue_ = false;
    return Command::script(
        scripts::acquire_shared,
        {key_, holders_key_, keys::fencing(key_), keys::writer_waiting(key_), keys::reservation(key_),
         lock_.value, std::to_string(ttl_.count()), counter_key_.empty() ? "0" : "1", "1", wake_channel});
  }
  asked_to_queue_ = !wake_channel.empty();
  if (asked_to_queue_) context_.waiters.asked(key_, gate);
  // The queue lives at least as long as this waiter may still wait.
  return Command::script(
      scripts::acquire_or_queue,
      {key_, keys::queue(key_), keys::reservation(key_), keys::writer_waiting(key_), keys::listening(key_),
       lock_.value, std::to_string(ttl_.count()), wake_channel, mark_ms()});
}

void Operation::wait_until(std::uint64_t deadline, bool answer_timeout) {
  deadline_ = std::max<std::uint64_t>(deadline, 1);
  answer_timeout_ = answer_timeout;
}

void Operation::start() {
  if (extends()) context_.extension_issued(lock_);
  waiting_ = waits();
  command_ = make_command();
  if (!waiting_) {
    attempt();
    return;
  }
  enlisted_ = true;
  // Refused lately: others wait for it too, queued at the gate. Ask the gate
  // first, where this Client queues behind them, rather than all masters,
  // where it would win the masters the head of the queue needs.
  tried_ = context_.waiters.contended(key_);
  context_.waiters.enlist(key_, *this);
  if (context_.waiters.first_in_line(key_, *this)) {
    try_now();
  } else {
    sleep(deadline_ == 0 ? 0 : deadline_ - std::min(deadline_, uv_now(context_.loop)));
  }
}

// A waiter attempts only first in line, and not while this Client lets
// others take a resource it just released.
void Operation::try_now() {
  if (!context_.waiters.first_in_line(key_, *this)) return;
  std::uint64_t now = uv_now(context_.loop);
  std::uint64_t yield_until = context_.waiters.yield_until(key_);
  // (A wait that ends first still gets its attempt: wait 0 is one attempt.)
  if (yield_until > now && (deadline_ == 0 || yield_until < deadline_)) {
    sleep(yield_until - now);
    return;
  }
  attempt();
}

void Operation::wake(std::string_view message) {
  if (!cb_) return;                                             // answered already
  if (Waiters::released_value(message) == lock_.value) return;  // the clean-up of our own attempt
  if (Waiters::is_partial(message) && held_by_majority_) return;
  if (message == Waiters::queue_wake) reserved_ = true;
  if (!message.empty()) gate_refusals_ = 0;  // the gate's holder may have let go
  if (in_flight_) {
    woken_ = true;  // the attempt in flight may fail before the release; try again then
    return;
  }
  if (retry_timer_) uv_timer_stop(retry_timer_.get());
  by_release_ = !message.empty();
  try_now();
}

// Like a release, the check is not one of lock()'s retries.
void Operation::recheck() {
  if (!cb_) return;
  if (in_flight_) {
    woken_ = true;
    return;
  }
  if (retry_timer_) uv_timer_stop(retry_timer_.get());
  by_release_ = true;
  try_now();
}

// Sleeps `ms` (0: until woken or the deadline), never past the deadline.
void Operation::sleep(std::uint64_t ms) {
  if (deadline_ != 0) {
    std::uint64_t left = deadline_ - std::min(deadline_, uv_now(context_.loop));
    ms = ms == 0 ? left : std::min(ms, left);
  }
  if (!retry_timer_) retry_timer_ = make_timer(context_.loop, this);
  if (ms == 0 && deadline_ == 0) return;  // woken only
  uv_timer_start(
      retry_timer_.get(),
      [](uv_timer_t* t) {
        Operation* op = owner_of<Operation>(t);
        if (op->out_of_time()) {
          op->answer_waited(op->last_error_);
        } else {
          op->try_now();
        }
      },
      ms, 0);
}

bool Operation::out_of_time() const {
  return deadline_ != 0 && uv_now(context_.loop) >= deadline_;
}

// The wait ran out: timeout while others held the lock (or before it came
// first in line), the last attempt's error otherwise.
void Operation::answer_waited(errc last) {
  bool held_by_others = last == errc{} || last == errc::not_acquired;
  if (held_by_others) last = answer_timeout_ ? errc::timeout : errc::not_acquired;
  finish(last);
}

void Operation::attempt() {
  // An attempt a release started is not one of lock()'s retries: its time
  // budget bounds those.
  bool by_release = std::exchange(by_release_, false);
  if (!by_release) --attempts_left_;
  in_flight_ = true;
  // Every attempt takes its own t0, before any byte of it is written.
  uv_update_time(context_.loop);
  TimePoint t0 = context_.clock.now();
  if (kind_ == Kind::extend && t0 >= lock_.valid_until) {
    // Too late to extend: someone else may already hold it.
    lost(errc::not_held);
    return;
  }
  passed_gate_ = false;
  // Woken by the queue, a waiter asks all masters at once: the gate keeps the
  // key for it. (With fencing that round does not end the reservation: the
  // gate first.)
  bool reserved = std::exchange(reserved_, false) && counter_key_.empty();
  claiming_ = reserved;
  if (waiting_ && std::exchange(tried_, true) && !reserved) {
    // A gate that kept refusing with no release heard may hold a key nobody
    // will release (an attempt's, written while the gate was away and run
    // when it came back): then every master is asked, and the gate's no is
    // one vote among them, not a veto.
    // (Not for a shared lock: the gate is where a waiting writer keeps new
    // shared holders out.)
    if (!by_release && gate_refusals_ >= stale_gate_refusals && !lock_.shared) {
      start_round(t0, false);
      return;
    }
    if (Master* g = context_.waiters.gate(key_)) {
      gate_ = g;
      round_ = Round::start_on(*g, make_gate_command(*g), t0, [this](const Outcome& o) { on_gate(o); });
      return;
    }
  }
  start_round(t0);
}

// A waiter's later attempts first ask one master, the gate: the same for every
// Client that names the masters alike (Waiters::gate), and go to all only if
// it said yes. Waiters in many processes would otherwise split the votes
// (each wins some masters, none a majority) and retry in a storm. At the gate
// one of them passes; the others learn the holder's ttl there and are queued
// there, to be woken one per release in the order they came. A gate that is
// down or slow is skipped.
void Operation::on_gate(const Outcome& outcome) {
  if (outcome.error == errc::not_acquired) {
    // Held at the gate: nothing of ours to release there.
    ++gate_refusals_;
    in_flight_ = false;
    held_by_majority_ = false;
    note_queue(outcome);
    attempt_failed(errc::not_acquired, &outcome, false);
    return;
  }
  passed_gate_ = outcome.reached;
  if (passed_gate_) gate_refusals_ = 0;
  context_.waiters.unqueued(key_);
  // The gate's yes holds the key there for us: its vote counts as given, and
  // with N = 1 the gate step was the whole attempt. (With fencing the gate
  // must answer its counter in the round like the others.)
  if (outcome.reached && counter_key_.empty()) {
    if (context_.masters.size() == 1) {
      on_decided(outcome);
      return;
    }
    round_ = Round::start_past_gate(context_.masters, command_, *gate_, outcome.t0,
                                    [this](const Outcome& o) { on_decided(o); });
    return;
  }
  uv_update_time(context_.loop);
  start_round(context_.clock.now());
}

void Operation::start_round(TimePoint t0, bool gate_veto) {
  auto decided = [this](const Outcome& o) { on_decided(o); };
  if (kind_ == Kind::unlock) {
    if (!multi()) {
      auto [g, usual] = context_.waiters.gates(key_);
      bool subscribed = lock_.shared && context_.waiters.subscribed(key_);  // only unlock_shared asks
      auto wake = unlock_command(lock_.value, lock_.value, subscribed, true);
      if (g != nullptr && g == usual) {
        round_ = Round::start_gated(context_.masters, command_, *g, wake, t0, std::move(decided), false,
                                    Decide::answered, release_patience());
        return;
      }
      // This Client's gate is not the top-ranked master, which does not vote
      // here (yet): the waiters, who may see it voting, queue there, or at
      // ours. Both wake their queue; with none voting yet (`redlock
      // release`), every master does, as we cannot tell which the waiters see.
      std::vector<const Master*> waking;
      if (g != nullptr) waking = {g, usual};
      round_ = Round::start_waking(context_.masters, command_, waking, wake, t0, std::move(decided),
                                   Decide::answered, release_patience());
      return;
    }
    round_ = Round::start(context_.masters, command_, t0, std::move(decided), Decide::answered,
                          release_patience());
  } else if (kind_ == Kind::continue_lock) {
    round_ = Round::start(context_.masters, command_, t0, std::move(decided), Decide::renewal);
  } else if (Master* g = gated_round() && !multi() ? context_.waiters.gate(key_) : nullptr) {
    gate_ = g;
    // The head of the queue claiming its reservation needs no veto: the gate
    // refuses everyone else meanwhile.
    round_ = Round::start_gated(context_.masters, command_, *g, make_gate_command(*g), t0, std::move(decided),
                                !claiming_ && gate_veto);
  } else {
    round_ = Round::start(context_.masters, command_, t0, std::move(decided));
  }
}

// Whether a waiter's round on all masters also goes through the gate (its
// veto, its queue): when the key is contended, where a queue may be kept.
// Not for an uncontended lock(), which pays no more than try_lock, and not
// with fencing, where the gate master must answer its counter like the others.
// A shared acquire always goes through the gate, with its veto: a writer
// waiting or the queue's head woken keeps new shared holders out there.
bool Operation::gated_round() const {
  if (lock_.shared) return kind_ == Kind::acquire;
  return waiting_ && counter_key_.empty() && context_.waiters.contended(key_);
}

// How long a release waits for a master to come back. A key of ours lives at
// most its ttl after the command that set it ran; for unlock, what is left of
// the lock's validity plus a connect. (A master paused with our SET unread
// runs it whenever it resumes: no bound covers that; the key then lives its ttl.)
milliseconds Operation::release_patience() const {
  if (kind_ != Kind::unlock) return ttl_;
  auto left = std::chrono::duration_cast<milliseconds>(lock_.valid_until - context_.clock.now());
  return std::max(left, milliseconds{0}) + context_.options.connect_timeout;
}

void Operation::on_decided(const Outcome& outcome) {
  in_flight_ = false;
  TimePoint valid_until = quorum::valid_until(
      outcome.t0, ttl_, quorum::drift(ttl_, context_.options.drift_factor, context_.options.drift_constant));
  bool still_valid = outcome.reached && context_.clock.now() < valid_until;
  switch (kind_) {
    case Kind::acquire:
      if (!still_valid) {
        note_queue(outcome);
        held_by_majority_ =
            passed_gate_ && outcome.tally.no >= quorum::majority(static_cast<int>(context_.masters.size()));
        // A quorum that answered too slowly gives a lock that is already dead.
        attempt_failed(outcome.reached ? errc::unavailable : outcome.error, &outcome);
        return;
      }
      if (waiting_) context_.waiters.unqueued(key_);  // the gate took us out of its queue
      if (!counter_key_.empty()) {
        fence(outcome.tally.counter, valid_until);
        return;
      }
      break;
    case Kind::extend:
    case Kind::continue_lock: {
      if (!still_valid) {
        lost(outcome.error == errc::unavailable ? errc::unavailable : errc::not_held);
        return;
      }
      // continue_lock held it without a gap only if a majority renewed our
      // existing value (not re-created it) in a round that began before the
      // old lock ran out: a re-created key says nothing about who held it
      // meanwhile. An extend never re-creates, so one that succeeded always was.
      int majority = quorum::majority(static_cast<int>(context_.masters.size()));
      lock_.continued =
          kind_ == Kind::extend || (outcome.t0 < lock_.valid_until && outcome.tally.renewed >= majority);
      // Held without a gap, so no other token was handed out meanwhile: the
      // token stays. Otherwise this is a fresh acquisition and gets a new one.
      if (!counter_key_.empty() && !(lock_.continued && lock_.fencing_token != 0)) {
        fence(outcome.tally.counter, valid_until);
        return;
      }
      break;
    }
    case Kind::unlock: {
      if (!outcome.reached) {
        finish(outcome.error == errc::unavailable ? errc::unavailable : errc::not_held);
        return;
      }
      auto round_trip =
          std::chrono::duration_cast<std::chrono::microseconds>(context_.clock.now() - outcome.t0);
      if (!multi())
        context_.waiters.released_by_us(key_, lock_.value, others_told(outcome.tally.most), round_trip);
      finish({});
      return;
    }
  }
  lock_.valid_until = valid_until;
  lock_.ttl = ttl_;
  finish({});
}

// Fencing's second round: the token is one more than the largest counter the
// granting masters answered; it counts once a majority raised their counter
// to it where our value still holds, before the lock ran out. Every later
// grant majority shares a master with that one, so it reads at least the token.
void Operation::fence(long long counter, TimePoint valid_until) {
  token_ = static_cast<std::uint64_t>(counter) + 1;
  std::string token = std::to_string(token_);
  in_flight_ = true;
  // The counter forgets a day after its last fence round here, later for a
  // longer ttl: by then this master's clock is past every token written to
  // it (the clock assumption in docs/fencing.md), and the clock floors the counter.
  constexpr milliseconds forget_after = std::chrono::hours(24);
  std::string forget = std::to_string(std::max(ttl_, forget_after).count());
  std::shared_ptr<const Command> command;
  if (multi()) {
    std::vector<std::string> argv = keys_;
    for (std::string& counter : helpers(keys::fencing)) argv.push_back(std::move(counter));
    argv.insert(argv.end(), {lock_.value, token, forget});
    command = Command::script_over(scripts::fence_all, 2 * keys_.size(), argv);
  } else if (lock_.shared) {
    command = Command::script(scripts::fence_shared,
                              {key_, counter_key_, holders_key_, lock_.value, token, forget});
  } else {
    command = Command::script(scripts::fence, {key_, counter_key_, lock_.value, token, forget});
  }
  round_ = Round::start(context_.masters, command, context_.clock.now(),
                        [this, valid_until](const Outcome& o) { on_fenced(o, valid_until); });
}

void Operation::on_fenced(const Outcome& outcome, TimePoint valid_until) {
  in_flight_ = false;
  if (!outcome.reached || context_.clock.now() >= valid_until) {
    // Our value is gone from a majority, or too few answered in time: no
    // token, and the lock counts as not taken (or lost).
    errc error = outcome.reached ? errc::unavailable : outcome.error;
    if (kind_ == Kind::acquire) {
      release_everywhere(lock_.value, release_of_attempt(true));  // we held a majority: not a partial one
      attempt_failed(error, nullptr, false);
    } else {
      lost(error == errc::unavailable ? errc::unavailable : errc::not_held);
    }
    return;
  }
  lock_.fencing_token = token_;
  lock_.valid_until = valid_until;
  lock_.ttl = ttl_;
  finish({});
}

// Whether the attempt left us in the queue at the gate master, which then
// wakes us in turn. Not known (a round decided before the gate answered):
// not queued, so releases published to all still wake us.
void Operation::note_queue(const Outcome& outcome) {
  if (asked_to_queue_ && outcome.refused_at_gate && gate_ != nullptr) {
    context_.waiters.queued(key_, *gate_);
  } else {
    context_.waiters.unqueued(key_);
  }
  asked_to_queue_ = false;
}

void Operation::attempt_failed(errc error, const Outcome* outcome, bool release) {
  // Keys of an attempt that reached no majority were no lock: their release
  // is marked partial (see wake()).
  if (release) release_everywhere(lock_.value, release_of_attempt(outcome != nullptr && outcome->reached));
  if (told_free_in && outcome && outcome->free_in_ms >= 0) told_free_in(outcome->free_in_ms);
  last_error_ = error;
  if (attempts_left_ <= 0) {
    finish(error);
    return;
  }
  if (out_of_time()) {
    answer_waited(error);
    return;
  }
  std::uniform_int_distribution<long long> jitter(0, context_.options.retry_jitter.count());
  auto delay = static_cast<std::uint64_t>(context_.options.retry_delay.count() + jitter(context_.rng));
  if (!waiting_) {
    if (!retry_timer_) retry_timer_ = make_timer(context_.loop, this);
    uv_timer_start(
        retry_timer_.get(), [](uv_timer_t* t) { owner_of<Operation>(t)->attempt(); }, delay, 0);
    return;
  }
  if (error == errc::not_acquired) context_.waiters.refused(key_);
  if (std::exchange(woken_, false)) {
    by_release_ = true;
    try_now();  // a release came while this attempt was in flight
    return;
  }
  if (!context_.waiters.is_queued(key_)) context_.waiters.listen(key_);
  int majority = quorum::majority(static_cast<int>(context_.masters.size()));
  // Only a lock() with a wait: the retry-count form keeps its pauses (a
  // release still ends them), or it would spend its retries on ties.
  // (Not when queued at the gate: the gate refused, and wakes us in turn.)
  if (answer_timeout_ && outcome && error == errc::not_acquired && outcome->tally.yes > 0 &&
      outcome->tally.no < majority && !context_.waiters.is_queued(key_)) {
    // Split votes: nobody holds a majority, other waiters tried at the same
    // moment. A short random pause, a few round trips at most, breaks the tie.
    auto took = std::chrono::duration_cast<milliseconds>(context_.clock.now() - outcome->t0).count();
    std::uniform_int_distribution<long long> pause(1, std::max<long long>(2, 4 * took));
    delay = std::min<std::uint64_t>(delay, static_cast<std::uint64_t>(pause(context_.rng)));
  } else if (outcome && outcome->free_in_ms >= 0) {
    // The holder's keys expire on enough masters then (one more ms: PTTL rounds down).
    delay = std::min<std::uint64_t>(delay, static_cast<std::uint64_t>(outcome->free_in_ms) + 1);
  }
  sleep(delay);
}

void Operation::lost(errc error) {
  release_everywhere(lock_.value);
  context_.lost(lock_);
  finish(error);
}

// A failed attempt's keys: a minority (partial), or a majority that came too
// late; a writer that waits may try again, and keeps its marks meanwhile.
Operation::Release Operation::release_of_attempt(bool reached) const {
  if (!reached) return Release::partial;
  bool writer = !lock_.shared && (waiting_ || marks_writer);
  return writer ? Release::still_waiting : Release::lock;
}

// Sent to every master, including those that have not answered: a command
// that timed out may still have run, and a late yes must not leave our key.
// Written now, before the caller hears of the failure; a master that is down
// gets it when it comes back, within release_patience().
void Operation::release_everywhere(std::string_view value, Release what) {
  bool partial = what == Release::partial;
  std::string message = partial                          ? Waiters::partial_release(value)
                        : what == Release::still_waiting ? Waiters::waiting_release(value)
                                                         : std::string(value);
  auto command = unlock_command(value, message, false, false);
  // After an attempt that passed the gate and met a holder's majority, the
  // queue's head must not be woken: it would meet the same holder, and its
  // own clean-up would wake the next, round and round.
  const Master* gate = (partial && held_by_majority_) || multi() ? nullptr : context_.waiters.gate(key_);
  for (const auto& m : context_.masters) {
    m->send(m.get() == gate ? unlock_command(value, message, false, true) : command, {}, release_patience());
    m->flush();
  }
}

// A writer that stops waiting without the lock takes its mark away, so the
// shared waiters it kept out try again now rather than when it expires. A
// mark another writer set since (it holds that writer's value) stays.
void Operation::writer_gone(Context& context, const std::string& key, std::string_view value) {
  auto command =
      Command::script(scripts::unmark_writer, {keys::writer_waiting(key), keys::release_channel(key), value});
  for (const auto& m : context.masters) {
    m->send(command, {});
    m->flush();
  }
}

void Operation::finish(std::error_code error) {
  if (waiting_ && !lock_.shared && error && error != errc::closed) writer_gone(context_, key_, lock_.value);
  if (extends()) {
    if (std::error_code instead = context_.extension_decided(lock_, error)) error = instead;
  }
  round_.reset();
  retry_timer_.close();
  // A queue wake no attempt used: the gate keeps the key for this Client, so
  // it goes on to the next one (a cancel, a deadline during an attempt).
  if (std::exchange(enlisted_, false)) context_.waiters.leave(key_, *this, std::exchange(reserved_, false));
  auto cb = std::exchange(cb_, nullptr);
  Lock lock = error ? Lock{} : std::move(lock_);
  // One closure answers the caller and then frees this operation (we may be
  // deep inside its own call stack now).
  context_.post([cb = std::move(cb), error, lock = std::move(lock), self = context_.retire(*this),
                 alive = context_.alive()]() mutable {
    if (self && !alive.expired()) {
      if (!error) error = self->check_on_arrival(lock);
      if (self->counted) self->count(error);
    }
    cb(error, error ? Lock{} : std::move(lock));
  });
}

void Operation::count(std::error_code answer) {
  count(context_, kind_, answer,
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - called_at_));
}

void Operation::count(Context& context, Kind kind, std::error_code answer,
                      std::optional<std::chrono::microseconds> took) {
  CallStats& calls = context.calls;
  switch (kind) {
    case Kind::acquire:
      calls.acquire.count(answer);
      if (took) calls.acquire_latency.record(*took);
      break;
    case Kind::extend:
      calls.extend.count(answer);
      break;
    case Kind::continue_lock:
      calls.continue_lock.count(answer);
      break;
    case Kind::unlock:
      calls.unlock.count(answer);
      if (took) calls.unlock_latency.record(*took);
      break;
  }
}

// The answer runs on a later loop turn than the decision. If the caller's
// loop stalled in between, the lock may have run out: never hand over a dead
// lock, release it instead.
std::error_code Operation::check_on_arrival(const Lock& lock) {
  if (kind_ == Kind::unlock || context_.clock.now() < lock.valid_until) return {};
  release_everywhere(lock.value);
  if (kind_ == Kind::acquire) return make_error_code(errc::unavailable);
  context_.lost(lock);
  return make_error_code(errc::not_held);
}

void Operation::abandon() {
  if (!cb_ || kind_ != Kind::acquire) return;
  // A SET already written may still succeed: released at once, as after a
  // failed attempt, so nobody waits out its ttl.
  if (round_) release_everywhere(lock_.value);
  finish(make_error_code(errc::canceled));
}

void Operation::cancel() {
  // A SET already written may still succeed; whoever waits for this resource
  // must not wait out its ttl. An extend or continue_lock in flight is not
  // released: the caller still holds the lock it had, valid until its
  // valid_until, and must not find it deleted under it.
  if (round_ && kind_ == Kind::acquire) release_everywhere(lock_.value);
  // A writer that waited may have marked the masters: its marks go too.
  if (waiting_ && tried_ && !lock_.shared && kind_ == Kind::acquire) writer_gone(context_, key_, lock_.value);
  round_.reset();
  retry_timer_.close();
  enlisted_ = false;  // the client is closing: no line to leave, nobody to wake
  if (!cb_) return;
  if (counted) count(make_error_code(errc::closed));
  auto cb = std::exchange(cb_, nullptr);
  context_.post([cb = std::move(cb)] { cb(make_error_code(errc::closed), Lock{}); });
}

}  // namespace redlock
