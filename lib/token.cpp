#include "token.hpp"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <system_error>

namespace redlock {
namespace {

void fill_random(void* buffer, std::size_t size) {
  auto* out = static_cast<unsigned char*>(buffer);
  std::size_t done = 0;
  while (done < size) {
    ssize_t got = getrandom(out + done, size - done, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      // Only possible on kernels without getrandom (before 3.17): nothing safe to fall back to.
      throw std::system_error(errno, std::generic_category(), "getrandom");
    }
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace

void append_random_text(std::string& out) {
  std::array<unsigned char, 16> bytes{};
  fill_random(bytes.data(), bytes.size());
  static constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  // The two bits over 21 whole characters of six come first, as one of
  // 'A', 'Q', 'g' or 'w': a value never starts with '-', so `redlock
  // extend RESOURCE VALUE` never takes it for an option.
  // Written into a buffer and appended once: a character at a time costs a
  // capacity check each.
  char text[random_text_chars];
  std::size_t n = 0;
  text[n++] = alphabet[(bytes[0] >> 6) << 4];
  unsigned bits = bytes[0] & 0x3fU;
  int held = 6;
  for (std::size_t i = 1; i < bytes.size(); ++i) {
    bits = ((bits << 8) | bytes[i]) & 0x3fffU;
    held += 8;
    while (held >= 6) {
      held -= 6;
      text[n++] = alphabet[(bits >> held) & 0x3f];
    }
  }
  out.append(text, n);
}

std::string random_token() {
  std::array<unsigned char, 16> bytes{};
  fill_random(bytes.data(), bytes.size());
  static constexpr char digits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(32);
  for (unsigned char b : bytes) {
    hex += digits[b >> 4];
    hex += digits[b & 0x0f];
  }
  return hex;
}

std::uint64_t random_seed() {
  std::uint64_t seed = 0;
  fill_random(&seed, sizeof seed);
  return seed;
}

}  // namespace redlock
