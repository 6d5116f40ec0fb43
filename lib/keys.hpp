#pragma once

#include <string>
#include <string_view>

namespace redlock::keys {

// Where a resource's keys live on a master. The lock's key is
//   key_prefix + "{" + resource + "}"
// and every helper of the resource (fencing counter, wait queue, reservation,
// release channel) is the lock's key + ":" + a name without "}". So a lock's
// key ends with "}" and a helper's never does, and in any of them the last
// "}" ends the resource: no resource name can reach another resource's lock
// key or helper, whatever bytes it holds. The braces also make every key of a
// resource share one Redis Cluster hash tag, so the scripts over several of
// them are never CROSSSLOT.

/// The key that holds the lock's value.
inline std::string lock(std::string_view key_prefix, std::string_view resource) {
  std::string key;
  key.reserve(key_prefix.size() + resource.size() + 2);
  key += key_prefix;
  key += '{';
  key += resource;
  key += '}';
  return key;
}

/// A helper of the lock at `lock_key`; `name` holds no "}".
inline std::string helper(std::string_view lock_key, std::string_view name) {
  std::string key(lock_key);
  key += ':';
  key += name;
  return key;
}

/// Permit `permit` of the semaphore `resource` (Client::lock_permit): each
/// permit is a lock of its own, under this key, a helper of the resource's.
inline std::string permit(std::string_view key_prefix, std::string_view resource, int permit) {
  return helper(lock(key_prefix, resource), "permit:" + std::to_string(permit));
}

/// The key a Lock is held on: its permit's, or the resource's lock key.
inline std::string held(std::string_view key_prefix, std::string_view resource, int permit) {
  return permit < 0 ? lock(key_prefix, resource) : keys::permit(key_prefix, resource, permit);
}

/// The fencing counter (Options::fencing).
inline std::string fencing(std::string_view lock_key) {
  return helper(lock_key, "fencing");
}
/// The shared holders of the lock (Client::lock_shared).
inline std::string shared_holders(std::string_view lock_key) {
  return helper(lock_key, "shared");
}
/// Set while a writer waits for the shared holders to go: keeps new ones out.
inline std::string writer_waiting(std::string_view lock_key) {
  return helper(lock_key, "writer-waiting");
}
/// The queue of Clients waiting (on the key's gate master).
inline std::string queue(std::string_view lock_key) {
  return helper(lock_key, "queue");
}
/// Reserves the lock for the head of its queue just woken.
inline std::string reservation(std::string_view lock_key) {
  return helper(lock_key, "reserved");
}

/// Set while some Client listens for the lock's releases or waits in its
/// queue: unlock publishes only where it is (scripts::mark_listening).
inline std::string listening(std::string_view lock_key) {
  return helper(lock_key, "listening");
}

/// The channel releases of the lock are published on (channels are not
/// keys, but follow the same layout).
inline std::string release_channel(std::string_view lock_key) {
  return helper(lock_key, "released");
}

/// A Client's own wake channel (`token`: hex digits), on which the head of a
/// queue is woken. It starts "wake:" after the prefix; a release channel
/// starts "{" there.
inline std::string wake_channel(std::string_view key_prefix, std::string_view token) {
  std::string channel(key_prefix);
  channel += "wake:";
  channel += token;
  return channel;
}

/// A channel nobody listens on, under the same ACL pattern as the others
/// (&key_prefix*): a PUBLISH there tells whether the master lets us publish.
inline std::string probe_channel(std::string_view key_prefix) {
  return wake_channel(key_prefix, "probe");
}

/// The lock key whose releases `channel` carries; empty if it is no release channel.
inline std::string lock_of_channel(std::string_view channel) {
  constexpr std::string_view suffix = ":released";
  if (channel.size() <= suffix.size() || channel.substr(channel.size() - suffix.size()) != suffix) return {};
  return std::string(channel.substr(0, channel.size() - suffix.size()));
}

}  // namespace redlock::keys
