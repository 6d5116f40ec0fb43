#include <redlock/error.hpp>

#include <string>

namespace redlock {
namespace {

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "redlock"; }

  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::not_acquired:
        return "the lock is held by another owner";
      case errc::unavailable:
        return "too few masters reachable to form a quorum";
      case errc::timeout:
        return "the wait deadline passed";
      case errc::not_held:
        return "the lock is no longer held on a quorum";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::closed:
        return "the client is closed";
      case errc::expired:
        return "the lock's validity ran out before a renewal succeeded";
      case errc::canceled:
        return "canceled";
    }
    return "unknown redlock error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& category() noexcept {
  static const Category instance;
  return instance;
}

std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace redlock
