#pragma once

/// @file
/// Leader election on a name across the masters: Election and Leader.

#include <redlock/blocking.hpp>
#include <redlock/client.hpp>
#include <redlock/export.hpp>
#include <redlock/options.hpp>
#include <redlock/result.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

namespace redlock {

/// What a quorum read says of an election.
struct REDLOCK_API Leader {
  /// False: too few masters answered, or they disagree, or a new leader has
  /// not written who it is yet. Nothing else is meaningful then.
  bool known = false;
  /// Known, and someone leads.
  bool present = false;
  /// The leader's Election id.
  std::string id;
  /// The value it proclaimed last.
  std::string value;
  /// The fencing token of the leader's acquisition: strictly increasing over
  /// successive leaders (0 when no one leads). Hand it to what the leader
  /// writes to, as any fencing token.
  std::uint64_t term = 0;
};

/// Leader election on `name`, on a Client's loop thread: one leader at a
/// time, its term a fencing token. The election is the lock of the resource
/// `name` (kept alive while leading) plus, beside it, who leads and the
/// value it proclaimed, written only where its lock holds.
///
/// Callbacks as Client's: each exactly once (on_lost at most once, the
/// observer for every change), on the loop thread, never inside the call.
/// Destroying the Election stops observing, cancels a campaign and, if it
/// leads (or has just won), resigns (the lock is released); no callback
/// runs after that. It may be destroyed from inside its own callbacks, and
/// before or after its Client (after: nothing is released, the Client's
/// close ended it all). Once the Client closed, every call is answered
/// errc::closed. Values are 64 KiB at most (errc::invalid_argument).
class REDLOCK_API Election {
 public:
  /// Answers campaign(): the Leader it became, or why not (errc::timeout
  /// when `wait` ran out while another led).
  using Elected = std::function<void(std::error_code, Leader)>;
  /// Told once if leadership ends other than by resign() (Client::keep's
  /// on_lost: not_held, unavailable, expired, closed).
  using LostCallback = std::function<void(std::error_code)>;
  /// Answers proclaim() and resign().
  using Done = std::function<void(std::error_code)>;
  /// Answers leader(): errc::unavailable when no quorum could say.
  using LeaderCallback = std::function<void(std::error_code, Leader)>;
  /// Told each change observe() sees.
  using ChangeCallback = std::function<void(const Leader&)>;

  /// Throws std::invalid_argument when `name` or `id` is empty or `id` holds
  /// a newline, when `ttl` is not positive, or when the Client was made
  /// without Options::fencing (terms are fencing tokens).
  Election(Client& client, std::string name, std::string id, milliseconds ttl);
  ~Election();
  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;

  /// Waits at most `wait` (woken by the leader's release, as lock() is)
  /// until this candidate leads, writes who leads and `value`, and keeps
  /// the leadership alive until resign(). errc::invalid_argument while it
  /// already campaigns or leads. A resign() after the lock was won but
  /// before who leads was written gives the lock back: `elected` says
  /// errc::canceled.
  void campaign(std::string value, milliseconds wait, Elected elected, LostCallback on_lost);
  /// The leader changes its value, written where its lock still holds;
  /// errc::not_held when this Election does not lead (or a majority no
  /// longer holds its lock). Once answered, no read returns an older value;
  /// a proclaim that failed may still be applied (the renewals write the
  /// value proclaimed last).
  void proclaim(std::string value, Done cb);
  /// Ends the leadership (the lock is released, so a waiting candidate is
  /// elected about a round trip later), or a campaign still waiting
  /// (its `elected` is answered errc::canceled). errc::not_held when it
  /// neither leads nor campaigns.
  void resign(Done cb);
  /// One quorum read of who leads.
  void leader(LeaderCallback cb);
  /// Tells `on_change` of every change seen: a new leader, a proclaimed
  /// value, no leader (released, expired, lost). Woken by the masters'
  /// messages, and by the leader's expiry; never a lower term after a
  /// higher one. Unknown states are not reported. One observer per
  /// Election; another call replaces it.
  void observe(ChangeCallback on_change);
  /// While leading: until when acting as the leader is safe (the lock's
  /// validity, as renewals move it on); the epoch otherwise.
  std::chrono::steady_clock::time_point valid_until() const;
  /// How later campaigns keep their leadership alive (Client::keep's options
  /// and its renewal hook: record and return, no call on the Client).
  void keep_with(KeepOptions options, Client::RenewedCallback on_renewed);
  /// While leading: the lock it holds (its value, validity, term as fencing
  /// token); an empty Lock otherwise.
  Lock lock() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// The same election for threads, over a Redlock: an Election on its loop
/// thread, each call blocking until answered. Thread-safe. Destroy it before
/// its Redlock; destroying it while leading resigns.
class REDLOCK_API Leadership {
 public:
  /// Throws std::invalid_argument as Election does.
  Leadership(Redlock& redlock, std::string name, std::string id, milliseconds ttl);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  /// See Election::campaign: the Leader this candidate became.
  Result<Leader> campaign(std::string value, milliseconds wait);
  /// See Election::proclaim.
  std::error_code proclaim(std::string value);
  /// See Election::resign.
  std::error_code resign();
  /// See Election::leader.
  Result<Leader> leader();
  /// The leadership won last ended other than by resign(): why (its
  /// on_lost); no error while it leads or after a resign.
  std::error_code lost() const;
  /// See Election::valid_until (one call to the loop thread).
  std::chrono::steady_clock::time_point valid_until();
  /// See Election::observe: `on_change` runs on the Redlock's loop thread
  /// (record and return; call nothing of this Leadership from it).
  void observe(Election::ChangeCallback on_change);

  class State;

 private:
  Redlock& redlock_;
  std::shared_ptr<State> state_;
};

}  // namespace redlock
