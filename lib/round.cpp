#include "round.hpp"

#include <algorithm>
#include <utility>

#include "quorum.hpp"

namespace redlock {

Vote classify(const Reply& reply) {
  switch (reply.type) {
    case Reply::Type::status:
      return reply.str == "OK" ? Vote::yes : Vote::failed;
    case Reply::Type::integer:
      return reply.integer > 0 ? Vote::yes : Vote::no;
    case Reply::Type::nil:
      return Vote::no;
    case Reply::Type::string:
    case Reply::Type::array:
    case Reply::Type::error:
      return Vote::failed;
  }
  return Vote::failed;
}

std::shared_ptr<Round> Round::start(const std::vector<std::unique_ptr<Master>>& masters,
                                    std::shared_ptr<const Command> command, TimePoint t0, Decided decided) {
  std::shared_ptr<Round> round(new Round(static_cast<int>(masters.size()), t0, std::move(decided)));
  for (const auto& m : masters) m->send(command, round);
  return round;
}

void Round::on_reply(const Master& from, const Reply& reply) {
  Vote vote = classify(reply);
  if (!from.voting()) vote = Vote::failed;
  if (vote == Vote::yes && !from.run_id().empty()) {
    // Two endpoints that reach one server must not make two votes.
    if (std::find(yes_run_ids_.begin(), yes_run_ids_.end(), from.run_id()) != yes_run_ids_.end()) {
      vote = Vote::failed;
    } else {
      yes_run_ids_.push_back(from.run_id());
    }
  }
  count(from, vote);
}

void Round::on_failure(const Master& from, Failure) {
  count(from, Vote::failed);
}

void Round::count(const Master&, Vote vote) {
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
  if (tally_.yes >= quorum::majority(n_)) {
    outcome.reached = true;
  } else if (!quorum::still_possible(tally_.yes, tally_.no + tally_.failed, n_)) {
    outcome.error = quorum::too_few_answered(tally_.failed, n_) ? errc::unavailable : errc::not_acquired;
  } else {
    return;
  }
  auto decided = std::exchange(decided_, nullptr);
  decided(outcome);
}

}  // namespace redlock
