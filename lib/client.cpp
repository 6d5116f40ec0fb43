#include <redlock/client.hpp>

#include <uv.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "all_call.hpp"
#include "client_access.hpp"
#include "deferred.hpp"
#include "holder_read.hpp"
#include "keeper.hpp"
#include "keys.hpp"
#include "lock_value.hpp"
#include "loss_watch.hpp"
#include "operation.hpp"
#include "permit_call.hpp"
#include "quorum.hpp"
#include "renewal.hpp"
#include "scripts.hpp"
#include "token.hpp"

namespace redlock {
namespace {

// Redis accepts larger keys, but a lock name this long is a caller's bug.
constexpr std::size_t max_key_bytes = std::size_t{64} * 1024;
constexpr milliseconds max_ttl{std::numeric_limits<std::int32_t>::max()};
// Longer waits are waits without end (about 285 million years: no overflow).
constexpr milliseconds max_wait{std::int64_t{1} << 53};
// A semaphore is that many locks: beyond this it is a caller's bug.
constexpr int max_permits = 10000;
// lock_all: every resource is a key in each script call, four times over in
// the acquire: a command of a few hundred KB at most, well within a
// command_timeout.
constexpr std::size_t max_resources = 1000;
constexpr std::size_t max_resource_bytes = std::size_t{64} * 1024;

}  // namespace

class Client::Impl final : public Context, public PermitHost, public AllHost {
 public:
  Impl(uv_loop_t* loop, Options options) : Context(loop, std::move(options)) {
    for (std::size_t i = 0; i < this->options.masters.size(); ++i) {
      MasterConfig config;
      config.endpoint = this->options.masters[i];
      config.index = i;
      config.connect_timeout = this->options.connect_timeout;
      config.command_timeout = this->options.command_timeout;
      config.restart_quarantine = this->options.restart_quarantine;
      config.diagnostics = this->options.diagnostics;
      config.publish_probe = keys::probe_channel(this->options.key_prefix);
      // Counted as holding nothing until a renewal says otherwise: a kept
      // lock that lost its majority there hears it now.
      config.on_restarted = [this](Master&) { keeper.renew_now(); };
      if (config.endpoint.tls) config.tls = tls;
      masters.push_back(std::make_unique<Master>(loop, std::move(config), random_seed()));
    }
  }

  ~Impl() override { close(nullptr); }

  std::string new_value() const { return lock_value(options.owner, std::chrono::system_clock::now()); }

  void post(std::function<void()> fn) override {
    if (!deferred_ && closed_ && !closing_) {
      // A closed client keeps no handle open: this one closes itself once
      // `fn` has run, so uv_run returns and uv_loop_close succeeds.
      Deferred::open(loop)->post(std::move(fn));
      return;
    }
    if (!deferred_) deferred_ = Deferred::open(loop);
    deferred_->post(std::move(fn));
  }

  std::shared_ptr<Operation> retire(Operation& op) override {
    std::size_t slot = op.registry_slot;
    if (slot >= operations_.size() || operations_[slot].get() != &op) return nullptr;
    auto owned = std::move(operations_[slot]);
    // Swap-remove: the vector keeps its capacity, so no allocation per call.
    if (slot + 1 != operations_.size()) {
      operations_[slot] = std::move(operations_.back());
      operations_[slot]->registry_slot = slot;
    }
    operations_.pop_back();
    return owned;
  }

  /// `wait`: a lock() that waits that long (errc::timeout at the end); with
  /// `budget` instead, the retry-count form, which gives up after that long.
  /// Returns the call's id (Client::CallId).
  std::uint64_t run(Operation::Kind kind, Lock lock, milliseconds ttl, int attempts, Operation::Callback cb,
                    std::optional<milliseconds> wait = std::nullopt,
                    std::optional<milliseconds> budget = std::nullopt, bool counted = true,
                    bool marks_writer = false, std::function<void(long long)> told_free_in = nullptr) {
    const std::uint64_t id = ++last_id_;
    if (!cb) cb = [](std::error_code, const Lock&) {};
    errc refused{};
    std::string wrong;
    if (closed_) {
      refused = errc::closed;
    } else {
      wrong = invalid_argument(kind, lock, ttl);
      if (wrong.empty() && wait && wait->count() < 0)
        wrong = "wait " + std::to_string(wait->count()) + " ms is negative";
      if (!wrong.empty()) refused = errc::invalid_argument;
    }
    if (refused != errc{}) {
      refuse(kind, refused, std::move(wrong), std::move(cb), counted);
      return id;
    }
    auto op = std::make_shared<Operation>(*this, kind, std::move(lock), ttl, attempts, std::move(cb));
    op->counted = counted;
    op->marks_writer = marks_writer;
    op->told_free_in = std::move(told_free_in);
    Operation& started = *op;
    std::uint64_t now = uv_now(loop);
    if (wait) started.wait_until(now + static_cast<std::uint64_t>(std::min(*wait, max_wait).count()), true);
    if (budget) started.wait_until(now + static_cast<std::uint64_t>(budget->count()), false);
    op->registry_slot = operations_.size();
    op->id = id;
    operations_.push_back(std::move(op));
    started.start();
    return id;
  }

  void cancel(std::uint64_t id) {
    for (const auto& op : operations_) {
      if (op->id != id) continue;
      // finish() retires it from operations_: hold it until abandon() returns.
      auto keep_alive = op;
      keep_alive->abandon();
      return;
    }
    auto call = permit_calls_.find(id);
    if (call != permit_calls_.end()) call->second.call->cancel();
    auto all = all_calls_.find(id);
    if (all != all_calls_.end()) {
      auto keep_alive = all->second.call;
      keep_alive->cancel();
    }
  }

  std::uint64_t lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait,
                         Operation::Callback cb) {
    const std::uint64_t id = ++last_id_;
    if (!cb) cb = [](std::error_code, const Lock&) {};
    std::string wrong = invalid_resources(resources);
    Lock lock{resources.empty() ? std::string() : resources.front(), new_value()};
    if (wrong.empty()) wrong = invalid_argument(Operation::Kind::acquire, lock, ttl);
    if (wrong.empty() && wait.count() < 0) wrong = "wait " + std::to_string(wait.count()) + " ms is negative";
    if (closed_ || !wrong.empty()) {
      refuse(Operation::Kind::acquire, closed_ ? errc::closed : errc::invalid_argument, std::move(wrong),
             std::move(cb));
      return id;
    }
    std::vector<std::string> keys;
    keys.reserve(resources.size());
    for (const std::string& resource : resources) keys.push_back(keys::lock(options.key_prefix, resource));
    lock.resources = std::move(resources);
    auto call = std::make_shared<AllCall>(*this, id, std::move(lock), std::move(keys), ttl,
                                          std::min(wait, max_wait), std::move(cb));
    all_calls_[id] = {call, std::chrono::steady_clock::now()};
    call->start();
    return id;
  }

  void holder(std::string resource, HolderCallback cb) {
    if (!cb) cb = [](std::error_code, const ResourceReport&) {};
    std::string wrong = invalid_argument(Operation::Kind::unlock, Lock{resource, "-"}, milliseconds{1});
    if (closed_ || !wrong.empty()) {
      post([cb = std::move(cb), error = closed_ ? errc::closed : errc::invalid_argument] {
        cb(make_error_code(error), ResourceReport{});
      });
      return;
    }
    const std::uint64_t id = ++last_id_;
    // The answer goes on through post(), which also keeps the read alive
    // until its own callback has returned.
    reads_[id] = HolderRead::start(masters, options.key_prefix, std::move(resource),
                                   [this, id, cb = std::move(cb)](std::error_code e, ResourceReport r) {
                                     auto read = reads_.find(id);
                                     std::shared_ptr<HolderRead> self;
                                     if (read != reads_.end()) {
                                       self = std::move(read->second);
                                       reads_.erase(read);
                                     }
                                     post([self, cb, e, r = std::move(r)] { cb(e, r); });
                                   });
  }

  // AllHost
  std::uint64_t attempt_all(Lock lock, milliseconds ttl, bool marks_writer, AllHost::Answer answer,
                            std::function<void(long long)> free_in_ms) override {
    return run(Operation::Kind::acquire, std::move(lock), ttl, 1, std::move(answer), std::nullopt,
               std::nullopt, false, marks_writer, std::move(free_in_ms));
  }
  void cancel_attempt(std::uint64_t id) override { cancel(id); }
  void writer_gone(const std::string& key, const std::string& value) override {
    Operation::writer_gone(*this, key, value);
  }
  Waiters& waiters_of_client() override { return waiters; }
  uv_loop_t* event_loop() const override { return loop; }
  void post_answer(std::function<void()> fn) override { post(std::move(fn)); }
  void all_call_done(std::uint64_t id, std::error_code error) override {
    auto call = all_calls_.find(id);
    if (call == all_calls_.end()) return;
    Operation::count(*this, Operation::Kind::acquire, error,
                     std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                           call->second.called));
    all_calls_.erase(call);
  }

  std::uint64_t lock_permit(Lock lock, int permits, milliseconds ttl, milliseconds wait,
                            Operation::Callback cb) {
    const std::uint64_t id = ++last_id_;
    if (!cb) cb = [](std::error_code, const Lock&) {};
    std::string wrong = invalid_argument(Operation::Kind::acquire, lock, ttl);
    if (wrong.empty() && (permits < 1 || permits > max_permits))
      wrong = "permits " + std::to_string(permits) + " is not in 1.." + std::to_string(max_permits);
    if (wrong.empty() && wait.count() < 0) wrong = "wait " + std::to_string(wait.count()) + " ms is negative";
    if (closed_ || !wrong.empty()) {
      refuse(Operation::Kind::acquire, closed_ ? errc::closed : errc::invalid_argument, std::move(wrong),
             std::move(cb));
      return id;
    }
    auto call = std::make_shared<PermitCall>(*this, id, std::move(lock), permits, ttl,
                                             std::min(wait, max_wait), std::move(cb));
    permit_calls_[id] = {call, std::chrono::steady_clock::now()};
    call->start();
    return id;
  }

  // PermitHost
  std::uint64_t acquire_permit(Lock lock, milliseconds ttl, milliseconds wait,
                               PermitHost::Answer answer) override {
    if (wait.count() == 0)
      return run(Operation::Kind::acquire, std::move(lock), ttl, 1, std::move(answer), std::nullopt,
                 std::nullopt, false);
    return run(Operation::Kind::acquire, std::move(lock), ttl, std::numeric_limits<int>::max(),
               std::move(answer), wait, std::nullopt, false);
  }
  void cancel_permit(std::uint64_t id) override { cancel(id); }
  std::uint64_t now_ms() const override { return uv_now(loop); }
  milliseconds pause() override {
    std::uniform_int_distribution<long long> jitter(0, options.retry_jitter.count());
    // At least a command's time: with retry_delay 0 a full semaphore is
    // waited on, not scanned without end.
    return std::max(options.retry_delay + milliseconds{jitter(rng)}, options.command_timeout);
  }
  int random_below(int n) override { return std::uniform_int_distribution<int>(0, n - 1)(rng); }
  void permit_call_done(std::uint64_t id, std::error_code error) override {
    auto call = permit_calls_.find(id);
    if (call == permit_calls_.end()) return;
    Operation::count(*this, Operation::Kind::acquire, error,
                     std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                           call->second.called));
    permit_calls_.erase(call);
  }
  std::weak_ptr<const bool> host_alive() const override { return alive(); }

  bool closed() const { return closed_; }
  // The Lock's own checks (as unlock makes them; its ttl is keep's to judge).
  bool keepable(const Lock& lock) const {
    return invalid_argument(Operation::Kind::unlock, lock, milliseconds{1}).empty();
  }

  void close(std::function<void()> cb) {
    // Answers posted while closing share one Deferred, so they run in order.
    closing_ = true;
    if (!closed_) {
      closed_ = true;
      auto operations = std::move(operations_);
      operations_.clear();
      for (auto& op : operations) op->cancel();
      Context::closing();
      auto reads = std::move(reads_);
      reads_.clear();
      for (auto& [id, read] : reads) read->abandon(make_error_code(errc::closed));
      auto all_calls = std::move(all_calls_);
      all_calls_.clear();
      for (auto& [id, pending] : all_calls) pending.call->close();
      keeper.close();
      loss_watch.close();
      waiters.close();
      // The masters' counters outlive their connections: counters only grow.
      for (const auto& m : masters) {
        closed_masters_.push_back(m->stats());
        closed_masters_.back().state = MasterState::down;
        closed_masters_.back().cause = "the client is closed";
      }
      masters.clear();
    }
    if (cb) post(std::move(cb));
    deferred_.reset();  // closes its handles once what is queued has run
    closing_ = false;
  }

  void extension_issued(const Lock& lock) override { keeper.extending(lock.value); }

  std::error_code extension_decided(const Lock& lock, std::error_code error) override {
    return keeper.extension_decided(lock, error);
  }

  void lost(const Lock& lock) override {
    if (on_lost_) on_lost_(lock);
  }

  /// See ClientAccess::on_lost.
  void on_lost(std::function<void(const Lock&)> listener) { on_lost_ = std::move(listener); }

  /// A kept lock's validity is the hold's: renewals moved it on since the
  /// Lock the caller has was answered.
  Lock with_current_validity(const Lock& lock) const {
    Lock current = lock;
    if (auto kept = keeper.valid_until(lock.value)) current.valid_until = *kept;
    return current;
  }

  Stats stats() const {
    Stats s;
    if (closed_) {
      s.masters = closed_masters_;
    } else {
      s.masters.reserve(masters.size());
      for (const auto& m : masters) s.masters.push_back(m->stats());
    }
    s.acquire = calls.acquire;
    s.extend = calls.extend;
    s.continue_lock = calls.continue_lock;
    s.unlock = calls.unlock;
    s.acquire_latency = calls.acquire_latency;
    s.unlock_latency = calls.unlock_latency;
    s.lost = keeper.lost();
    s.renewals = keeper.renewals();
    s.kept = keeper.kept();
    return s;
  }

  std::vector<MasterError> master_errors() const {
    std::vector<MasterError> errors;
    for (const auto& m : masters) {
      std::string cause = m->trouble();
      if (!cause.empty()) errors.push_back({m->endpoint().to_string(), std::move(cause)});
    }
    return errors;
  }

 private:
  static const char* call_name(Operation::Kind kind) {
    switch (kind) {
      case Operation::Kind::acquire:
        return "lock";
      case Operation::Kind::extend:
        return "extend";
      case Operation::Kind::continue_lock:
        return "continue_lock";
      case Operation::Kind::unlock:
        return "unlock";
    }
    return "a call";
  }

  // What is wrong with a call's arguments, or empty when nothing is.
  // What is wrong with lock_all's resources, or empty.
  std::string invalid_resources(const std::vector<std::string>& resources) const {
    if (resources.empty() || resources.size() > max_resources)
      return std::to_string(resources.size()) + " resources, not 1.." + std::to_string(max_resources);
    std::vector<std::string> sorted = resources;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return "resource '" + *std::adjacent_find(sorted.begin(), sorted.end()) + "' is named twice";
    std::size_t bytes = 0;
    for (const std::string& resource : resources) {
      if (resource.empty()) return "a resource is empty";
      bytes += options.key_prefix.size() + resource.size();
    }
    if (bytes > max_resource_bytes)
      return "key_prefix + the resources are " + std::to_string(bytes) + " bytes in all, more than " +
             std::to_string(max_resource_bytes);
    return {};
  }

  std::string invalid_argument(Operation::Kind kind, const Lock& lock, milliseconds ttl) const {
    if (lock.resource.empty()) return "the resource is empty";
    if (!lock.resources.empty() &&
        (lock.shared || lock.permit >= 0 || lock.resources.front() != lock.resource ||
         !invalid_resources(lock.resources).empty()))
      return "the Lock's resources are not those of a lock_all call";
    if (options.key_prefix.size() + lock.resource.size() > max_key_bytes)
      return "key_prefix + resource is " + std::to_string(options.key_prefix.size() + lock.resource.size()) +
             " bytes, more than " + std::to_string(max_key_bytes);
    if (kind != Operation::Kind::acquire && lock.value.empty())
      return "the Lock has no value (not from a lock call)";
    // What the key holds for shared holders is nobody's value: with it an
    // unlock would end every shared hold.
    if (lock.value == scripts::shared_mark)
      return "the Lock's value is the shared mark (not from a lock call)";
    if (lock.shared && lock.permit >= 0) return "the Lock is both shared and a permit (not from a lock call)";
    if (kind == Operation::Kind::unlock) return {};
    return invalid_ttl(ttl);
  }

  // Answers a call refused at once, on a later turn; which argument was
  // wrong goes to the diagnostics, on the same turn.
  void refuse(Operation::Kind kind, errc refused, std::string wrong, Operation::Callback cb,
              bool counted = true) {
    std::function<void(std::string_view)> say;
    if (!wrong.empty() && options.diagnostics) say = options.diagnostics;
    post([this, alive = alive(), called = std::chrono::steady_clock::now(), cb = std::move(cb), refused,
          say = std::move(say), wrong = std::move(wrong), kind, counted] {
      if (counted && !alive.expired())
        Operation::count(
            *this, kind, make_error_code(refused),
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - called));
      if (say) say(std::string("invalid argument to ") + call_name(kind) + ": " + wrong);
      cb(make_error_code(refused), Lock{});
    });
  }

  std::string invalid_ttl(milliseconds ttl) const {
    auto said = [ttl] { return "ttl " + std::to_string(ttl.count()) + " ms "; };
    if (ttl.count() <= 0 || ttl > max_ttl)
      return said() + "is not in 1.." + std::to_string(max_ttl.count()) + " ms";
    // Redlock's restart rule: a master that forgot our key must stay out longer than the key lives.
    if (options.restart_quarantine.count() > 0 && ttl > options.restart_quarantine)
      return said() + "is longer than restart_quarantine (" +
             std::to_string(options.restart_quarantine.count()) + " ms)";
    // A ttl the drift allowance eats whole could never give a valid lock.
    if (quorum::drift(ttl, options.drift_factor, options.drift_constant) >= ttl)
      return said() + "is eaten whole by the drift allowance (ttl * drift_factor + drift_constant)";
    return {};
  }

  // operations_ is destroyed before the masters (a base-class member):
  // operations hold rounds whose commands sit in the masters' queues.
  std::vector<std::shared_ptr<Operation>> operations_;

 public:
  // A key of a kept lock was deleted, expired or evicted on a master: renew
  // the holds on it now.
  LossWatch loss_watch{loop, options, tls, [this](const std::string& value) { keeper.renew_now(value); }};
  Keeper keeper{
      loop, Keeper::Hooks{
                [this](std::vector<Renewal::Item> items, Renewal::Decided decided) {
                  return std::shared_ptr<void>(Renewal::start(*this, std::move(items), std::move(decided)));
                },
                [this](const Lock& l) { lost(l); },
                [this](const Lock& l) {
                  // Not an unlock() call: Stats::unlock does not count it.
                  run(Operation::Kind::unlock, l, milliseconds{1}, 1, nullptr, std::nullopt, std::nullopt,
                      false);
                },
                [this](std::function<void()> fn) { post(std::move(fn)); },
                [this] { return clock.now(); },
                [this](const Lock& l) {
                  if (options.keyspace_notifications) loss_watch.watch(l);
                },
                [this](const Lock& l) {
                  if (options.keyspace_notifications) loss_watch.unwatch(l);
                },
            }};

 private:
  Deferred::Ptr deferred_;
  std::function<void(const Lock&)> on_lost_;
  std::vector<MasterStats> closed_masters_;  // the masters' last counters, after close()
  bool closed_ = false;
  bool closing_ = false;       // inside close()
  std::uint64_t last_id_ = 0;  // Client::CallId: the last one given
  struct PendingPermit {
    std::shared_ptr<PermitCall> call;
    std::chrono::steady_clock::time_point called;
  };
  std::map<std::uint64_t, PendingPermit> permit_calls_;  // lock_permit calls not answered yet
  struct PendingAll {
    std::shared_ptr<AllCall> call;
    std::chrono::steady_clock::time_point called;
  };
  std::map<std::uint64_t, PendingAll> all_calls_;               // lock_all calls not answered yet
  std::map<std::uint64_t, std::shared_ptr<HolderRead>> reads_;  // holder() calls not answered yet
};

Client::Client(uv_loop_t* loop, Options options) {
  if (!loop) throw std::invalid_argument("redlock::Client: loop is null");
  options.validate();
  if (options.owner.empty()) options.owner = default_owner();
  impl_ = std::make_unique<Impl>(loop, std::move(options));
}

Client::~Client() = default;

Client::CallId Client::lock(std::string resource, milliseconds ttl, LockCallback cb) {
  Lock lock{std::move(resource), impl_->new_value()};
  const Options& o = impl_->options;
  // No longer than polling could take: every attempt's reply, every pause at
  // its longest. Options are bounded, so this cannot overflow.
  auto budget = (o.retry_count + 1) * o.command_timeout + o.retry_count * (o.retry_delay + o.retry_jitter);
  std::optional<milliseconds> waits;
  if (o.retry_count > 0) waits = budget;
  return impl_->run(Operation::Kind::acquire, std::move(lock), ttl, o.retry_count + 1, std::move(cb),
                    std::nullopt, waits);
}

Client::CallId Client::lock(std::string resource, milliseconds ttl, milliseconds wait, LockCallback cb) {
  Lock lock{std::move(resource), impl_->new_value()};
  return impl_->run(Operation::Kind::acquire, std::move(lock), ttl, std::numeric_limits<int>::max(),
                    std::move(cb), wait);
}

Client::CallId Client::lock_permit(std::string resource, int permits, milliseconds ttl, milliseconds wait,
                                   LockCallback cb) {
  Lock lock{std::move(resource), impl_->new_value()};
  return impl_->lock_permit(std::move(lock), permits, ttl, wait, std::move(cb));
}

Client::CallId Client::lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait,
                                LockCallback cb) {
  return impl_->lock_all(std::move(resources), ttl, wait, std::move(cb));
}

void Client::try_lock(std::string resource, milliseconds ttl, LockCallback cb) {
  Lock lock{std::move(resource), impl_->new_value()};
  impl_->run(Operation::Kind::acquire, std::move(lock), ttl, 1, std::move(cb));
}

Client::CallId Client::lock_shared(std::string resource, milliseconds ttl, milliseconds wait,
                                   LockCallback cb) {
  Lock lock{std::move(resource), impl_->new_value()};
  lock.shared = true;
  return impl_->run(Operation::Kind::acquire, std::move(lock), ttl, std::numeric_limits<int>::max(),
                    std::move(cb), wait);
}

void Client::try_lock_shared(std::string resource, milliseconds ttl, LockCallback cb) {
  Lock lock{std::move(resource), impl_->new_value()};
  lock.shared = true;
  impl_->run(Operation::Kind::acquire, std::move(lock), ttl, 1, std::move(cb));
}

void Client::extend(const Lock& lock, milliseconds ttl, LockCallback cb) {
  impl_->run(Operation::Kind::extend, impl_->with_current_validity(lock), ttl, 1, std::move(cb));
}

void Client::continue_lock(const Lock& lock, milliseconds ttl, LockCallback cb) {
  impl_->run(Operation::Kind::continue_lock, impl_->with_current_validity(lock), ttl, 1, std::move(cb));
}

void Client::keep(const Lock& lock, KeepOptions options, LostCallback on_lost, RenewedCallback on_renewed) {
  errc refused = impl_->closed() ? errc::closed : errc{};
  // A Lock no lock call gave (the checks extend makes) is never kept.
  if (refused == errc{} && !impl_->keepable(lock)) refused = errc::invalid_argument;
  if (refused != errc{}) {
    impl_->post([on_lost = std::move(on_lost), refused] {
      if (on_lost) on_lost(make_error_code(refused));
    });
    return;
  }
  impl_->keeper.keep(lock, options, std::move(on_lost), std::move(on_renewed));
}

void Client::unlock(const Lock& lock, UnlockCallback cb) {
  impl_->keeper.forget(lock.value);
  if (!cb) cb = [](std::error_code) {};
  impl_->run(Operation::Kind::unlock, lock, milliseconds{1}, 1,
             [cb = std::move(cb)](std::error_code error, const Lock&) { cb(error); });
}

void Client::holder(std::string resource, HolderCallback cb) {
  impl_->holder(std::move(resource), std::move(cb));
}

void Client::close(std::function<void()> cb) {
  impl_->close(std::move(cb));
}

void Client::cancel(CallId id) {
  impl_->cancel(id);
}

std::vector<MasterError> Client::master_errors() const {
  return impl_->master_errors();
}

Stats Client::stats() const {
  return impl_->stats();
}

Context& ClientAccess::context(Client& client) {
  return *client.impl_;
}

void ClientAccess::on_lost(Client& client, std::function<void(const Lock&)> listener) {
  client.impl_->on_lost(std::move(listener));
}

}  // namespace redlock
