#pragma once

#include <cstdint>
#include <string>

namespace redlock {

/// A fresh lock value: 128 bits from getrandom(), as 32 lower-case hex digits.
std::string random_token();
/// The same 32 digits appended to `out` (one allocation for a longer value).
void append_random_token(std::string& out);

/// 64 random bits from getrandom(), to seed per-client PRNGs.
std::uint64_t random_seed();

}  // namespace redlock
