#pragma once

// Rendezvous hashing: which masters a key is "at", agreed on by every Client
// that names the masters alike, whatever the order of Options::masters.

#include <redlock/options.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlock {

/// A master's rank for a key; higher ranks first.
inline std::uint64_t rendezvous_rank(std::string_view key, const Endpoint& master) {
  std::uint64_t h = 14695981039346656037ULL;  // FNV-1a
  auto add = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  add(key);
  add(std::string_view("\0", 1));
  add(master.unix_socket.empty() ? master.host : master.unix_socket);
  add(std::to_string(master.port));
  // splitmix64's finalizer: FNV-1a alone leaves the ranks of similar names close.
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

/// Whether masters[index] is among the `count` masters ranked highest for `key`.
inline bool rendezvous_among_first(std::string_view key, const std::vector<Endpoint>& masters,
                                   std::size_t index, std::size_t count) {
  std::uint64_t rank = rendezvous_rank(key, masters[index]);
  std::size_t higher = 0;
  for (std::size_t i = 0; i < masters.size(); ++i) {
    if (i == index) continue;
    std::uint64_t other = rendezvous_rank(key, masters[i]);
    // Equal ranks (the same master named twice) are ordered by position.
    if (other > rank || (other == rank && i < index)) ++higher;
  }
  return higher < count;
}

}  // namespace redlock
