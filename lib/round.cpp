#include "round.hpp"

#include <algorithm>
#include <utility>

#include "quorum.hpp"

namespace redlock {

Round::Round(Token, int n, TimePoint t0, Decided decided, Decide rule)
    : n_(n), rule_(rule), t0_(t0), decided_(std::move(decided)) {
  if (static_cast<std::size_t>(n) > yes_inline_.size()) yes_overflow_.reserve(static_cast<std::size_t>(n));
}

std::shared_ptr<Round> Round::start(const std::vector<std::unique_ptr<Master>>& masters,
                                    const std::shared_ptr<const Command>& command, TimePoint t0,
                                    Decided decided, Decide rule, std::chrono::milliseconds patience) {
  auto round =
      std::make_shared<Round>(Token{}, static_cast<int>(masters.size()), t0, std::move(decided), rule);
  for (const auto& m : masters) m->send(command, round, patience);
  return round;
}

std::shared_ptr<Round> Round::start_gated(const std::vector<std::unique_ptr<Master>>& masters,
                                          const std::shared_ptr<const Command>& command, Master& gate,
                                          const std::shared_ptr<const Command>& gate_command, TimePoint t0,
                                          Decided decided, bool veto, Decide rule,
                                          std::chrono::milliseconds patience) {
  auto round =
      std::make_shared<Round>(Token{}, static_cast<int>(masters.size()), t0, std::move(decided), rule);
  round->gate_ = &gate;
  round->gate_veto_ = veto;
  // The gate's answer (a veto, a woken waiter) is the one a waiter's round
  // waits for, and a release should wake the next waiter as early as it can.
  // Its command is written last: masters that share a CPU run in about the
  // reverse order of their wake-ups (the scheduler favours the task that
  // just woke), and the one written last answers first. On separate hosts
  // the order of writes microseconds apart makes no difference.
  // Each master writes what it buffered once per turn of the loop (one
  // write for all the rounds started meanwhile), from a prepare handle;
  // libuv runs those latest-started first, so the gate, buffered first,
  // writes after the others. A flush per command here would cost a
  // system call per master per round: at 256 rounds in flight that was
  // most of the client's time.
  gate.send(gate_command, round, patience);
  for (const auto& m : masters) {
    if (m.get() != &gate) m->send(command, round, patience);
  }
  return round;
}

std::shared_ptr<Round> Round::start_waking(const std::vector<std::unique_ptr<Master>>& masters,
                                           const std::shared_ptr<const Command>& command,
                                           const std::vector<const Master*>& waking,
                                           const std::shared_ptr<const Command>& waking_command, TimePoint t0,
                                           Decided decided, Decide rule, std::chrono::milliseconds patience) {
  auto round =
      std::make_shared<Round>(Token{}, static_cast<int>(masters.size()), t0, std::move(decided), rule);
  auto wakes = [&waking](const Master* m) {
    return waking.empty() || std::find(waking.begin(), waking.end(), m) != waking.end();
  };
  // Buffered first, written last, as a gate's command is (start_gated).
  for (const auto& m : masters) {
    if (wakes(m.get())) m->send(waking_command, round, patience);
  }
  for (const auto& m : masters) {
    if (!wakes(m.get())) m->send(command, round, patience);
  }
  return round;
}

std::shared_ptr<Round> Round::start_past_gate(const std::vector<std::unique_ptr<Master>>& masters,
                                              const std::shared_ptr<const Command>& command,
                                              const Master& gate, TimePoint t0, Decided decided) {
  auto round = std::make_shared<Round>(Token{}, static_cast<int>(masters.size()), t0, std::move(decided),
                                       Decide::early);
  round->gate_ = &gate;
  round->gate_answered_ = true;
  round->remember_yes(gate);
  ++round->tally_.yes;
  for (const auto& m : masters) {
    if (m.get() != &gate) m->send(command, round);
  }
  return round;
}

std::shared_ptr<Round> Round::start_on(Master& master, const std::shared_ptr<const Command>& command,
                                       TimePoint t0, Decided decided) {
  auto round = std::make_shared<Round>(Token{}, 1, t0, std::move(decided), Decide::early);
  round->gate_ = &master;
  master.send(command, round);
  return round;
}

void Round::on_reply(const Master& from, const Reply& answer) {
  const Reply& reply = result_of(answer);
  Vote vote = classify(reply);
  if (!from.voting()) vote = Vote::failed;
  if (reply.type == Reply::Type::integer) {
    tally_.most = std::max(tally_.most, reply.integer);
    // The acquire script's no: -(the holder's remaining ms + 1).
    if (vote == Vote::no && reply.integer < 0) {
      holder_left_ms_.push_back(-reply.integer - 1);
      if (&from == gate_) refused_at_gate_ = true;
    }
  }
  if (&from == gate_) {
    gate_answered_ = true;
    gate_said_no_ = vote == Vote::no;
  }
  if (vote == Vote::yes) {
    // Two endpoints that reach one server must not make two votes.
    bool overflow = static_cast<std::size_t>(n_) > yes_inline_.size();
    const Master* const* begin = overflow ? yes_overflow_.data() : yes_inline_.data();
    const Master* const* end = begin + tally_.yes;
    bool same_server = !from.run_id().empty() &&
                       std::any_of(begin, end, [&](const Master* m) { return m->run_id() == from.run_id(); });
    if (same_server) {
      vote = Vote::failed;
    } else {
      remember_yes(from);
      if (reply.type == Reply::Type::integer && reply.integer == 1) ++tally_.renewed;
      if (with_counter(answer)) tally_.counter = std::max(tally_.counter, answer.elements[1].integer);
    }
  }
  count(vote);
}

void Round::on_failure(const Master& from, Failure) {
  if (&from == gate_) gate_answered_ = true;
  count(Vote::failed);
}

void Round::count(Vote vote) {
  switch (vote) {
    case Vote::yes:
      ++tally_.yes;
      break;
    case Vote::no:
      ++tally_.no;
      break;
    case Vote::failed:
      ++tally_.failed;
      break;
  }
  if (!decided_) return;
  Outcome outcome;
  outcome.t0 = t0_;
  outcome.tally = tally_;
  int majority = quorum::majority(n_);
  if (gate_veto_ && gate_said_no_) {
    outcome.error = errc::not_acquired;
  } else if (tally_.yes >= majority) {
    if (gate_veto_ && !gate_answered_) return;
    int unanswered = n_ - tally_.yes - tally_.no - tally_.failed;
    // Whether ownership was continuous must not depend on reply order.
    if (rule_ == Decide::renewal && tally_.renewed < majority && tally_.renewed + unanswered >= majority)
      return;
    outcome.reached = true;
  } else if (!quorum::still_possible(tally_.yes, tally_.no + tally_.failed, n_)) {
    bool unavailable = quorum::too_few_answered(tally_.failed, n_);
    // "Not held" needs a majority that answered; until then a master still
    // to answer may hold our value.
    if (rule_ == Decide::answered && !unavailable && tally_.yes + tally_.no < majority) return;
    outcome.error = unavailable ? errc::unavailable : errc::not_acquired;
  } else {
    return;
  }
  if (!outcome.reached) outcome.free_in_ms = free_in_ms();
  outcome.refused_at_gate = refused_at_gate_;
  auto decided = std::exchange(decided_, nullptr);
  decided(outcome);
}

// Before tally_.yes counts it.
void Round::remember_yes(const Master& from) {
  if (static_cast<std::size_t>(n_) > yes_inline_.size()) {
    yes_overflow_.push_back(&from);
  } else {
    yes_inline_[static_cast<std::size_t>(tally_.yes)] = &from;
  }
}

// A majority is free once enough holders' keys expired: the yes votes are
// ours (released on failure); failed and unanswered masters count as never.
long long Round::free_in_ms() const {
  int needed = quorum::majority(n_) - tally_.yes;
  if (needed <= 0) return 0;
  if (holder_left_ms_.size() < static_cast<std::size_t>(needed)) return -1;
  std::vector<long long> left = holder_left_ms_;
  std::nth_element(left.begin(), left.begin() + (needed - 1), left.end());
  return left[static_cast<std::size_t>(needed - 1)];
}

}  // namespace redlock
