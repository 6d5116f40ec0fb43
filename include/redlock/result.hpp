#pragma once

/// @file
/// Result: a value or an error, for the blocking calls.

#include <cassert>
#include <system_error>
#include <utility>

namespace redlock {

/// A value or the error that prevented it, like std::expected.
/// `if (auto lock = redlock.lock("jobs", 10s)) use(*lock); else log(lock.error());`
template <class T>
class Result {
 public:
  /// A result holding `value`.
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  /// A result holding `error`, which must not be empty.
  Result(std::error_code error) : error_(error) { assert(error_); }  // NOLINT(google-explicit-constructor)

  /// True when there is a value (and no error).
  [[nodiscard]] bool has_value() const noexcept { return !error_; }
  /// has_value().
  explicit operator bool() const noexcept { return has_value(); }

  /// The error; an empty std::error_code when there is a value.
  [[nodiscard]] std::error_code error() const noexcept { return error_; }

  /// The value; throws std::system_error when there is none.
  T& value() & {
    check();
    return value_;
  }
  /// \copydoc value()
  const T& value() const& {
    check();
    return value_;
  }
  /// \copydoc value()
  T&& value() && {
    check();
    return std::move(value_);
  }

  /// The value, unchecked: only when has_value().
  T& operator*() & noexcept { return value_; }
  /// \copydoc operator*()
  const T& operator*() const& noexcept { return value_; }
  /// The value's members, unchecked: only when has_value().
  T* operator->() noexcept { return &value_; }
  /// \copydoc operator->()
  const T* operator->() const noexcept { return &value_; }

 private:
  void check() const {
    if (error_) throw std::system_error(error_);
  }

  T value_{};
  std::error_code error_;
};

}  // namespace redlock
