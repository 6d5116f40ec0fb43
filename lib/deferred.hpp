#pragma once

#include <uv.h>

#include <functional>
#include <memory>
#include <vector>

namespace redlock {

/// Runs functions on a later loop turn, in the order posted. Every user
/// callback goes through here, so user code never runs with library frames
/// on the stack and may call, close or destroy the Client from a callback.
///
/// Ownership: a Deferred may outlive its owner. The owner holds a
/// Deferred::Ptr; dropping it lets what is queued still run, then the handles
/// close and the Deferred frees itself.
class Deferred {
 public:
  struct Release {
    void operator()(Deferred* d) const noexcept { d->release(); }
  };
  using Ptr = std::unique_ptr<Deferred, Release>;

  static Ptr open(uv_loop_t* loop);

  /// `fn` must not throw: it runs from inside libuv.
  void post(std::function<void()> fn);

  ~Deferred() = default;  // only from the last close callback

 private:
  explicit Deferred(uv_loop_t* loop);

  void release() noexcept;
  void drain();
  void close_if_done() noexcept;

  // The handles live inside the Deferred, so it is freed in the last close
  // callback. check_ runs the queue right after the loop polls; idle_ keeps
  // the poll from blocking while anything is queued.
  uv_check_t check_{};
  uv_idle_t idle_{};
  std::vector<std::function<void()>> queue_;
  bool released_ = false;
  bool draining_ = false;
  bool closing_ = false;
  int open_handles_ = 2;
};

}  // namespace redlock
