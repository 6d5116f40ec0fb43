#include "loss_watch.hpp"

#include <algorithm>
#include <utility>

#include "keys.hpp"
#include "token.hpp"

namespace redlock {
namespace {

// notify-keyspace-events sends what we listen for: keyspace events (K) of
// DEL (g), expiry (x) or eviction (e), or all of those (A).
bool sends_losses(std::string_view flags) {
  bool keyspace = flags.find('K') != std::string_view::npos;
  return keyspace && flags.find_first_of("Agxe") != std::string_view::npos;
}

// Deleted, expired, evicted, or renamed or moved away ('g' as DEL): the key
// no longer holds our value there.
bool is_loss(std::string_view event) {
  return event == "del" || event == "expired" || event == "evicted" || event == "rename_from" ||
         event == "move_from";
}

}  // namespace

// Hears the answers to CONFIG GET notify-keyspace-events.
class LossWatch::Settings final : public ReplyHandler {
 public:
  explicit Settings(LossWatch& watch) : watch_(watch) {}
  void on_reply(const Master& from, const Reply& reply) override { watch_.on_settings(from, reply); }
  void on_failure(const Master&, Failure) override {}  // the connection dropped: asked again at reconnect

 private:
  LossWatch& watch_;
};

// Hears the PING sent after a reconnect's SUBSCRIBEs: from then on every
// watched key is heard there; what was lost before is not.
class LossWatch::Resubscribed final : public ReplyHandler {
 public:
  explicit Resubscribed(LossWatch& watch) : watch_(watch) {}
  void on_reply(const Master& from, const Reply&) override { watch_.on_resubscribed(from); }
  void on_failure(const Master&, Failure) override {}  // dropped again: asked again at reconnect

 private:
  LossWatch& watch_;
};

LossWatch::LossWatch(uv_loop_t* loop, const Options& options, std::shared_ptr<const TlsContext> tls,
                     std::function<void(const std::string& value)> on_gone)
    : loop_(loop),
      options_(options),
      tls_(std::move(tls)),
      on_gone_(std::move(on_gone)),
      settings_(std::make_shared<Settings>(*this)),
      resubscribed_(std::make_shared<Resubscribed>(*this)) {
}

LossWatch::~LossWatch() = default;

std::vector<std::string> LossWatch::keys_of(std::string_view key_prefix, const Lock& lock) {
  std::vector<std::string> keys;
  if (!lock.resources.empty()) {
    for (const std::string& resource : lock.resources) keys.push_back(keys::lock(key_prefix, resource));
    return keys;
  }
  std::string held = keys::held(key_prefix, lock.resource, lock.permit);
  // A shared hold is lost with either key: the holders' set, or the lock key
  // whose mark keeps exclusive lockers out.
  if (lock.shared) keys.push_back(keys::shared_holders(held));
  keys.push_back(std::move(held));
  return keys;
}

void LossWatch::watch(const Lock& lock) {
  if (subscribers_.empty()) open();  // they subscribe once connected and asked
  for (const std::string& key : keys_of(options_.key_prefix, lock)) {
    auto& values = watched_[key];
    values.push_back(lock.value);
    if (values.size() == 1) send_to_listening("SUBSCRIBE", key);
  }
}

void LossWatch::unwatch(const Lock& lock) {
  for (const std::string& key : keys_of(options_.key_prefix, lock)) {
    auto it = watched_.find(key);
    if (it == watched_.end()) continue;
    auto& values = it->second;
    auto at = std::find(values.begin(), values.end(), lock.value);
    if (at != values.end()) values.erase(at);
    if (!values.empty()) continue;
    watched_.erase(it);
    send_to_listening("UNSUBSCRIBE", key);
  }
}

// SUBSCRIBE or UNSUBSCRIBE `key`'s keyspace channel on every master that
// sends its notifications; the others are told at their next connect.
void LossWatch::send_to_listening(std::string_view verb, const std::string& key) {
  for (std::size_t i = 0; i < subscribers_.size(); ++i) {
    Master& s = *subscribers_[i];
    if (notices_[i] != Notices::on || s.state() != Master::State::ready) continue;
    s.send(Command::plain({verb, channel(i, key)}), {});
  }
}

void LossWatch::open() {
  for (std::size_t i = 0; i < options_.masters.size(); ++i) {
    channel_prefixes_.push_back("__keyspace@" + std::to_string(options_.masters[i].database) + "__:");
    MasterConfig config = subscriber_config(options_, i, tls_);
    config.on_message = [this, i](std::string_view channel, std::string_view event) {
      on_message(i, channel, event);
    };
    config.on_ready = [this](Master& subscriber) { on_ready(subscriber); };
    subscribers_.push_back(std::make_unique<Master>(loop_, std::move(config), random_seed()));
  }
  notices_.assign(subscribers_.size(), Notices::unknown);
}

// After every (re)connect: is the setting on there now? Asked before any
// SUBSCRIBE, while the connection may still run CONFIG.
void LossWatch::on_ready(Master& subscriber) {
  notices_[subscriber.index()] = Notices::unknown;
  subscriber.send(Command::plain({"CONFIG", "GET", "notify-keyspace-events"}), settings_);
}

void LossWatch::on_settings(const Master& from, const Reply& reply) {
  std::size_t i = from.index();
  if (i >= subscribers_.size() || subscribers_[i].get() != &from) return;
  bool answered = reply.type == Reply::Type::array && reply.elements.size() == 2;
  if (!answered && options_.diagnostics) {
    std::string why = reply.is_error() ? reply.str : std::string("an unexpected reply");
    options_.diagnostics("master " + from.endpoint().to_string() + ": CONFIG GET notify-keyspace-events: " +
                         why + "; a kept lock hears a deletion there at its next renewal only");
  }
  bool on = answered && sends_losses(reply.elements[1].str);
  notices_[i] = on ? Notices::on : Notices::off;
  if (!on) return;
  for (const auto& entry : watched_)
    subscribers_[i]->send(Command::plain({"SUBSCRIBE", channel(i, entry.first)}), {});
  // A reconnect: a key lost while this connection was down was heard by
  // nobody. Once the SUBSCRIBEs above are in effect, renew what is watched.
  if (from.connections() > 1 && !watched_.empty())
    subscribers_[i]->send(Command::plain({"PING"}), resubscribed_);
}

void LossWatch::on_resubscribed(const Master& from) {
  std::size_t i = from.index();
  if (i >= subscribers_.size() || subscribers_[i].get() != &from) return;
  std::vector<std::string> values;
  for (const auto& entry : watched_) values.insert(values.end(), entry.second.begin(), entry.second.end());
  for (const std::string& value : values) on_gone_(value);
}

std::string LossWatch::channel(std::size_t master, std::string_view key) const {
  std::string name = channel_prefixes_[master];
  name += key;
  return name;
}

void LossWatch::on_message(std::size_t master, std::string_view channel, std::string_view event) {
  if (!is_loss(event)) return;
  const std::string& prefix = channel_prefixes_[master];
  if (channel.substr(0, prefix.size()) != prefix) return;
  std::string key(channel.substr(prefix.size()));
  // A notice of our own unlock can come after the unwatch. Only the holds
  // on this key are renewed: no scan of every hold per notice.
  auto it = watched_.find(key);
  if (it == watched_.end()) return;
  std::vector<std::string> values = it->second;
  for (const std::string& value : values) on_gone_(value);
}

void LossWatch::close() {
  watched_.clear();
  subscribers_.clear();
  notices_.clear();
  channel_prefixes_.clear();
}

}  // namespace redlock
