#pragma once

// RAII for libuv handles. libuv's rule: a handle's memory may be freed only in
// its close callback. Handle<T> owns a heap-allocated T; destroying or
// closing the Handle calls uv_close and the close callback frees the memory,
// so the owner may go away at once while libuv finishes with the handle.

#include <uv.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace redlock {

template <class T>
class Handle {
 public:
  Handle() = default;

  /// Allocates a T and runs `init(loop, T*)` (uv_timer_init, ...);
  /// throws std::runtime_error if it fails. `data` becomes T::data.
  template <class Init>
  Handle(uv_loop_t* loop, void* data, Init init) : handle_(std::make_unique<T>()) {
    int rc = init(loop, handle_.get());
    if (rc != 0) throw std::runtime_error(std::string("libuv handle init: ") + uv_strerror(rc));
    handle_->data = data;
  }

  ~Handle() { close(); }

  Handle(Handle&& other) noexcept = default;
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      close();
      handle_ = std::move(other.handle_);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  T* get() const noexcept { return handle_.get(); }
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// Starts closing; the memory goes in the close callback. No callback of
  /// the handle runs after this.
  void close() noexcept {
    if (!handle_) return;
    T* raw = handle_.release();
    raw->data = nullptr;
    uv_close(reinterpret_cast<uv_handle_t*>(raw),
             [](uv_handle_t* h) { std::unique_ptr<T> free_now(reinterpret_cast<T*>(h)); });
  }

 private:
  std::unique_ptr<T> handle_;
};

using Timer = Handle<uv_timer_t>;

inline Timer make_timer(uv_loop_t* loop, void* data) {
  return Timer(loop, data, uv_timer_init);
}

/// The object a handle callback belongs to, from handle->data.
template <class Owner, class T>
Owner* owner_of(T* handle) {
  return static_cast<Owner*>(handle->data);
}

}  // namespace redlock
