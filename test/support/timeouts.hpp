#pragma once

#include <chrono>
#include <cmath>
#include <cstdlib>

namespace redlock::test {

/// REDLOCK_TEST_TIMEOUT_MULTIPLIER, after libuv's UV_TEST_TIMEOUT_MULTIPLIER:
/// slow machines and sanitizer builds set it above 1. Unset, unparsable or
/// not positive means 1.
inline double test_timeout_multiplier() {
  const char* text = std::getenv("REDLOCK_TEST_TIMEOUT_MULTIPLIER");
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (*end != '\0' || !std::isfinite(value) || value <= 0.0) return 1.0;
  return value;
}

/// `base` times test_timeout_multiplier(), rounded up.
inline std::chrono::milliseconds scaled(std::chrono::milliseconds base) {
  const std::chrono::duration<double, std::milli> product(static_cast<double>(base.count()) *
                                                          test_timeout_multiplier());
  return std::chrono::ceil<std::chrono::milliseconds>(product);
}

}  // namespace redlock::test
