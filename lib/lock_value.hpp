#pragma once

// A lock's value on the masters: 128 random bits (what makes it ours), then
// when and by whom it was taken, for Inspector and `redlock status`:
//   <22 base64url characters>:<unix time in ms, base 36>:<owner>
// The owner is a label, never trusted: only the whole value is compared.
// Short on purpose: Redis keeps a string of up to 44 bytes in the same
// allocation as its object, and a longer one costs every SET and GET of it
// (a master's time per lock-and-unlock about 6% more at 55 bytes). With an
// owner of up to 12 bytes a value stays within the 44.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace redlock {

/// hostname:pid, the default Options::owner.
std::string default_owner();

/// A fresh value taken by `owner` at `now`.
std::string lock_value(std::string_view owner, std::chrono::system_clock::time_point now);

/// What a value says of its holder.
struct ValueLabel {
  std::string owner;
  std::chrono::system_clock::time_point since;
};

/// The label of a value lock_value() made; nothing for any other string (a
/// value of an older redlock, or of another library on the same keys).
std::optional<ValueLabel> read_lock_value(std::string_view value);

}  // namespace redlock
