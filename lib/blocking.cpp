#include <redlock/blocking.hpp>
#include <redlock/client.hpp>

#include <pthread.h>
#include <uv.h>

#include <atomic>
#include <cassert>
#include <csignal>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace redlock {

/// One loop thread running a Client. Callers hand it tasks through an inbox
/// (a mutex-guarded vector, swapped out whole) and wake it with uv_async_send.
class Redlock::Impl {
 public:
  using Task = std::function<void(Client&)>;

  explicit Impl(Options options) {
    int rc = uv_loop_init(&loop_);
    if (rc != 0) throw std::runtime_error(std::string("uv_loop_init: ") + uv_strerror(rc));
    rc = uv_async_init(&loop_, &wake_, [](uv_async_t* a) { static_cast<Impl*>(a->data)->drain(); });
    if (rc != 0) {
      uv_loop_close(&loop_);
      throw std::runtime_error(std::string("uv_async_init: ") + uv_strerror(rc));
    }
    wake_.data = this;
    try {
      client_ = std::make_unique<Client>(&loop_, std::move(options));
    } catch (...) {
      uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
      uv_run(&loop_, UV_RUN_DEFAULT);
      uv_loop_close(&loop_);
      throw;
    }
    // The Client was built on this thread; the loop thread takes it over from here.
    thread_ = std::thread([this] {
      // Our own thread: a write to a master that just died must not raise
      // SIGPIPE here (most writes use MSG_NOSIGNAL; libuv's fallback does not).
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      pthread_setname_np(pthread_self(), "redlock-loop");  // for ps, gdb and top
      uv_run(&loop_, UV_RUN_DEFAULT);
    });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      uv_async_send(&wake_);
    }
    thread_.join();
    [[maybe_unused]] int rc = uv_loop_close(&loop_);
    assert(rc == 0);
  }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  /// Runs `start` on the loop thread and waits for the callback it is given.
  /// An exception thrown on the loop thread (only allocation can fail there)
  /// reaches the caller instead of ending the process.
  Result<Lock> wait(std::function<void(Client&, Client::LockCallback)> start) {
    auto answer = std::make_shared<Answer>();
    auto future = answer->promise.get_future();
    bool queued = submit([start = std::move(start), answer](Client& client) {
      try {
        start(client, [answer](std::error_code error, Lock lock) {
          if (!answer->settled.exchange(true)) answer->promise.set_value({error, std::move(lock)});
        });
      } catch (...) {
        if (!answer->settled.exchange(true)) answer->promise.set_exception(std::current_exception());
      }
    });
    if (!queued) return make_error_code(errc::closed);
    auto [error, lock] = future.get();
    if (error) return error;
    return std::move(lock);
  }

  /// Client::master_errors, asked on the loop thread.
  std::vector<MasterError> master_errors() {
    auto answer = std::make_shared<std::promise<std::vector<MasterError>>>();
    auto future = answer->get_future();
    bool queued = submit([answer](Client& client) {
      try {
        answer->set_value(client.master_errors());
      } catch (...) {
        answer->set_exception(std::current_exception());
      }
    });
    if (!queued) return {};
    return future.get();
  }

 private:
  // uv_async_send under the mutex: drain() closes wake_ only after it saw
  // stopping_ under the same mutex, so no send can reach a closed handle.
  bool submit(Task task) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    inbox_.push_back(std::move(task));
    uv_async_send(&wake_);
    return true;
  }

  void drain() {
    std::vector<Task> tasks;
    bool stopping = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks.swap(inbox_);
      stopping = stopping_;
    }
    for (Task& task : tasks) task(*client_);
    if (stopping) {
      // Calls still in flight get errc::closed; the loop ends once every handle is closed.
      client_->close(nullptr);
      client_.reset();
      uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    }
  }

  // One blocking call's answer: whichever comes first, the callback or an
  // exception while starting the call, settles it.
  struct Answer {
    std::promise<std::pair<std::error_code, Lock>> promise;
    std::atomic<bool> settled{false};
  };

  uv_loop_t loop_{};
  uv_async_t wake_{};
  std::mutex mutex_;
  std::vector<Task> inbox_;  // guarded by mutex_
  bool stopping_ = false;    // guarded by mutex_
  std::unique_ptr<Client> client_;
  std::thread thread_;
};

Redlock::Redlock(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {
}

Redlock::~Redlock() = default;

Result<Lock> Redlock::lock(std::string resource, milliseconds ttl) {
  return impl_->wait(
      [&](Client& c, Client::LockCallback done) { c.lock(std::move(resource), ttl, std::move(done)); });
}

Result<Lock> Redlock::lock(std::string resource, milliseconds ttl, milliseconds wait) {
  return impl_->wait(
      [&](Client& c, Client::LockCallback done) { c.lock(std::move(resource), ttl, wait, std::move(done)); });
}

Result<Lock> Redlock::try_lock(std::string resource, milliseconds ttl) {
  return impl_->wait(
      [&](Client& c, Client::LockCallback done) { c.try_lock(std::move(resource), ttl, std::move(done)); });
}

Result<Lock> Redlock::extend(const Lock& lock, milliseconds ttl) {
  return impl_->wait([&](Client& c, Client::LockCallback done) { c.extend(lock, ttl, std::move(done)); });
}

Result<Lock> Redlock::continue_lock(const Lock& lock, milliseconds ttl) {
  return impl_->wait(
      [&](Client& c, Client::LockCallback done) { c.continue_lock(lock, ttl, std::move(done)); });
}

std::error_code Redlock::unlock(const Lock& lock) {
  Result<Lock> result = impl_->wait([&](Client& c, Client::LockCallback done) {
    c.unlock(lock, [done = std::move(done)](std::error_code error) { done(error, Lock{}); });
  });
  return result.error();
}

std::vector<MasterError> Redlock::master_errors() {
  return impl_->master_errors();
}

std::error_code LockGuard::extend(milliseconds ttl) {
  if (!held_) return make_error_code(errc::not_held);
  Result<Lock> extended = redlock_->extend(lock_, ttl);
  if (!extended) {
    held_ = false;
    return extended.error();
  }
  lock_ = std::move(*extended);
  return {};
}

std::error_code LockGuard::unlock() noexcept {
  if (!held_) return {};
  held_ = false;
  try {
    return redlock_->unlock(lock_);
  } catch (...) {
    // Only allocation can throw here; the key then expires with its ttl.
    return make_error_code(std::errc::not_enough_memory);
  }
}

}  // namespace redlock
