#pragma once

// Rendezvous hashing: which masters a key is "at", agreed on by every Client
// that names the masters alike, whatever the order of Options::masters.

#include <redlock/options.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

/// The part of a rank that depends on the key alone: FNV-1a over the key and a
/// NUL. Computed once for a key, it ranks every master.
inline std::uint64_t rendezvous_key_hash(std::string_view key) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  h *= 1099511628211ULL;  // the NUL: h ^= 0 changes nothing
  return h;
}

/// The part of a rank that depends on the master alone: FNV-1a over its host
/// (or socket path) and port. Computed once for a master, it ranks every key.
inline std::uint64_t rendezvous_master_hash(const Endpoint& master) {
  std::uint64_t h = 14695981039346656037ULL;
  auto add = [&h](const char* bytes, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      h ^= static_cast<unsigned char>(bytes[i]);
      h *= 1099511628211ULL;
    }
  };
  const std::string& name = master.unix_socket.empty() ? master.host : master.unix_socket;
  add(name.data(), name.size());
  char port[8];
  char* end = std::to_chars(port, port + sizeof port, master.port).ptr;
  add(port, static_cast<std::size_t>(end - port));
  return h;
}

/// The rank of the master whose rendezvous_master_hash is `master_hash` for
/// the key whose rendezvous_key_hash is `key_hash`; higher ranks first.
inline std::uint64_t rendezvous_rank(std::uint64_t key_hash, std::uint64_t master_hash) {
  // splitmix64's finalizer over both: each bit of either moves every bit of the rank.
  std::uint64_t h = key_hash ^ master_hash;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

inline std::uint64_t rendezvous_rank(std::uint64_t key_hash, const Endpoint& master) {
  return rendezvous_rank(key_hash, rendezvous_master_hash(master));
}

/// A master's rank for a key; higher ranks first.
inline std::uint64_t rendezvous_rank(std::string_view key, const Endpoint& master) {
  return rendezvous_rank(rendezvous_key_hash(key), master);
}

/// Whether masters[index] is among the `count` masters ranked highest for `key`.
inline bool rendezvous_among_first(std::string_view key, const std::vector<Endpoint>& masters,
                                   std::size_t index, std::size_t count) {
  std::uint64_t key_hash = rendezvous_key_hash(key);
  std::uint64_t rank = rendezvous_rank(key_hash, masters[index]);
  std::size_t higher = 0;
  for (std::size_t i = 0; i < masters.size(); ++i) {
    if (i == index) continue;
    std::uint64_t other = rendezvous_rank(key_hash, masters[i]);
    // Equal ranks (the same master named twice) are ordered by position.
    if (other > rank || (other == rank && i < index)) ++higher;
  }
  return higher < count;
}

}  // namespace redlock
