#include <redlock/blocking.hpp>
#include <redlock/client.hpp>

#include <pthread.h>
#include <uv.h>

#include <atomic>
#include <cassert>
#include <chrono>
#include <csignal>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "client_access.hpp"
#include "reentry.hpp"

namespace redlock {

/// The calls waiting with one Cancellation, each with the way to stop it.
struct Cancellation::State {
  std::mutex mutex;
  bool canceled = false;
  std::uint64_t last = 0;
  std::map<std::uint64_t, std::function<void()>> waiting;  // under mutex

  /// Registers `stop`; 0 when cancelled already (the caller stops at once).
  std::uint64_t enter(std::function<void()> stop) {
    std::lock_guard<std::mutex> lock(mutex);
    if (canceled) return 0;
    waiting.emplace(++last, std::move(stop));
    return last;
  }

  void leave(std::uint64_t key) {
    std::lock_guard<std::mutex> lock(mutex);
    waiting.erase(key);
  }
};

Cancellation::Cancellation() : state_(std::make_shared<State>()) {
}

void Cancellation::cancel() {
  // Under the mutex: a call cannot be answered (leave()) and its Redlock
  // destroyed while its stop runs. A stop only queues a task.
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->canceled = true;
  for (auto& [key, stop] : state_->waiting) stop();
  state_->waiting.clear();
}

bool Cancellation::canceled() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->canceled;
}

/// One loop thread running a Client. Callers hand it tasks through an inbox
/// (a mutex-guarded vector, swapped out whole) and wake it with uv_async_send.
class Redlock::Impl {
 public:
  using Task = std::function<void(Client&)>;

  const bool reentrant;  // Options::reentrant
  Reentry reentry;       // what each thread holds, when reentrant

  explicit Impl(Options options) : reentrant(options.reentrant) {
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
    // Every path that ends in a loss reaches the table from the Client itself.
    if (reentrant) ClientAccess::on_lost(*client_, [this](const Lock& lock) { reentry.lost_value(lock); });
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

  void keep(const Lock& lock, KeepOptions options, Client::LostCallback on_lost,
            Client::RenewedCallback on_renewed) {
    if (reentrant) {
      switch (reentry.keep(lock, on_lost, on_renewed)) {
        case Reentry::Keep::untracked:
          break;
        case Reentry::Keep::shared:
          return;
        case Reentry::Keep::first:
          // One keep for every level; the levels' callbacks hear it through reentry.
          on_lost = [this, lock](std::error_code error) { reentry.lost(lock, error); };
          on_renewed = [this, lock](std::chrono::steady_clock::time_point v) { reentry.renewed(lock, v); };
          break;
      }
    }
    auto refused = on_lost;
    bool queued =
        submit([lock, options, on_lost = std::move(on_lost), on_renewed = std::move(on_renewed)](
                   Client& c) mutable { c.keep(lock, options, std::move(on_lost), std::move(on_renewed)); });
    if (!queued && refused) refused(make_error_code(errc::closed));
  }

  /// lock() and try_lock(). Reentrant: a thread that holds `resource` here
  /// gets its lock again at once, extended first if `ttl` reaches further
  /// (unless kept: the keep renews it).
  Result<Lock> acquire(const std::string& resource, milliseconds ttl,
                       std::function<void(Client&, Client::LockCallback)> start) {
    if (!reentrant) return wait(std::move(start));
    if (auto held = reentry.enter(resource)) {
      if (held->kept || std::chrono::steady_clock::now() + ttl <= held->lock.valid_until) return held->lock;
      Result<Lock> extended =
          wait([&](Client& c, Client::LockCallback done) { c.extend(held->lock, ttl, std::move(done)); });
      if (!extended) {
        reentry.refused(held->lock);
        return extended.error();
      }
      reentry.extended(*extended);
      return extended;
    }
    Result<Lock> acquired = wait(std::move(start));
    if (acquired) reentry.acquired(*acquired);
    return acquired;
  }

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

  /// wait() for a call that `cancel` can end: `start` makes it and returns
  /// its Client::CallId.
  Result<Lock> wait_cancellable(std::function<Client::CallId(Client&, Client::LockCallback)> start,
                                const Cancellation& cancel) {
    const std::shared_ptr<Cancellation::State>& state = cancel.state();  // the lambda keeps a copy
    return wait([this, &start, state](Client& c, Client::LockCallback done) {
      auto key = std::make_shared<std::uint64_t>(0);
      // Answered on a later turn, after `key` is set below.
      Client::CallId id = start(c, [state, key, done = std::move(done)](std::error_code error, Lock lock) {
        state->leave(*key);
        done(error, std::move(lock));
      });
      *key = state->enter([this, id] { submit([id](Client& client) { client.cancel(id); }); });
      if (*key == 0) c.cancel(id);
    });
  }

  /// `ask(client)`, run on the loop thread; T{} once the loop is stopping.
  template <class T, class Ask>
  T ask(Ask ask) {
    auto answer = std::make_shared<std::promise<T>>();
    auto future = answer->get_future();
    bool queued = submit([answer, ask](Client& client) {
      try {
        answer->set_value(ask(client));
      } catch (...) {
        answer->set_exception(std::current_exception());
      }
    });
    if (!queued) return {};
    return future.get();
  }

  /// Runs `task` on the loop thread; false once the Redlock is stopping.
  bool run_on_loop(Task task) { return submit(std::move(task)); }

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
  return impl_->acquire(resource, ttl, [&](Client& c, Client::LockCallback done) {
    c.lock(std::move(resource), ttl, std::move(done));
  });
}

Result<Lock> Redlock::lock(std::string resource, milliseconds ttl, milliseconds wait) {
  return impl_->acquire(resource, ttl, [&](Client& c, Client::LockCallback done) {
    c.lock(std::move(resource), ttl, wait, std::move(done));
  });
}

Result<Lock> Redlock::lock(std::string resource, milliseconds ttl, milliseconds wait,
                           const Cancellation& cancel) {
  return impl_->wait_cancellable(
      [&](Client& c, Client::LockCallback done) {
        return c.lock(std::move(resource), ttl, wait, std::move(done));
      },
      cancel);
}

Result<Lock> Redlock::try_lock(std::string resource, milliseconds ttl) {
  return impl_->acquire(resource, ttl, [&](Client& c, Client::LockCallback done) {
    c.try_lock(std::move(resource), ttl, std::move(done));
  });
}

Result<Lock> Redlock::lock_permit(std::string resource, int permits, milliseconds ttl, milliseconds wait) {
  return impl_->wait([&](Client& c, Client::LockCallback done) {
    c.lock_permit(std::move(resource), permits, ttl, wait, std::move(done));
  });
}

Result<Lock> Redlock::lock_permit(std::string resource, int permits, milliseconds ttl, milliseconds wait,
                                  const Cancellation& cancel) {
  return impl_->wait_cancellable(
      [&](Client& c, Client::LockCallback done) {
        return c.lock_permit(std::move(resource), permits, ttl, wait, std::move(done));
      },
      cancel);
}

Result<Lock> Redlock::lock_shared(std::string resource, milliseconds ttl, milliseconds wait) {
  return impl_->wait([&](Client& c, Client::LockCallback done) {
    c.lock_shared(std::move(resource), ttl, wait, std::move(done));
  });
}

Result<Lock> Redlock::lock_shared(std::string resource, milliseconds ttl, milliseconds wait,
                                  const Cancellation& cancel) {
  return impl_->wait_cancellable(
      [&](Client& c, Client::LockCallback done) {
        return c.lock_shared(std::move(resource), ttl, wait, std::move(done));
      },
      cancel);
}

Result<Lock> Redlock::try_lock_shared(std::string resource, milliseconds ttl) {
  return impl_->wait([&](Client& c, Client::LockCallback done) {
    c.try_lock_shared(std::move(resource), ttl, std::move(done));
  });
}

Result<Lock> Redlock::lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait) {
  return impl_->wait([&](Client& c, Client::LockCallback done) {
    c.lock_all(std::move(resources), ttl, wait, std::move(done));
  });
}

Result<Lock> Redlock::lock_all(std::vector<std::string> resources, milliseconds ttl, milliseconds wait,
                               const Cancellation& cancel) {
  return impl_->wait_cancellable(
      [&](Client& c, Client::LockCallback done) {
        return c.lock_all(std::move(resources), ttl, wait, std::move(done));
      },
      cancel);
}

Result<Lock> Redlock::extend(const Lock& lock, milliseconds ttl) {
  Result<Lock> extended =
      impl_->wait([&](Client& c, Client::LockCallback done) { c.extend(lock, ttl, std::move(done)); });
  if (extended && impl_->reentrant) impl_->reentry.extended(*extended);
  return extended;
}

Result<Lock> Redlock::continue_lock(const Lock& lock, milliseconds ttl) {
  Result<Lock> continued =
      impl_->wait([&](Client& c, Client::LockCallback done) { c.continue_lock(lock, ttl, std::move(done)); });
  if (continued && impl_->reentrant) impl_->reentry.extended(*continued);
  return continued;
}

std::error_code Redlock::unlock(const Lock& lock) {
  // Reentrant: only the last level's unlock reaches the masters.
  if (impl_->reentrant && !impl_->reentry.leave(lock)) return {};
  Result<Lock> result = impl_->wait([&](Client& c, Client::LockCallback done) {
    c.unlock(lock, [done = std::move(done)](std::error_code error) { done(error, Lock{}); });
  });
  return result.error();
}

std::vector<MasterError> Redlock::master_errors() {
  return impl_->ask<std::vector<MasterError>>([](Client& c) { return c.master_errors(); });
}

bool Redlock::on_loop(std::function<void(Client&)> task) {
  return impl_->run_on_loop(std::move(task));
}

Result<ResourceReport> Redlock::holder(std::string resource) {
  struct Answer {
    std::promise<std::pair<std::error_code, ResourceReport>> promise;
    std::atomic<bool> settled{false};
  };
  auto answer = std::make_shared<Answer>();
  auto future = answer->promise.get_future();
  bool queued = impl_->run_on_loop([resource = std::move(resource), answer](Client& c) mutable {
    c.holder(std::move(resource), [answer](std::error_code error, ResourceReport report) {
      if (!answer->settled.exchange(true)) answer->promise.set_value({error, std::move(report)});
    });
  });
  if (!queued) return make_error_code(errc::closed);
  auto [error, report] = future.get();
  if (error) return error;
  return std::move(report);
}

Stats Redlock::stats() {
  return impl_->ask<Stats>([](Client& c) { return c.stats(); });
}

void Redlock::keep(const Lock& lock, KeepOptions options, std::function<void(std::error_code)> on_lost,
                   std::function<void(std::chrono::steady_clock::time_point)> on_renewed) {
  impl_->keep(lock, options, std::move(on_lost), std::move(on_renewed));
}

// A kept guard's state: written on the loop thread, read from any.
struct LockGuard::Kept {
  mutable std::mutex mutex;
  std::error_code error;                              // guarded by mutex
  std::chrono::steady_clock::time_point valid_until;  // guarded by mutex
};

LockGuard::LockGuard(Redlock& redlock, Lock lock, KeepOptions options,
                     std::function<void(std::error_code)> on_lost)
    : redlock_(&redlock), lock_(std::move(lock)), held_(true), kept_(std::make_shared<Kept>()) {
  kept_->valid_until = lock_.valid_until;
  auto lost = [kept = kept_, on_lost = std::move(on_lost)](std::error_code error) {
    {
      std::lock_guard<std::mutex> lock(kept->mutex);
      kept->error = error;
    }
    if (on_lost) on_lost(error);
  };
  auto renewed = [kept = kept_](std::chrono::steady_clock::time_point valid_until) {
    std::lock_guard<std::mutex> lock(kept->mutex);
    kept->valid_until = valid_until;
  };
  redlock.keep(lock_, options, std::move(lost), std::move(renewed));
}

bool LockGuard::lost() const {
  return static_cast<bool>(error());
}

std::error_code LockGuard::error() const {
  if (!kept_) return {};
  std::lock_guard<std::mutex> lock(kept_->mutex);
  return kept_->error;
}

std::chrono::steady_clock::time_point LockGuard::valid_until() const {
  if (!kept_) return lock_.valid_until;
  std::lock_guard<std::mutex> lock(kept_->mutex);
  return kept_->valid_until;
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
