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
    // Held: its record, where the key holds the leader's value.
    bool first = true;
    for (const Answer& a : answers_) {
      if (a.value != most->first) continue;
      if (first || std::chrono::milliseconds{a.pttl} < least) least = std::chrono::milliseconds{a.pttl};
      first = false;
      auto r = parse_record(a.record);
      if (!r || r->lock_value != a.value || r->term < l.term) continue;
      l.known = true;
      l.present = true;
      l.term = r->term;
      l.id = r->id;
      l.value = r->value;
    }
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
    if (campaign_ != 0 || leading_) return post_elected(std::move(elected), errc::invalid_argument);
    on_lost_ = std::move(on_lost);
    std::weak_ptr<Impl> weak = shared_from_this();
    campaign_ = client_.lock(name_, ttl_, wait,
                             [weak, value = std::move(value), elected](std::error_code e, Lock l) mutable {
                               if (auto self = weak.lock())
                                 self->on_locked(e, std::move(l), std::move(value), std::move(elected));
                             });
  }

  void proclaim(std::string value, Done cb) {
    if (!cb) cb = [](std::error_code) {};
    if (!leading_) return post_done(std::move(cb), errc::not_held);
    Record r{lock_.value, lock_.fencing_token, id_, std::move(value)};
    write_record(r, [cb = std::move(cb)](std::error_code e) { cb(e); });
  }

  void resign(Done cb) {
    if (!cb) cb = [](std::error_code) {};
    if (campaign_ != 0) {
      client_.cancel(std::exchange(campaign_, 0));  // its `elected` says canceled
      return post_done(std::move(cb), errc{});
    }
    if (!leading_) return post_done(std::move(cb), errc::not_held);
    leading_ = false;
    on_lost_ = nullptr;
    client_.unlock(lock_, std::move(cb));
  }

  void leader(LeaderCallback cb) {
    if (!cb) return;
    read([cb = std::move(cb)](Leader l, milliseconds) {
      std::error_code e = l.known ? std::error_code{} : make_error_code(errc::unavailable);
      cb(e, std::move(l));
    });
  }

  void keep_with(KeepOptions options, Client::RenewedCallback on_renewed) {
    keep_options_ = options;
    on_renewed_ = std::move(on_renewed);
  }

  Lock lock() const { return leading_ ? lock_ : Lock{}; }

  std::chrono::steady_clock::time_point valid_until() const {
    return leading_ ? lock_.valid_until : std::chrono::steady_clock::time_point{};
  }

  void observe(ChangeCallback on_change) {
    on_change_ = std::move(on_change);
    if (watching_) return refresh();
    watching_ = true;
    // Releases of the lock, and the records the leaders write.
    for (Watch* w : {&lock_watch_, &record_watch_}) {
      context_.waiters.watch(w->key, *w);
      context_.waiters.listen(w->key);
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

  void on_locked(std::error_code e, Lock l, std::string value, Elected elected) {
    campaign_ = 0;
    if (e) return elected(e, Leader{});
    lock_ = std::move(l);
    Record r{lock_.value, lock_.fencing_token, id_, std::move(value)};
    std::weak_ptr<Impl> weak = shared_from_this();
    write_record(r, [weak, r, elected = std::move(elected)](std::error_code written) {
      auto self = weak.lock();
      if (!self) return;
      if (written) {
        self->client_.unlock(self->lock_, nullptr);
        return elected(written, Leader{});
      }
      self->lead();
      elected({}, Leader{true, true, r.id, r.value, r.term});
    });
  }

  // Keeps the lock alive until resign(); each renewal keeps the record too.
  void lead() {
    leading_ = true;
    std::weak_ptr<Impl> weak = shared_from_this();
    client_.keep(
        lock_, keep_options_,
        [weak](std::error_code e) {
          auto self = weak.lock();
          if (!self || !self->leading_) return;
          self->leading_ = false;
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
            if (auto s = weak.lock(); s && s->leading_) s->renew_record();
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
    last_record_ = r;
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
    read([this](Leader l, milliseconds left) {
      reading_ = false;
      report(l);
      if (std::exchange(read_again_, false)) return refresh();
      // Not every change comes with a message (a leader's key expires): read
      // again when its key would run out, and now and then anyway.
      milliseconds next = ttl_;
      if (l.present && left.count() >= 0) next = std::min(next, left + milliseconds{5});
      arm(next);
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
      if (weak.lock()) pending.answer(e);
    });
  }

  // The Client is closing: what is in flight gets no reply; answer it now.
  void closed() {
    auto all = std::move(in_flight_);
    in_flight_.clear();
    for (auto& [id, pending] : all) {
      context_.post([weak = weak_from_this(), pending = std::move(pending)] {
        if (weak.lock()) pending.answer(errc::closed);
      });
    }
  }

  void arm(milliseconds after) {
    if (!timer_) timer_ = make_timer(context_.loop, this);
    uv_timer_start(
        timer_.get(), [](uv_timer_t* t) { owner_of<Impl>(t)->refresh(); },
        static_cast<std::uint64_t>(std::max<long long>(after.count(), 1)), 0);
  }

  void stop() {
    if (watching_) {
      context_.waiters.unwatch(lock_watch_.key, lock_watch_);
      context_.waiters.unwatch(record_watch_.key, record_watch_);
      watching_ = false;
    }
    timer_.close();
    if (campaign_ != 0) client_.cancel(std::exchange(campaign_, 0));
    if (leading_) {
      leading_ = false;
      client_.unlock(lock_, nullptr);
    }
  }

  void post_elected(Elected elected, errc e) {
    context_.post([elected = std::move(elected), e] { elected(make_error_code(e), Leader{}); });
  }
  void post_done(Done cb, errc e) {
    context_.post([cb = std::move(cb), e] { cb(make_error_code(e)); });
  }

  Client& client_;
  Context& context_;
  const std::string name_;
  const std::string id_;
  const milliseconds ttl_;
  const std::string key_;
  const std::string record_key_;
  Client::CallId campaign_ = 0;  // the lock() call of a campaign waiting
  bool leading_ = false;
  Lock lock_;           // while leading
  Record last_record_;  // what we wrote last, written again at each renewal
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

Election::~Election() = default;

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
