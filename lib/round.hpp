#pragma once

#include <redlock/error.hpp>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clock.hpp"
#include "master.hpp"
#include "vote.hpp"

namespace redlock {

struct Tally {
  int yes = 0;
  int no = 0;
  int failed = 0;
  int renewed = 0;        // yes votes answered 1 by continue_lock: our existing value renewed
  long long most = 0;     // the largest integer answered (unlock: 1 + the listeners told)
  long long counter = 0;  // fencing scripts: the largest counter among the yes votes
};

/// When a round may decide against a majority.
enum class Decide {
  early,     // as soon as a majority of yes became impossible
  answered,  // only once a majority answered, or too many failed for one to (unlock)
  renewal,   // early, but a yes waits until it is known whether a majority renewed (continue_lock)
};

/// What a round decided, at the moment it could.
struct Outcome {
  bool reached = false;  // a majority voted yes
  errc error{};          // when not reached: not_acquired (others said no) or unavailable
  Tally tally;
  TimePoint t0{};  // when the round started, before any byte left
  // The acquire script: how long until a majority of masters could be free,
  // from the holders' remaining ttls; -1 when not known.
  long long free_in_ms = -1;
  // A round with a gate: the gate master had refused with the holder's
  // expiry (acquire_or_queue: queued us) by the time of the decision.
  bool refused_at_gate = false;
};

/// One fan-out of one command to every master. It decides as soon as the
/// outcome is known (a majority said yes, or a majority became impossible)
/// and never waits for stragglers: later answers are counted in tally() but
/// change nothing. A master that does not vote (restart quarantine) counts as
/// failed; masters that turn out to be one server (same run_id) count once.
class Round final : public ReplyHandler, public std::enable_shared_from_this<Round> {
 public:
  using Decided = std::function<void(const Outcome&)>;

  /// Starts a round on `masters`; `decided` is called once, from a master's
  /// callback (never inside start()). The caller keeps the Round alive as
  /// long as it wants the decision.
  /// `patience` is Master::send's: how long the command may wait for a
  /// connection after its vote failed.
  static std::shared_ptr<Round> start(const std::vector<std::unique_ptr<Master>>& masters,
                                      const std::shared_ptr<const Command>& command, TimePoint t0,
                                      Decided decided, Decide rule = Decide::early,
                                      std::chrono::milliseconds patience = {});
  /// start() where the master `gate` gets `gate_command` instead: a key's
  /// gate master keeps the queue of the Clients waiting for it. With `veto`
  /// (a waiter's attempt, which queues at its gate where refused there) the
  /// round is won only if the gate granted too, unless its vote failed:
  /// otherwise a waiter could win the other masters while the gate keeps the
  /// lock for the head of its queue.
  static std::shared_ptr<Round> start_gated(const std::vector<std::unique_ptr<Master>>& masters,
                                            const std::shared_ptr<const Command>& command, Master& gate,
                                            const std::shared_ptr<const Command>& gate_command, TimePoint t0,
                                            Decided decided, bool veto, Decide rule = Decide::early,
                                            std::chrono::milliseconds patience = {});
  /// start() where each master in `waking` (every master when empty) gets
  /// `waking_command` instead: an unlock that wakes the queue each of them may
  /// keep, when this Client cannot tell which master the waiters see as the gate.
  static std::shared_ptr<Round> start_waking(const std::vector<std::unique_ptr<Master>>& masters,
                                             const std::shared_ptr<const Command>& command,
                                             const std::vector<const Master*>& waking,
                                             const std::shared_ptr<const Command>& waking_command,
                                             TimePoint t0, Decided decided, Decide rule,
                                             std::chrono::milliseconds patience);
  /// The rest of a waiter's attempt after its gate alone said yes (start_on):
  /// the gate's vote counts as given at `t0`, the gate step's (validity runs
  /// from before the gate's write), and only the other masters are asked.
  /// With two masters or more one vote never decides, so `decided` is not
  /// called inside.
  static std::shared_ptr<Round> start_past_gate(const std::vector<std::unique_ptr<Master>>& masters,
                                                const std::shared_ptr<const Command>& command,
                                                const Master& gate, TimePoint t0, Decided decided);
  /// A round of one vote, on `master` alone (a waiter's gate).
  static std::shared_ptr<Round> start_on(Master& master, const std::shared_ptr<const Command>& command,
                                         TimePoint t0, Decided decided);

  void on_reply(const Master& from, const Reply& reply) override;
  void on_failure(const Master& from, Failure why) override;

  const Tally& tally() const { return tally_; }

  struct Token {};  // make_shared needs a public constructor; only start() has a Token
  Round(Token, int n, TimePoint t0, Decided decided, Decide rule);

 private:
  void count(Vote vote);
  void remember_yes(const Master& from);
  long long free_in_ms() const;

  int n_;
  Decide rule_;
  const Master* gate_ = nullptr;
  bool gate_veto_ = false;
  bool gate_answered_ = false;  // its vote counted (yes, no or failed)
  bool gate_said_no_ = false;
  bool refused_at_gate_ = false;  // no, with the holder's expiry
  TimePoint t0_;
  Decided decided_;
  Tally tally_;
  std::vector<long long> holder_left_ms_;  // no votes from the acquire script with a known expiry
  // Who voted yes, to spot one server reached twice; inline up to 16 masters.
  std::array<const Master*, 16> yes_inline_{};
  std::vector<const Master*> yes_overflow_;
};

}  // namespace redlock
