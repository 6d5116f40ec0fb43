#include "waiters.hpp"

#include <algorithm>
#include <utility>

#include "token.hpp"

namespace redlock {
namespace {

constexpr std::string_view channel_suffix = ":released";
// Past this many remembered yields, those whose time passed are forgotten.
constexpr std::size_t yields_to_keep = 64;

}  // namespace

Waiters::Waiters(uv_loop_t* loop, const Options& options) : loop_(loop), options_(options) {
}

Waiters::~Waiters() = default;

std::string Waiters::channel(std::string_view key) {
  std::string c(key);
  c += channel_suffix;
  return c;
}

void Waiters::enlist(const std::string& key, Waiter& waiter) {
  Line& line = lines_[key];
  line.queue.push_back(&waiter);
  if (line.queue.size() == 1) subscribe(key);
}

void Waiters::leave(const std::string& key, Waiter& waiter) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  auto& queue = it->second.queue;
  bool was_first = !queue.empty() && queue.front() == &waiter;
  queue.erase(std::remove(queue.begin(), queue.end(), &waiter), queue.end());
  if (queue.empty()) {
    lines_.erase(it);
    unsubscribe(key);
    return;
  }
  if (was_first) queue.front()->wake({});
}

bool Waiters::first_in_line(const std::string& key, const Waiter& waiter) const {
  auto it = lines_.find(key);
  return it != lines_.end() && !it->second.queue.empty() && it->second.queue.front() == &waiter;
}

void Waiters::released_by_us(const std::string& key, std::string_view value, long long listeners,
                             std::chrono::microseconds round_trip) {
  // Our own subscriber is one of the listeners while we have waiters there.
  long long others = listeners - (lines_.count(key) != 0 ? 1 : 0);
  if (others <= 0) return;
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
    MasterConfig config;
    config.endpoint = options_.masters[i];
    config.index = i;
    config.connect_timeout = options_.connect_timeout;
    config.command_timeout = options_.command_timeout;
    config.diagnostics = options_.diagnostics;
    config.subscriber = true;
    config.on_message = [this](std::string_view channel, std::string_view value) {
      on_message(channel, value);
    };
    config.on_ready = [this](Master& subscriber) { resubscribe(subscriber); };
    subscribers_.push_back(std::make_unique<Master>(loop_, std::move(config), random_seed()));
  }
}

void Waiters::subscribe(const std::string& key) {
  if (subscribers_.empty()) {
    open_subscribers();  // they subscribe to every line once connected
    return;
  }
  auto command = Command::plain({"SUBSCRIBE", channel(key)});
  for (auto& s : subscribers_) {
    if (s->state() == Master::State::ready) s->send(command, {});
  }
}

void Waiters::unsubscribe(const std::string& key) {
  auto command = Command::plain({"UNSUBSCRIBE", channel(key)});
  for (auto& s : subscribers_) {
    if (s->state() == Master::State::ready) s->send(command, {});
  }
}

// After every (re)connect: the subscriptions of the lines that have waiters.
void Waiters::resubscribe(Master& subscriber) {
  for (const auto& [key, line] : lines_) subscriber.send(Command::plain({"SUBSCRIBE", channel(key)}), {});
}

void Waiters::on_message(std::string_view channel, std::string_view value) {
  if (channel.size() <= channel_suffix.size()) return;
  std::string key(channel.substr(0, channel.size() - channel_suffix.size()));
  // Another owner released it after us: the others had their turn.
  auto yield = yields_.find(key);
  if (yield != yields_.end() && yield->second.value != value) yields_.erase(yield);
  auto it = lines_.find(key);
  if (it == lines_.end() || it->second.queue.empty()) return;
  it->second.queue.front()->wake(value);
}

void Waiters::close() {
  lines_.clear();
  subscribers_.clear();
}

}  // namespace redlock
