#include "deferred.hpp"

#include <utility>

namespace redlock {

Deferred::Ptr Deferred::open(uv_loop_t* loop) {
  return Ptr(new Deferred(loop));
}

Deferred::Deferred(uv_loop_t* loop) {
  uv_check_init(loop, &check_);
  uv_idle_init(loop, &idle_);
  check_.data = this;
  idle_.data = this;
}

void Deferred::post(std::function<void()> fn) {
  queue_.push_back(std::move(fn));
  if (queue_.size() == 1 && !draining_) {
    uv_check_start(&check_, [](uv_check_t* h) { static_cast<Deferred*>(h->data)->drain(); });
    uv_idle_start(&idle_, [](uv_idle_t*) {});
  }
}

void Deferred::drain() {
  // Functions posted while this batch runs wait for the next turn.
  draining_ = true;
  std::vector<std::function<void()>> batch;
  batch.swap(queue_);
  for (auto& fn : batch) fn();
  draining_ = false;
  batch.clear();
  if (queue_.empty()) queue_.swap(batch);  // keep the capacity for the next turn
  if (queue_.empty()) {
    uv_check_stop(&check_);
    uv_idle_stop(&idle_);
    close_if_done();
  }
}

void Deferred::release() noexcept {
  released_ = true;
  if (!draining_) close_if_done();
}

void Deferred::close_if_done() noexcept {
  if (!released_ || !queue_.empty() || closing_) return;
  closing_ = true;
  auto on_closed = [](uv_handle_t* h) {
    auto* self = static_cast<Deferred*>(h->data);
    if (--self->open_handles_ == 0) std::unique_ptr<Deferred> free_now(self);
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&check_), on_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_), on_closed);
}

}  // namespace redlock
