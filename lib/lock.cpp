#include <redlock/lock.hpp>

namespace redlock {

std::chrono::milliseconds Lock::validity() const {
  auto left = valid_until - std::chrono::steady_clock::now();
  if (left <= left.zero()) return std::chrono::milliseconds{0};
  return std::chrono::duration_cast<std::chrono::milliseconds>(left);
}

bool Lock::valid() const {
  return std::chrono::steady_clock::now() < valid_until;
}

}  // namespace redlock
