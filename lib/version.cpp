#include <redlock/version.hpp>

namespace redlock {

const char* version() noexcept {
  return REDLOCK_VERSION_STRING;
}

}  // namespace redlock
