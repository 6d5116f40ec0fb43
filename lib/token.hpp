#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace redlock {

/// 128 bits from getrandom(), as 32 lower-case hex digits (a wake channel's name).
std::string random_token();
/// The length of append_random_text's text.
constexpr std::size_t random_text_chars = 22;
/// 128 bits from getrandom() appended to `out` as 22 base64url characters
/// (A-Z a-z 0-9 - _): a lock value's random part, as short as printable text
/// allows.
void append_random_text(std::string& out);

/// 64 random bits from getrandom(), to seed per-client PRNGs.
std::uint64_t random_seed();

}  // namespace redlock
