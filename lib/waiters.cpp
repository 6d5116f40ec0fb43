#include "waiters.hpp"

#include <algorithm>
#include <utility>

#include "keys.hpp"
#include "quorum.hpp"
#include "rendezvous.hpp"
#include "scripts.hpp"
#include "token.hpp"

namespace redlock {
namespace {

// How long after its last refused attempt a key counts as contended.
constexpr std::uint64_t contended_ms = 1000;
// Past this many remembered contended keys, those whose time passed are forgotten.
constexpr std::size_t contended_to_keep = 64;
constexpr char partial_mark = '~';  // never in a value (base64url)
constexpr char waiting_mark = '+';  // nor this
// Past this many remembered yields, those whose time passed are forgotten.
constexpr std::size_t yields_to_keep = 64;
// How long a key stays subscribed after its last waiter left: long enough
// that a Client locking a resource in a loop keeps its subscription between
// turns, short enough that others do not long count it as a waiter (their
// releases yield to listeners).
constexpr std::uint64_t linger_ms = 100;
// An unlock publishes only where a key is marked as listened to. Each master
// a Client listens on is marked for at least this long (marker_ms()), again
// every third of that while it listens, and as it hears each release there
// (an unlock that publishes deletes the marker).
constexpr std::uint64_t min_marker_ms = 3000;
// How often a queued line checks that its queue is still at the key's gate
// (see watch_gate()).
constexpr std::uint64_t gate_watch_ms = 25;
// Past this many lines that emptied lately, those whose queue has expired are forgotten.
constexpr std::size_t left_to_keep = 64;

}  // namespace

// Hears the subscribers' answers to SUBSCRIBE.
class Waiters::Confirmations final : public ReplyHandler {
 public:
  explicit Confirmations(Waiters& waiters) : waiters_(waiters) {}
  void on_reply(const Master& subscriber, const Reply& reply) override {
    if (reply.type != Reply::Type::array || reply.elements.size() != 3 ||
        reply.elements[0].str != "subscribe")
      return;
    if (reply.elements[1].str == waiters_.wake_channel_) {
      waiters_.on_wake_subscribed(subscriber);
    } else {
      waiters_.on_subscribed(reply.elements[1].str);
    }
  }
  void on_failure(const Master&, Failure) override {}

 private:
  Waiters& waiters_;
};

Waiters::Waiters(uv_loop_t* loop, const Options& options, std::shared_ptr<const TlsContext> tls,
                 const std::vector<std::unique_ptr<Master>>& masters)
    : loop_(loop),
      options_(options),
      tls_(std::move(tls)),
      masters_(masters),
      wake_channel_(keys::wake_channel(options.key_prefix, random_token())),
      confirmations_(std::make_shared<Confirmations>(*this)) {
  for (const Endpoint& e : options.masters) rendezvous_hashes_.push_back(rendezvous_master_hash(e));
}

Waiters::~Waiters() = default;

std::string Waiters::partial_release(std::string_view value) {
  std::string message(1, partial_mark);
  message += value;
  return message;
}

bool Waiters::is_partial(std::string_view message) {
  return !message.empty() && message.front() == partial_mark;
}

std::string Waiters::waiting_release(std::string_view value) {
  std::string message(1, waiting_mark);
  message += value;
  return message;
}

std::string_view Waiters::released_value(std::string_view message) {
  bool marked = !message.empty() && (message.front() == partial_mark || message.front() == waiting_mark);
  return marked ? message.substr(1) : message;
}

void Waiters::enlist(const std::string& key, Waiter& waiter) {
  lines_[key].queue.push_back(&waiter);
}

void Waiters::leave(const std::string& key, Waiter& waiter, bool woken_by_queue) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  auto& queue = it->second.queue;
  bool was_first = !queue.empty() && queue.front() == &waiter;
  queue.erase(std::remove(queue.begin(), queue.end(), &waiter), queue.end());
  if (!queue.empty()) {
    if (was_first) queue.front()->wake({});
    return;
  }
  // Out of the queue, or the wake meant for the next one is swallowed here.
  leave_queues(key, it->second);
  remember_left(key, it->second);
  const Master* woken_at = it->second.woken_at;
  lines_.erase(it);
  if (woken_by_queue && woken_at != nullptr) pass_wake_on(*woken_at, key);
  idle(key);
}

// A gate may pop the line's entry before its ZREM arrives, and publish the
// wake to a Client that no longer waits: on_wake passes it on, unless the
// Client closes first. For as long as the queue there may live, close()
// passes it on for these lines too.
void Waiters::remember_left(const std::string& key, const Line& line) {
  if (line.asked_at.empty() && line.woken_at == nullptr) return;
  std::uint64_t now = uv_now(loop_);
  if (left_.size() >= left_to_keep) {
    for (auto it = left_.begin(); it != left_.end();) {
      it = it->second.until <= now ? left_.erase(it) : std::next(it);
    }
  }
  Left& left = left_[key];
  auto add = [&left](const Master* gate) {
    if (std::find(left.gates.begin(), left.gates.end(), gate) == left.gates.end()) left.gates.push_back(gate);
  };
  for (const Master* gate : line.asked_at) add(gate);
  if (line.woken_at != nullptr) add(line.woken_at);
  left.until = now + static_cast<std::uint64_t>(queue_life().count());
}

void Waiters::watch(const std::string& key, Waiter& watcher) {
  watchers_[key].push_back(&watcher);
}

void Waiters::unwatch(const std::string& key, Waiter& watcher) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  auto& list = it->second;
  list.erase(std::remove(list.begin(), list.end(), &watcher), list.end());
  if (!list.empty()) return;
  watchers_.erase(it);
  if (lines_.count(key) == 0) idle(key);
}

// Nothing needs `key`'s release channel now: unsubscribe after the linger,
// unless a waiter listens again meanwhile.
void Waiters::idle(const std::string& key) {
  if (watchers_.count(key) != 0) return;
  auto sub = subscribed_.find(key);
  if (sub == subscribed_.end() || sub->second.idle_since != 0) return;
  sub->second.idle_since = std::max<std::uint64_t>(uv_now(loop_), 1);
  if (!linger_) {
    linger_ = make_timer(loop_, this);
    uv_unref(reinterpret_cast<uv_handle_t*>(linger_.get()));
  }
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(linger_.get())) == 0) {
    uv_timer_start(
        linger_.get(), [](uv_timer_t* t) { owner_of<Waiters>(t)->unsubscribe_idle(); }, linger_ms, 0);
  }
}

void Waiters::listen(const std::string& key, bool marked) {
  auto sub = subscribed_.find(key);
  if (sub != subscribed_.end()) {
    if (std::exchange(sub->second.idle_since, 0) != 0 && marked) mark_everywhere(key);
    return;
  }
  Subscription fresh;
  fresh.marked = marked;
  subscribed_.emplace(key, fresh);
  if (marked) mark_everywhere(key);
  subscribe(key);
}

// Listened to, so to be marked: a key of a lock (not an election's record,
// whose writes always publish) that a waiter or a watcher still needs.
bool Waiters::listening(const std::string& key) const {
  auto sub = subscribed_.find(key);
  return sub != subscribed_.end() && sub->second.marked &&
         (sub->second.idle_since == 0 || watchers_.count(key) != 0);
}

// Marks `key` as listened to on `master`, over its command connection: sent
// before any attempt that follows, so a holder that refuses that attempt
// finds the marker when it unlocks there.
void Waiters::mark(const std::string& key, std::size_t master) {
  masters_[master]->send(
      Command::script(scripts::mark_listening, {keys::listening(key), std::to_string(marker_ms())}), {});
}

// A marker outlives the listener's own fallback timer (retry_delay + jitter),
// as the queue does: a marker lost to a stalled loop or a paused master then
// costs no more than that timer would anyway.
std::uint64_t Waiters::marker_ms() const {
  return std::max(min_marker_ms, static_cast<std::uint64_t>(queue_life().count()));
}

// How long a gate's queue outlives our last attempt that refreshed it: a
// living waiter asks again within retry_delay + jitter (its fallback timer).
milliseconds Waiters::queue_life() const {
  return std::chrono::duration_cast<milliseconds>(options_.retry_delay + options_.retry_jitter +
                                                  std::chrono::seconds(1));
}

// Marks `key` on each master that carries its subscription.
void Waiters::mark_carriers(const std::string& key) {
  for (const auto& m : masters_) {
    if (carries(key, *m)) mark(key, m->index());
  }
}

void Waiters::mark_everywhere(const std::string& key) {
  mark_carriers(key);
  if (!remark_) {
    remark_ = make_timer(loop_, this);
    uv_unref(reinterpret_cast<uv_handle_t*>(remark_.get()));
  }
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(remark_.get())) == 0) {
    uv_timer_start(
        remark_.get(), [](uv_timer_t* t) { owner_of<Waiters>(t)->remark(); }, marker_ms() / 3,
        marker_ms() / 3);
  }
}

// Every third of a marker's life: the keys still listened to are marked again;
// with none left, the timer stops.
void Waiters::remark() {
  bool any = false;
  for (const auto& entry : subscribed_) {
    if (!listening(entry.first)) continue;
    any = true;
    mark_carriers(entry.first);
  }
  if (!any) uv_timer_stop(remark_.get());
}

std::string_view Waiters::wake_channel_at(const Master& gate) const {
  std::size_t i = gate.index();
  bool heard =
      i < subscribers_.size() && wake_confirmed_[i] && subscribers_[i]->state() == Master::State::ready;
  return heard ? std::string_view(wake_channel_) : std::string_view();
}

void Waiters::asked(const std::string& key, const Master& gate) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  auto& asked_at = it->second.asked_at;
  if (std::find(asked_at.begin(), asked_at.end(), &gate) == asked_at.end()) asked_at.push_back(&gate);
}

// Takes our wake channel out of `key`'s queue at every gate the line asked to
// keep it, whether or not it is known to be there: a refusal answered after
// the round was decided (or the call ended), a refusal at the gate of a round
// won on the other masters, a queue forgotten on a subscriber's drop all left
// it there. Written on the command connection after every attempt of the
// line, so each gate runs it after them. Patient for as long as the queue
// lives (retry_delay + jitter + 1 s past our last attempt): a gate that comes
// back within that still drops the entry.
void Waiters::leave_queues(const std::string& key, const Line& line) {
  if (line.asked_at.empty()) return;
  auto command = Command::plain({"ZREM", keys::queue(key), wake_channel_});
  for (const Master* gate : line.asked_at) masters_[gate->index()]->send(command, {}, queue_life());
}

void Waiters::queued(const std::string& key, const Master& gate) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  it->second.queued_at = &gate;
  idle(key);
  watch_gate();
}

// Unlocks wake the queue at the gate they see, the key's top-ranked voting
// master. A line's queue stops being there when that master stops voting
// (its command connection timed out, while the subscriber there, which sends
// nothing, stays up) or when a higher-ranked one votes again (a reconnect, a
// restart quarantine running out); then nothing wakes ours. Master::voting()
// changes without an event that says so, so while any line is queued the
// lines check every gate_watch_ms.
void Waiters::watch_gate() {
  if (!gate_watch_) {
    gate_watch_ = make_timer(loop_, this);
    uv_unref(reinterpret_cast<uv_handle_t*>(gate_watch_.get()));  // the waiters' own timers keep the loop
  }
  if (uv_is_active(reinterpret_cast<uv_handle_t*>(gate_watch_.get())) != 0) return;
  uv_timer_start(
      gate_watch_.get(), [](uv_timer_t* t) { owner_of<Waiters>(t)->check_gates(); }, gate_watch_ms,
      gate_watch_ms);
}

// The lines whose queue is not at their key's gate any more listen to
// releases again, and their first in line tries again now: its attempt asks
// the gate, which queues it there if the key is still held.
void Waiters::check_gates() {
  bool any = false;
  std::vector<std::string> moved;
  for (auto& entry : lines_) {
    const Line& line = entry.second;
    if (line.queued_at == nullptr) continue;
    if (gate(entry.first) != line.queued_at) {
      moved.push_back(entry.first);
    } else {
      any = true;
    }
  }
  if (!any) uv_timer_stop(gate_watch_.get());
  for (const std::string& key : moved) {
    auto it = lines_.find(key);
    if (it == lines_.end()) continue;
    it->second.queued_at = nullptr;
    listen(key);
    if (!it->second.queue.empty()) it->second.queue.front()->recheck();
  }
}

void Waiters::unqueued(const std::string& key) {
  auto it = lines_.find(key);
  if (it != lines_.end()) it->second.queued_at = nullptr;
}

void Waiters::refused(const std::string& key) {
  std::uint64_t now = uv_now(loop_);
  if (contended_.size() >= contended_to_keep) {
    for (auto it = contended_.begin(); it != contended_.end();) {
      it = it->second <= now ? contended_.erase(it) : std::next(it);
    }
  }
  contended_[key] = now + contended_ms;
}

bool Waiters::contended(const std::string& key) const {
  auto it = contended_.find(key);
  return it != contended_.end() && it->second > uv_now(loop_);
}

// Queued where the key's gate is now: a queue at a master that stopped being
// the gate (it stopped voting, or came back) wakes nobody, since unlocks wake
// the queue at the gate they see.
bool Waiters::is_queued(const std::string& key) const {
  auto it = lines_.find(key);
  return it != lines_.end() && it->second.queued_at != nullptr && it->second.queued_at == gate(key);
}

bool Waiters::first_in_line(const std::string& key, const Waiter& waiter) const {
  auto it = lines_.find(key);
  return it != lines_.end() && !it->second.queue.empty() && it->second.queue.front() == &waiter;
}

void Waiters::released_by_us(const std::string& key, std::string_view value, long long others,
                             std::chrono::microseconds round_trip) {
  if (others <= 0) return;
  // Others wait: this Client's next lock() of it asks the gate first, where
  // it queues behind them. One that was not refused lately yields too, lest
  // it win the gate before the woken one arrives.
  bool queues_already = contended(key);
  refused(key);
  if (queues_already) return;
  std::uint64_t now = uv_now(loop_);
  if (yields_.size() >= yields_to_keep) {
    for (auto it = yields_.begin(); it != yields_.end();) {
      it = it->second.until <= now ? yields_.erase(it) : std::next(it);
    }
  }
  // A waiter needs about a round trip to hear the release and another for its
  // attempt; timers tick in whole milliseconds. The lock is the waiter's
  // meanwhile, so the pause costs the releaser nothing it could have had.
  auto pause = std::chrono::ceil<std::chrono::milliseconds>(4 * round_trip).count();
  yields_[key] = Yield{now + static_cast<std::uint64_t>(std::max<long long>(pause, 2)), std::string(value)};
}

std::uint64_t Waiters::yield_until(const std::string& key) const {
  auto it = yields_.find(key);
  return it == yields_.end() ? 0 : it->second.until;
}

void Waiters::open_subscribers() {
  for (std::size_t i = 0; i < options_.masters.size(); ++i) {
    MasterConfig config = subscriber_config(options_, i, tls_);
    config.on_message = [this, i](std::string_view channel, std::string_view value) {
      on_message(*subscribers_[i], channel, value);
    };
    config.on_ready = [this](Master& subscriber) { resubscribe(subscriber); };
    config.on_dropped = [this](const Master& subscriber) { on_subscriber_dropped(subscriber.index()); };
    subscribers_.push_back(std::make_unique<Master>(loop_, std::move(config), random_seed()));
  }
  wake_confirmed_.assign(subscribers_.size(), false);
}

void Waiters::subscribe(const std::string& key) {
  if (subscribers_.empty()) {
    open_subscribers();  // they subscribe to every key once connected
    return;
  }
  auto command = Command::plain({"SUBSCRIBE", keys::release_channel(key)});
  for (auto& s : subscribers_) {
    if (s->state() == Master::State::ready && carries(key, *s)) s->send(command, confirmations_);
  }
}

// A held lock's keys are on a majority of the masters, and its unlock
// publishes on each master where it deleted one. Any two majorities share a
// master, so subscriptions on one majority hear every such release, and a
// release reaches a waiting Client a majority of times rather than N times.
// Every Client picks the same majority for a key (rendezvous hashing), so a
// master carries only the keys it ranks high for.
bool Waiters::carries(const std::string& key, const Master& subscriber) const {
  auto n = options_.masters.size();
  return rendezvous_among_first(key, options_.masters, subscriber.index(),
                                static_cast<std::size_t>(quorum::majority(static_cast<int>(n))));
}

// The linger ran out: unsubscribe every key that has had no waiter since.
void Waiters::unsubscribe_idle() {
  std::uint64_t now = uv_now(loop_);
  std::uint64_t next = 0;  // the earliest linger still running
  for (auto it = subscribed_.begin(); it != subscribed_.end();) {
    std::uint64_t idle_since = it->second.idle_since;
    if (idle_since == 0) {
      ++it;
    } else if (now - idle_since >= linger_ms) {
      auto command = Command::plain({"UNSUBSCRIBE", keys::release_channel(it->first)});
      for (auto& s : subscribers_) {
        if (s->state() == Master::State::ready && carries(it->first, *s)) s->send(command, {});
      }
      it = subscribed_.erase(it);
    } else {
      next = next == 0 ? idle_since : std::min(next, idle_since);
      ++it;
    }
  }
  if (next != 0) {
    uv_timer_start(
        linger_.get(), [](uv_timer_t* t) { owner_of<Waiters>(t)->unsubscribe_idle(); },
        next + linger_ms - now, 0);
  }
}

// After every (re)connect: the wake channel and every key subscribed. The
// queue at this master may have woken us while we were away, or be gone with
// a restart: the waiters queued there listen to releases again, and try
// again once subscribed (on_subscribed), or once the wake channel is, if
// this master is still their gate (on_wake_subscribed).
void Waiters::resubscribe(Master& subscriber) {
  wake_confirmed_[subscriber.index()] = false;
  subscriber.send(Command::plain({"SUBSCRIBE", wake_channel_}), confirmations_);
  unqueue_at(subscriber.index());
  for (const auto& entry : subscribed_) {
    if (!carries(entry.first, subscriber)) continue;
    // A master that restarted lost its markers.
    if (listening(entry.first)) mark(entry.first, subscriber.index());
    subscriber.send(Command::plain({"SUBSCRIBE", keys::release_channel(entry.first)}), confirmations_);
  }
}

// The lines queued at `master` are not queued any more: they listen to
// releases again. Their keys.
std::vector<std::string> Waiters::unqueue_at(std::size_t master) {
  std::vector<std::string> keys;
  for (auto& entry : lines_) {
    Line& line = entry.second;
    if (line.queued_at == nullptr || line.queued_at->index() != master) continue;
    line.queued_at = nullptr;
    keys.push_back(entry.first);
  }
  for (const std::string& key : keys) listen(key);
  return keys;
}

// A subscriber connection dropped: the waiters queued at that master (their
// gate, which may be dead) listen to releases on the others and try again
// now, rather than sleep to their timers or wait for a reconnect.
void Waiters::on_subscriber_dropped(std::size_t index) {
  for (const std::string& key : unqueue_at(index)) {
    auto it = lines_.find(key);
    if (it != lines_.end() && !it->second.queue.empty()) it->second.queue.front()->recheck();
  }
}

// Waiters that are not queued can be now: those whose gate this is try again
// (a queue at this master may also have woken us while we were away).
void Waiters::on_wake_subscribed(const Master& subscriber) {
  wake_confirmed_[subscriber.index()] = true;
  for (auto& entry : lines_) {
    Line& line = entry.second;
    if (line.queue.empty() || is_queued(entry.first)) continue;
    const Master* g = gate(entry.first);
    if (g != nullptr && g->index() == subscriber.index()) line.queue.front()->recheck();
  }
}

// The master with the highest rank for `key` among those voting: the same
// for every Client that names the masters alike.
Master* Waiters::gate(const std::string& key) const {
  return gates(key).voting;
}

Waiters::Gates Waiters::gates(const std::string& key) const {
  Gates found;
  std::uint64_t voting_rank = 0;
  std::uint64_t usual_rank = 0;
  std::uint64_t key_hash = rendezvous_key_hash(key);
  for (const auto& m : masters_) {
    std::uint64_t rank = rendezvous_rank(key_hash, rendezvous_hashes_[m->index()]);
    if (found.usual == nullptr || rank > usual_rank) {
      found.usual = m.get();
      usual_rank = rank;
    }
    if (m->voting() && (found.voting == nullptr || rank > voting_rank)) {
      found.voting = m.get();
      voting_rank = rank;
    }
  }
  return found;
}

void Waiters::on_subscribed(std::string_view channel) {
  std::string key = keys::lock_of_channel(channel);
  auto sub = subscribed_.find(key);
  if (sub == subscribed_.end() || std::exchange(sub->second.confirmed, true)) return;
  tell_watchers(key, {});
  // Queued meanwhile: the queue wakes it for any release from now on.
  auto it = lines_.find(key);
  if (it != lines_.end() && !it->second.queue.empty() && !is_queued(key)) it->second.queue.front()->recheck();
}

// Each watcher of `key` hears `message` (empty: check again, the
// subscription is confirmed). A watcher may unwatch while told: each is
// told only while it still watches.
void Waiters::tell_watchers(const std::string& key, std::string_view message) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  std::vector<Waiter*> told = it->second;
  for (Waiter* watcher : told) {
    auto now = watchers_.find(key);
    if (now == watchers_.end()) return;
    if (std::find(now->second.begin(), now->second.end(), watcher) == now->second.end()) continue;
    if (message.empty()) {
      watcher->recheck();
    } else {
      watcher->wake(message);
    }
  }
}

void Waiters::on_message(const Master& subscriber, std::string_view channel, std::string_view message) {
  if (channel == wake_channel_) {
    on_wake(subscriber, std::string(message));
    return;
  }
  std::string key = keys::lock_of_channel(channel);
  if (key.empty()) return;
  // The unlock that published took the marker there: still listening, mark again.
  if (listening(key)) mark(key, subscriber.index());
  // Another owner unlocked it after us: the others had their turn.
  auto yield = yields_.find(key);
  if (yield != yields_.end() && !is_partial(message) && yield->second.value != released_value(message))
    yields_.erase(yield);
  tell_watchers(key, message);
  // Queued: the queue wakes us in turn; waking for every release is the herd.
  if (is_queued(key)) return;
  wake_first(key, message);
}

// The queue at `subscriber`'s master popped us for `key`. A Client with no
// waiter on it any more passes the wake on to the next in that queue.
void Waiters::on_wake(const Master& subscriber, const std::string& key) {
  auto it = lines_.find(key);
  if (it == lines_.end() || it->second.queue.empty()) {
    pass_wake_on(subscriber, key);
    return;
  }
  it->second.queued_at = nullptr;
  it->second.woken_at = &subscriber;
  it->second.queue.front()->wake(queue_wake);
}

// Frees the gate's reservation for us (only if it is still ours, and only
// while the key is free) and wakes the next Client in its queue. Sent after
// any release of ours on the same connection, so the gate runs it after.
void Waiters::pass_wake_on(const Master& gate, const std::string& key) {
  auto reservation = std::to_string(options_.command_timeout.count());
  masters_[gate.index()]->send(
      Command::script(scripts::wake_next,
                      {key, keys::queue(key), keys::reservation(key), reservation, wake_channel_}),
      {});
}

void Waiters::wake_first(const std::string& key, std::string_view message) {
  auto it = lines_.find(key);
  if (it == lines_.end() || it->second.queue.empty()) return;
  it->second.queue.front()->wake(message);
}

void Waiters::close() {
  // The operations were cancelled without leaving their lines: the Client's
  // entries leave the queues now, written before the connections close. A
  // gate may already have popped us (its wake unread on a subscriber that
  // closes now, the key reserved for us): the wake goes on to the next
  // Client, after the ZREM, as leave() passes on a wake no attempt used.
  // Lines that emptied lately may get such a wake too (remember_left()).
  for (const auto& entry : lines_) {
    leave_queues(entry.first, entry.second);
    remember_left(entry.first, entry.second);
  }
  lines_.clear();
  std::uint64_t now = uv_now(loop_);
  for (const auto& entry : left_) {
    if (entry.second.until <= now) continue;
    for (const Master* gate : entry.second.gates) pass_wake_on(*gate, entry.first);
  }
  left_.clear();
  watchers_.clear();
  wake_confirmed_.clear();
  subscribed_.clear();
  linger_.close();
  remark_.close();
  gate_watch_.close();
  subscribers_.clear();
}

}  // namespace redlock
