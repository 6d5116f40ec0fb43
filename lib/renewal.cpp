#include "renewal.hpp"

#include <string_view>
#include <utility>

#include "keys.hpp"
#include "operation.hpp"
#include "quorum.hpp"
#include "scripts.hpp"

namespace redlock {

Renewal::Renewal(Token, Context& context, std::vector<Item> items, TimePoint t0, Decided decided)
    : context_(context), items_(std::move(items)), decided_(std::move(decided)) {
  int n = static_cast<int>(context_.masters.size());
  rounds_.reserve(items_.size());
  for (std::size_t i = 0; i < items_.size(); ++i) {
    rounds_.emplace_back(
        Round::Token{}, n, t0, [this, i](const Outcome& o) { decide(i, o); }, Decide::early);
  }
}

std::shared_ptr<Renewal> Renewal::start(Context& context, std::vector<Item> items, Decided decided) {
  // t0 before any byte of the batch is written, as for every round.
  uv_update_time(context.loop);
  TimePoint t0 = context.clock.now();
  auto renewal = std::make_shared<Renewal>(Token{}, context, std::move(items), t0, std::move(decided));
  const auto& all = renewal->items_;
  if (!all.empty() && !all.front().resources.empty()) {
    // A lock_all: one vote for all of its keys.
    const Item& item = all.front();
    std::vector<std::string> argv;
    for (const std::string& resource : item.resources)
      argv.push_back(keys::lock(context.options.key_prefix, resource));
    const std::size_t n = argv.size();
    argv.push_back(item.value);
    argv.push_back(std::to_string(item.ttl.count()));
    std::vector<std::string_view> views(argv.begin(), argv.end());
    auto command = Command::flags(scripts::renew_all, n, views, 1);
    for (const auto& m : context.masters) m->send(command, renewal);
    return renewal;
  }
  const bool shared = !all.empty() && all.front().shared;
  std::vector<std::string> keys;
  std::vector<std::string> ttls;
  keys.reserve(2 * all.size());
  ttls.reserve(all.size());
  for (const Item& item : all) {
    keys.push_back(keys::held(context.options.key_prefix, item.resource, item.permit));
    ttls.push_back(std::to_string(item.ttl.count()));
  }
  // Shared holds: their holders' keys follow the lock keys.
  if (shared) {
    for (std::size_t i = 0; i < all.size(); ++i) keys.push_back(keys::shared_holders(keys[i]));
  }
  std::vector<std::string_view> argv;
  argv.reserve(keys.size() + 2 * all.size());
  for (const std::string& k : keys) argv.emplace_back(k);
  for (const Item& item : all) argv.emplace_back(item.value);
  for (const std::string& t : ttls) argv.emplace_back(t);
  auto command =
      Command::flags(shared ? scripts::renew_shared : scripts::renew, keys.size(), argv, all.size());
  for (const auto& m : context.masters) m->send(command, renewal);
  return renewal;
}

void Renewal::on_reply(const Master& from, const Reply& reply) {
  if (reply.type != Reply::Type::string) {
    for (Round& r : rounds_) r.on_reply(from, reply);  // an error reply: a failed vote for each
    return;
  }
  // The Master checked the shape: one '0' or '1' per lock.
  Reply vote;
  vote.type = Reply::Type::integer;
  for (std::size_t i = 0; i < rounds_.size(); ++i) {
    vote.integer = reply.str[i] == '1' ? 1 : 0;
    rounds_[i].on_reply(from, vote);
  }
}

void Renewal::on_failure(const Master& from, Failure why) {
  for (Round& r : rounds_) r.on_failure(from, why);
}

// Operation::on_decided's rule for extend.
void Renewal::decide(std::size_t index, const Outcome& outcome) {
  const Item& item = items_[index];
  const Options& o = context_.options;
  TimePoint valid_until =
      quorum::valid_until(outcome.t0, item.ttl, quorum::drift(item.ttl, o.drift_factor, o.drift_constant));
  std::error_code error;
  if (!outcome.reached || context_.clock.now() >= valid_until) {
    error = make_error_code(outcome.error == errc::unavailable ? errc::unavailable : errc::not_held);
  }
  decided_(item.value, error, valid_until);
}

}  // namespace redlock
