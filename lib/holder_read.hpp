#pragma once

// One Client::holder call: a read of every master (scripts::read_holder) over
// the Client's own connections, summed up once each master has answered or
// failed. A master that does not vote (restart quarantine) counts as not
// answered: what it holds says nothing.

#include <redlock/inspect.hpp>

#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "master.hpp"

namespace redlock {

class HolderRead final : public ReplyHandler, public std::enable_shared_from_this<HolderRead> {
 public:
  using Callback = std::function<void(std::error_code, ResourceReport)>;

  /// Sends the read to every master; `cb` is called once, from a master's
  /// callback (a later loop turn), with errc::unavailable when fewer than a
  /// majority answered.
  static std::shared_ptr<HolderRead> start(const std::vector<std::unique_ptr<Master>>& masters,
                                           const std::string& key_prefix, std::string resource, Callback cb);

  /// Answers `error` now, unless answered already (the Client is closing).
  void abandon(std::error_code error);

  void on_reply(const Master& from, const Reply& reply) override;
  void on_failure(const Master& from, Failure why) override;

  struct Token {};  // make_shared needs a public constructor; only start() has a Token
  HolderRead(Token, std::size_t masters, std::string resource, Callback cb);

 private:
  void answered();
  bool read_twice(const Master& from) const;

  std::string resource_;
  Callback cb_;
  std::vector<KeyReport> keys_;       // per master index
  std::vector<bool> read_;            // per master index: it answered the read
  std::vector<std::string> run_ids_;  // of the masters read
  std::size_t left_;
};

}  // namespace redlock
