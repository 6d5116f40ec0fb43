#include <redlock/election.hpp>

#include <uv.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "client_access.hpp"
#include "keys.hpp"
#include "operation.hpp"
#include "quorum.hpp"
#include "round.hpp"
#include "scripts.hpp"
#include "uv_handle.hpp"

namespace redlock {
namespace {

// Who leads, as the leader wrote it beside its lock: its lock value, so a
// reader can tell this leader's record from an earlier one's.
struct Record {
  std::string lock_value;
  std::uint64_t term = 0;
  std::string id;
  std::string value;
};

std::string format_record(const Record& r) {
  return r.lock_value + "\n" + std::to_string(r.term) + "\n" + r.id + "\n" + r.value;
}

std::optional<Record> parse_record(std::string_view text) {
  Record r;
  std::size_t a = text.find('\n');
  if (a == std::string_view::npos) return std::nullopt;
  std::size_t b = text.find('\n', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  std::size_t c = text.find('\n', b + 1);
  if (c == std::string_view::npos) return std::nullopt;
  r.lock_value = std::string(text.substr(0, a));
  std::string_view term = text.substr(a + 1, b - a - 1);
  if (std::from_chars(term.data(), term.data() + term.size(), r.term).ec != std::errc{}) return std::nullopt;
  r.id = std::string(text.substr(b + 1, c - b - 1));
  r.value = std::string(text.substr(c + 1));
  return r;
}

// One read of every master (scripts::read_leader), summed up as a Leader
// once each answered or failed, with the least time the leader's key has left.
class LeaderRead final : public ReplyHandler {
 public:
  using Callback = std::function<void(Leader, std::chrono::milliseconds left)>;

  LeaderRead(std::size_t masters, Callback cb)
      : cb_(std::move(cb)), left_(masters), n_(static_cast<int>(masters)) {}

  void on_reply(const Master& from, const Reply& reply) override {
    const auto& e = reply.elements;
    bool twice = !from.run_id().empty() &&
                 std::find(run_ids_.begin(), run_ids_.end(), from.run_id()) != run_ids_.end();
    if (from.voting() && !twice && reply.type == Reply::Type::array && e.size() == 3 &&
        e[0].type == Reply::Type::string && e[1].type == Reply::Type::integer &&
        e[2].type == Reply::Type::string) {
      run_ids_.push_back(from.run_id());
      answers_.push_back({e[0].str, e[1].integer, e[2].str});
    }
    done();
  }
  void on_failure(const Master&, Failure) override { done(); }

 private:
  struct Answer {
    std::string value;
    long long pttl;
    std::string record;
  };

  void done() {
    if (left_ == 0 || --left_ > 0) return;
    auto cb = std::exchange(cb_, nullptr);
    std::chrono::milliseconds least{0};
    Leader leader = sum_up(least);
    cb(std::move(leader), least);
  }

  Leader sum_up(std::chrono::milliseconds& least) const {
    Leader l;
    const int majority = quorum::majority(n_);
    if (static_cast<int>(answers_.size()) < majority) return l;
    std::map<std::string, int> counts;
    for (const Answer& a : answers_) ++counts[a.value];
    auto most = std::max_element(counts.begin(), counts.end(),
                                 [](const auto& x, const auto& y) { return x.second < y.second; });
    if (most->second < majority) return l;  // no majority either way: not known
    if (most->first.empty()) {
      l.known = true;  // a majority holds no leader
      return l;
    }
    // Held: its record, as a majority of the masters that hold the lock
    // have it (a proclaim is taken once a majority wrote it; a minority may
    // still have the value before).
    std::map<std::string, int> records;
    bool first = true;
    for (const Answer& a : answers_) {
      if (a.value != most->first) continue;
      if (first || std::chrono::milliseconds{a.pttl} < least) least = std::chrono::milliseconds{a.pttl};
      first = false;
      ++records[a.record];
    }
    auto agreed = std::max_element(records.begin(), records.end(),
                                   [](const auto& x, const auto& y) { return x.second < y.second; });
    if (agreed == records.end() || agreed->second < majority) return l;  // not known yet
    auto r = parse_record(agreed->first);
    if (!r || r->lock_value != most->first) return l;
    l.known = true;
    l.present = true;
    l.term = r->term;
    l.id = r->id;
    l.value = r->value;
    return l;
  }

  Callback cb_;
  std::size_t left_;
  int n_;
  std::vector<Answer> answers_;
  std::vector<std::string> run_ids_;
};

bool same(const Leader& a, const Leader& b) {
  return a.known == b.known && a.present == b.present && a.term == b.term && a.id == b.id &&
         a.value == b.value;
}

}  // namespace

class Election::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(Client& client, std::string name, std::string id, milliseconds ttl)
      : client_(client),
        context_(ClientAccess::context(client)),
        name_(std::move(name)),
        id_(std::move(id)),
        ttl_(ttl),
        key_(keys::lock(context_.options.key_prefix, name_)),
        record_key_(keys::helper(key_, "leader")) {
    context_.on_close(closer_);
  }

  ~Impl() { stop(); }

  void campaign(std::string value, milliseconds wait, Elected elected, LostCallback on_lost) {
    if (!elected) elected = [](std::error_code, const Leader&) {};
    if (closed_) return post_elected(std::move(elected), errc::closed);
    if (state_ != State::idle || value.size() > max_value_bytes)
      return post_elected(std::move(elected), errc::invalid_argument);
    state_ = State::campaigning;
    on_lost_ = std::move(on_lost);
    const std::uint64_t generation = ++campaigns_;
    std::weak_ptr<Impl> weak = shared_from_this();
    // A lock() answered after its campaign ended (resigned, or the Election
    // destroyed once the answer was already on its way, which cancel() can
    // no longer stop) must not keep what it won.
    campaign_ = client_.lock(name_, ttl_, wait,
                             [weak, generation, client = &client_, client_alive = client_alive_,
                              value = std::move(value), elected](std::error_code e, Lock l) mutable {
                               if (auto self = weak.lock())
                                 return self->on_locked(generation, e, std::move(l), std::move(value),
                                                        std::move(elected));
                               if (!e && !client_alive.expired()) client->unlock(l, nullptr);
                             });
  }

  void proclaim(std::string value, Done cb) {
    if (!cb) cb = [](std::error_code) {};
    if (closed_) return post_done(std::move(cb), errc::closed);
    if (value.size() > max_value_bytes) return post_done(std::move(cb), errc::invalid_argument);
    if (state_ != State::leading) return post_done(std::move(cb), errc::not_held);
    Record r{lock_.value, lock_.fencing_token, id_, std::move(value)};
    // Renewals write the record sent last, answered or not: each master
    // applies what one connection carries in order, so a renewal never puts
    // an older value back over a proclaim sent before it. (A proclaim that
    // fails may still be applied, by itself or by the next renewal.)
    last_record_ = r;
    write_record(r, guarded(std::move(cb)));
  }

  void resign(Done cb) {
    if (!cb) cb = [](std::error_code) {};
    if (closed_) return post_done(std::move(cb), errc::closed);
    switch (state_) {
      case State::idle:
        return post_done(std::move(cb), errc::not_held);
      case State::campaigning:
        state_ = State::idle;
        ++campaigns_;  // if its lock() was answered already, the answer gives back what it won
        client_.cancel(std::exchange(campaign_, 0));  // its `elected` says canceled
        return post_done(std::move(cb), errc{});
      case State::electing:  // won, its record not yet written: `elected` will say canceled
      case State::leading:
        state_ = State::idle;
        on_lost_ = nullptr;
        return client_.unlock(lock_, guarded(std::move(cb)));
    }
  }

  void leader(LeaderCallback cb) {
    if (!cb) return;
    if (closed_) {
      return context_.post([cb = guarded(std::move(cb))] { cb(make_error_code(errc::closed), Leader{}); });
    }
    read([cb = std::move(cb)](Leader l, milliseconds) {
      std::error_code e = l.known ? std::error_code{} : make_error_code(errc::unavailable);
      cb(e, std::move(l));
    });
  }

  void keep_with(KeepOptions options, Client::RenewedCallback on_renewed) {
    keep_options_ = options;
    on_renewed_ = std::move(on_renewed);
  }

  Lock lock() const { return state_ == State::leading ? lock_ : Lock{}; }

  std::chrono::steady_clock::time_point valid_until() const {
    return state_ == State::leading ? lock_.valid_until : std::chrono::steady_clock::time_point{};
  }

  void observe(ChangeCallback on_change) {
    on_change_ = std::move(on_change);
    if (closed_) return;
    if (watching_) return refresh();
    watching_ = true;
    // Releases of the lock, and the records the leaders write.
    for (Watch* w : {&lock_watch_, &record_watch_}) {
      context_.waiters.watch(w->key, *w);
      context_.waiters.listen(w->key, w == &lock_watch_);  // proclaim publishes always
    }
    refresh();
  }

 private:
  // Wakes the observer on a message about one key.
  struct Watch final : Waiters::Waiter {
    Watch(Impl& impl, std::string key) : impl(impl), key(std::move(key)) {}
    void wake(std::string_view) override { impl.refresh(); }
    void recheck() override { impl.refresh(); }
    Impl& impl;
    std::string key;
  };

  void on_locked(std::uint64_t generation, std::error_code e, Lock l, std::string value, Elected elected) {
    if (generation != campaigns_ || state_ != State::campaigning || stopped_) {
      // Resigned, stopped or closed meanwhile (and maybe campaigning again):
      // whatever the attempt won, give it back.
      if (!e) client_.unlock(l, nullptr);
      if (stopped_) return;
      return elected(e ? e : make_error_code(errc::canceled), Leader{});
    }
    campaign_ = 0;
    if (e) {
      state_ = State::idle;
      return elected(e, Leader{});
    }
    state_ = State::electing;
    lock_ = std::move(l);
    Record r{lock_.value, lock_.fencing_token, id_, std::move(value)};
    std::weak_ptr<Impl> weak = shared_from_this();
    last_record_ = r;
    write_record(r, [weak, r, elected = std::move(elected)](std::error_code written) {
      auto self = weak.lock();
      if (!self) return;
      // Resigned, destroyed or closed while the record was written: the lock
      // was given back then.
      if (self->state_ != State::electing || self->lock_.value != r.lock_value)
        return elected(make_error_code(errc::canceled), Leader{});
      if (written) {
        self->state_ = State::idle;
        self->client_.unlock(self->lock_, nullptr);
        return elected(written, Leader{});
      }
      self->lead();
      elected({}, Leader{true, true, r.id, r.value, r.term});
    });
  }

  // Keeps the lock alive until resign(); each renewal keeps the record too.
  void lead() {
    state_ = State::leading;
    std::weak_ptr<Impl> weak = shared_from_this();
    client_.keep(
        lock_, keep_options_,
        [weak, value = lock_.value](std::error_code e) {
          // This leadership's loss: not a later one's.
          auto self = weak.lock();
          if (!self || self->state_ != State::leading || self->lock_.value != value) return;
          self->state_ = State::idle;
          if (auto lost = std::exchange(self->on_lost_, nullptr)) lost(e);
        },
        [weak](std::chrono::steady_clock::time_point valid_until) {
          // From inside the keeper: record the validity; the record's own
          // renewal goes on a later turn.
          auto self = weak.lock();
          if (!self) return;
          self->lock_.valid_until = valid_until;
          if (self->on_renewed_) self->on_renewed_(valid_until);
          self->context_.post([weak] {
            if (auto s = weak.lock(); s && s->state_ == State::leading) s->renew_record();
          });
        });
  }

  // The record outlives a renewal period or two: each renewal writes it again.
  std::shared_ptr<const Command> record_command(const Record& r, bool announce) const {
    return Command::script(scripts::proclaim, {key_, record_key_, r.lock_value, format_record(r),
                                               std::to_string((3 * ttl_).count()),
                                               keys::release_channel(record_key_), announce ? "1" : "0"});
  }

  // Writes `r` where our lock holds and tells the observers; `done` hears
  // whether a majority did while the lock was valid.
  void write_record(const Record& r, std::function<void(std::error_code)> done) {
    uv_update_time(context_.loop);
    const std::uint64_t id = ++last_round_;
    std::weak_ptr<Impl> weak = shared_from_this();
    auto round = Round::start(
        context_.masters, record_command(r, true), context_.clock.now(), [weak, id](const Outcome& o) {
          auto self = weak.lock();
          if (!self) return;
          bool ok = o.reached && self->context_.clock.now() < self->lock_.valid_until;
          self->finish(id, ok ? errc{} : (o.error == errc::unavailable ? errc::unavailable : errc::not_held));
        });
    in_flight_[id] = {round, [done = std::move(done)](errc e) { done(make_error_code(e)); }};
  }

  // Quietly, at each renewal of the lock: nobody waits for the answer.
  void renew_record() {
    auto command = record_command(last_record_, false);
    for (const auto& m : context_.masters) m->send(command, {});
  }

  void read(std::function<void(Leader, milliseconds)> cb) {
    if (closed_ || context_.masters.empty()) {
      return context_.post([weak = weak_from_this(), cb = std::move(cb)] {
        if (auto self = weak.lock()) cb(Leader{}, milliseconds{0});
      });
    }
    std::weak_ptr<Impl> weak = shared_from_this();
    const std::uint64_t id = ++last_round_;
    auto answer = std::make_shared<std::pair<Leader, milliseconds>>();
    auto reading = std::make_shared<LeaderRead>(context_.masters.size(),
                                                [weak, id, answer](Leader l, milliseconds left) {
                                                  auto self = weak.lock();
                                                  if (!self) return;
                                                  *answer = {std::move(l), left};
                                                  self->finish(id, errc{});
                                                });
    // Closed before it answered: an unknown leader.
    in_flight_[id] = {reading, [cb = std::move(cb), answer](errc) { cb(answer->first, answer->second); }};
    auto command = Command::read(scripts::read_leader, {key_, record_key_});
    for (const auto& m : context_.masters) m->send(command, reading);
  }

  // Observing: one read at a time; a wake during it reads again after.
  void refresh() {
    if (!on_change_) return;
    if (reading_) {
      read_again_ = true;
      return;
    }
    reading_ = true;
    std::weak_ptr<Impl> weak = shared_from_this();
    read([weak](Leader l, milliseconds left) {
      auto self = weak.lock();  // alive through the observer's callback, which may destroy the Election
      if (!self) return;
      self->reading_ = false;
      self->report(l);
      if (self->closed_ || !self->on_change_) return;
      if (std::exchange(self->read_again_, false)) return self->refresh();
      // Not every change comes with a message (a leader's key expires): read
      // again when its key would run out, and now and then anyway.
      milliseconds next = self->ttl_;
      if (l.present && left.count() >= 0) next = std::min(next, left + milliseconds{5});
      self->arm(next);
    });
  }

  void report(const Leader& l) {
    if (!l.known) return;
    if (l.present && last_.present && l.term < last_.term) return;  // an older leader's read
    if (same(l, last_)) return;
    last_ = l;
    if (on_change_) on_change_(l);
  }

  // A round or read in flight answered: its callback runs on a later turn
  // (the round is still in its own callback now).
  void finish(std::uint64_t id, errc e) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;
    auto pending = std::move(it->second);
    in_flight_.erase(it);
    // Not once the Election is gone: no callback runs after its destruction.
    context_.post([weak = weak_from_this(), pending = std::move(pending), e] {
      if (auto self = weak.lock(); self && !self->stopped_) pending.answer(e);
    });
  }

  // The Client is closing: what is in flight gets no reply; answer it now.
  void closed() {
    closed_ = true;
    timer_.close();
    auto all = std::move(in_flight_);
    in_flight_.clear();
    for (auto& [id, pending] : all) {
      context_.post([weak = weak_from_this(), pending = std::move(pending)] {
        if (auto self = weak.lock(); self && !self->stopped_) pending.answer(errc::closed);
      });
    }
  }

  void arm(milliseconds after) {
    if (!timer_) timer_ = make_timer(context_.loop, this);
    uv_timer_start(
        timer_.get(), [](uv_timer_t* t) { owner_of<Impl>(t)->refresh(); },
        static_cast<std::uint64_t>(std::max<long long>(after.count(), 1)), 0);
  }

 public:
  // The Election is going: no callback of it runs any more, and what it
  // holds is given back. Idempotent; touches nothing of a Client destroyed
  // first.
  void stop() {
    stopped_ = true;
    ++campaigns_;
    on_change_ = nullptr;
    on_lost_ = nullptr;
    timer_.close();
    const State was = std::exchange(state_, State::idle);
    if (client_alive_.expired()) return;
    if (watching_) {
      context_.waiters.unwatch(lock_watch_.key, lock_watch_);
      context_.waiters.unwatch(record_watch_.key, record_watch_);
      watching_ = false;
    }
    if (closed_) return;
    if (campaign_ != 0) client_.cancel(std::exchange(campaign_, 0));
    if (was == State::electing || was == State::leading) client_.unlock(lock_, nullptr);
  }

 private:
  void post_elected(Elected elected, errc e) {
    context_.post([elected = guarded(std::move(elected)), e] { elected(make_error_code(e), Leader{}); });
  }
  void post_done(Done cb, errc e) {
    context_.post([cb = guarded(std::move(cb)), e] { cb(make_error_code(e)); });
  }

  // `cb`, run only while the Election lives: none of its callbacks runs after
  // its destruction, whoever answers it (the Client's unlock, a round).
  template <class... Args>
  std::function<void(Args...)> guarded(std::function<void(Args...)> cb) {
    return [weak = weak_from_this(), cb = std::move(cb)](Args... args) {
      if (auto self = weak.lock(); self && !self->stopped_) cb(std::move(args)...);
    };
  }

  Client& client_;
  Context& context_;
  const std::string name_;
  const std::string id_;
  const milliseconds ttl_;
  const std::string key_;
  const std::string record_key_;
  // A value (and so the record beside the lock) is at most this large: every
  // renewal writes it again, and every read brings it back.
  static constexpr std::size_t max_value_bytes = std::size_t{64} * 1024;
  enum class State {
    idle,
    campaigning,  // its lock() call waits
    electing,     // won the lock, writing who leads
    leading,
  };
  State state_ = State::idle;
  bool closed_ = false;   // the Client closed
  bool stopped_ = false;  // the Election is destroyed: no callback of it runs
  const std::weak_ptr<const bool> client_alive_ = context_.alive();  // expires with the Client
  Client::CallId campaign_ = 0;                                      // the lock() call of a campaign waiting
  std::uint64_t campaigns_ =
      0;                // the campaign whose lock() answer counts; older answers give back what they won
  Lock lock_;           // while electing or leading
  Record last_record_;  // what we sent last, written again at each renewal
  LostCallback on_lost_;
  KeepOptions keep_options_;
  Client::RenewedCallback on_renewed_;
  ChangeCallback on_change_;
  bool watching_ = false;
  bool reading_ = false;
  bool read_again_ = false;
  Leader last_;  // the last change reported
  Watch lock_watch_{*this, key_};
  Watch record_watch_{*this, record_key_};
  Timer timer_;
  // Rounds and reads in flight, by id: what keeps them alive, and their answer.
  struct Pending {
    std::shared_ptr<void> keeps;
    std::function<void(errc)> answer;
  };
  std::uint64_t last_round_ = 0;
  std::map<std::uint64_t, Pending> in_flight_;
  std::shared_ptr<std::function<void()>> closer_ =
      std::make_shared<std::function<void()>>([this] { closed(); });
};

Election::Election(Client& client, std::string name, std::string id, milliseconds ttl) {
  if (name.empty()) throw std::invalid_argument("redlock::Election: the name is empty");
  if (id.empty() || id.find('\n') != std::string::npos)
    throw std::invalid_argument("redlock::Election: the id is empty or holds a newline");
  if (ttl.count() <= 0) throw std::invalid_argument("redlock::Election: ttl must be positive");
  if (!ClientAccess::context(client).options.fencing)
    throw std::invalid_argument(
        "redlock::Election: the Client needs Options::fencing (terms are fencing tokens)");
  impl_ = std::make_shared<Impl>(client, std::move(name), std::move(id), ttl);
}

Election::~Election() {
  // Now, while the Client may still exist: the Impl may live on a moment in
  // a callback that is running.
  impl_->stop();
}

void Election::campaign(std::string value, milliseconds wait, Elected elected, LostCallback on_lost) {
  impl_->campaign(std::move(value), wait, std::move(elected), std::move(on_lost));
}

void Election::proclaim(std::string value, Done cb) {
  impl_->proclaim(std::move(value), std::move(cb));
}

void Election::resign(Done cb) {
  impl_->resign(std::move(cb));
}

void Election::leader(LeaderCallback cb) {
  impl_->leader(std::move(cb));
}

void Election::observe(ChangeCallback on_change) {
  impl_->observe(std::move(on_change));
}

std::chrono::steady_clock::time_point Election::valid_until() const {
  return impl_->valid_until();
}

void Election::keep_with(KeepOptions options, Client::RenewedCallback on_renewed) {
  impl_->keep_with(options, std::move(on_renewed));
}

Lock Election::lock() const {
  return impl_->lock();
}

}  // namespace redlock
