#pragma once

#include <redlock/error.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "clock.hpp"
#include "master.hpp"
#include "round.hpp"

namespace redlock {

class Context;

/// One batched renewal: extend for many locks at once. A single scripts::renew
/// call goes to each master covering every lock; each master's string of
/// per-lock answers is split into votes for one Round per lock, so every lock
/// is decided exactly as extend() decides (quorum, same-server votes counted
/// once, validity from this batch's t0, never re-creating a key).
class Renewal final : public ReplyHandler, public std::enable_shared_from_this<Renewal> {
 public:
  /// The most locks in one call, so that a reply stays small (one byte each).
  static constexpr std::size_t max_locks = 1000;

  struct Item {
    std::string resource;
    int permit = -1;      // Lock::permit
    bool shared = false;  // Lock::shared: a batch holds one kind only
    std::string value;
    std::chrono::milliseconds ttl;
    std::vector<std::string> resources;  // Lock::resources: a lock_all, alone in its batch
  };
  /// Called once per item: no error and the new valid_until, or not_held /
  /// unavailable (the lock is lost; nothing is released here).
  using Decided = std::function<void(const std::string& value, std::error_code error, TimePoint valid_until)>;

  /// Sends the batch to every master; `decided` runs from a master's callback,
  /// never inside start(). The caller keeps the Renewal alive while it wants
  /// the answers. At most max_locks items.
  static std::shared_ptr<Renewal> start(Context& context, std::vector<Item> items, Decided decided);

  void on_reply(const Master& from, const Reply& reply) override;
  void on_failure(const Master& from, Failure why) override;

  struct Token {};  // make_shared needs a public constructor; only start() has a Token
  Renewal(Token, Context& context, std::vector<Item> items, TimePoint t0, Decided decided);

 private:
  void decide(std::size_t index, const Outcome& outcome);

  Context& context_;
  std::vector<Item> items_;
  std::vector<Round> rounds_;
  Decided decided_;
};

}  // namespace redlock
