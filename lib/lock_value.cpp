#include "lock_value.hpp"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <climits>
#include <cstdint>

#include "token.hpp"

namespace redlock {
namespace {

constexpr std::size_t random_chars = random_text_chars;
// The time, in base 36: 8 digits until 2059.
constexpr int time_base = 36;
// The year 9999: a later time would overflow system_clock's nanoseconds.
constexpr std::int64_t latest_ms = 253402300800000;

bool all_base64url(std::string_view text) {
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_') return false;
  }
  return true;
}

}  // namespace

std::string default_owner() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "pid " + std::to_string(getpid());
  return std::string(host) + ":" + std::to_string(getpid());
}

std::string lock_value(std::string_view owner, std::chrono::system_clock::time_point now) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, static_cast<std::int64_t>(ms), time_base).ptr;
  std::string value;
  value.reserve(random_chars + 2 + static_cast<std::size_t>(end - digits) + owner.size());
  append_random_text(value);
  value += ':';
  value.append(digits, end);
  value += ':';
  value += owner;
  return value;
}

std::optional<ValueLabel> read_lock_value(std::string_view value) {
  if (value.size() < random_chars + 3 || value[random_chars] != ':') return std::nullopt;
  if (!all_base64url(value.substr(0, random_chars))) return std::nullopt;
  std::string_view rest = value.substr(random_chars + 1);
  std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::int64_t ms = 0;
  auto [end, error] = std::from_chars(rest.data(), rest.data() + colon, ms, time_base);
  if (error != std::errc{} || end != rest.data() + colon || ms < 0 || ms > latest_ms) return std::nullopt;
  ValueLabel label;
  label.owner = std::string(rest.substr(colon + 1));
  label.since = std::chrono::system_clock::time_point{std::chrono::milliseconds{ms}};
  return label;
}

}  // namespace redlock
