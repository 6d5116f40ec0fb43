#include "run_command.hpp"

#include <redlock/error.hpp>

#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "session.hpp"
#include "uv_handle.hpp"
#include "wait_line.hpp"

extern char**
    environ;  // NOLINT(readability-redundant-declaration): POSIX, not in unistd.h without _GNU_SOURCE

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

constexpr std::array<int, 3> forwarded = {SIGINT, SIGTERM, SIGHUP};

// What CMD finds in its environment; inherited copies of these are dropped so
// a nested run cannot see its parent's lock.
constexpr std::array<const char*, 5> lock_variables = {
    "REDLOCK_RESOURCE=", "REDLOCK_VALUE=", "REDLOCK_TTL_MS=", "REDLOCK_VALIDITY_MS=",
    "REDLOCK_FENCING_TOKEN="};

std::vector<std::string> child_environment(const Lock& lock) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool ours = false;
    for (const char* prefix : lock_variables) {
      if (std::strncmp(*e, prefix, std::strlen(prefix)) == 0) ours = true;
    }
    if (!ours) env.emplace_back(*e);
  }
  env.push_back("REDLOCK_RESOURCE=" + lock.resource);
  env.push_back("REDLOCK_VALUE=" + lock.value);
  env.push_back("REDLOCK_TTL_MS=" + std::to_string(lock.ttl.count()));
  env.push_back("REDLOCK_VALIDITY_MS=" + std::to_string(lock.validity().count()));
  if (lock.fencing_token > 0) env.push_back("REDLOCK_FENCING_TOKEN=" + std::to_string(lock.fencing_token));
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string duration_text(milliseconds d) {
  if (d.count() % 1000 != 0) return std::to_string(d.count()) + "ms";
  return std::to_string(d.count() / 1000) + "s";
}

/// One `redlock run`: acquiring, then CMD running under keep(), then releasing.
class Runner {
 public:
  explicit Runner(const Invocation& inv)
      : inv_(inv), session_(inv.options), line_(session_.loop(), inv.options, inv.resource) {}

  int run() {
    for (std::size_t i = 0; i < forwarded.size(); ++i) {
      signals_[i] = Handle<uv_signal_t>(session_.loop(), this, uv_signal_init);
      uv_signal_start(
          signals_[i].get(), [](uv_signal_t* h, int signum) { owner_of<Runner>(h)->on_signal(signum); },
          forwarded[i]);
    }
    acquire();
    session_.run();
    return status_;
  }

 private:
  void acquire() {
    auto cb = [this](std::error_code ec, Lock lock) { on_acquired(ec, std::move(lock)); };
    if (inv_.wait && inv_.wait->count() == 0) {
      session_.client().try_lock(inv_.resource, inv_.ttl, cb);
      return;
    }
    session_.client().lock(inv_.resource, inv_.ttl, inv_.wait.value_or(milliseconds::max()), cb);
    line_.start();
  }

  void on_acquired(std::error_code ec, Lock lock) {
    line_.stop();
    // Interrupted: close() answered errc::closed and released what was in
    // flight. Only a lock whose answer was already on its way when the signal
    // came gets here with no error; the closed client cannot release it, and
    // it expires after its ttl.
    if (interrupted_) return;
    if (ec) {
      if (ec == errc::timeout) {
        complain("'" + inv_.resource + "' is held by another owner; gave up after " +
                 duration_text(*inv_.wait));
      } else {
        complain("'" + inv_.resource + "': " + ec.message());
      }
      status_ = status_for(ec, inv_.conflict_exit);
      finish();
      return;
    }
    lock_ = std::move(lock);
    session_.client().keep(*lock_, KeepOptions{}, [this](std::error_code why) { on_lost(why); });
    spawn();
  }

  void spawn() {
    std::vector<std::string> env = child_environment(*lock_);
    std::vector<std::string> args = inv_.command;
    std::vector<char*> env_ptrs = pointers(env);
    std::vector<char*> arg_ptrs = pointers(args);
    std::array<uv_stdio_container_t, 3> stdio{};
    for (int fd = 0; fd < 3; ++fd) {
      stdio[fd].flags = UV_INHERIT_FD;
      stdio[fd].data.fd = fd;
    }
    uv_process_options_t options{};
    options.file = arg_ptrs[0];
    options.args = arg_ptrs.data();
    options.env = env_ptrs.data();
    options.stdio = stdio.data();
    options.stdio_count = static_cast<int>(stdio.size());
    options.exit_cb = [](uv_process_t* h, std::int64_t status, int term_signal) {
      owner_of<Runner>(h)->on_exit(status, term_signal);
    };
    // uv_spawn initialises the handle even when it fails, so the handle is
    // made first and closed either way.
    child_ = Handle<uv_process_t>(session_.loop(), this, [](uv_loop_t*, uv_process_t*) { return 0; });
    int rc = uv_spawn(session_.loop(), child_.get(), &options);
    child_.get()->data = this;
    if (rc != 0) {
      spawn_failed(rc);
      return;
    }
    running_ = true;
  }

  void spawn_failed(int rc) {
    child_.close();
    if (rc == UV_ENOENT) {
      complain(inv_.command[0] + ": command not found");
      status_ = exit_status::not_found;
    } else {
      complain(inv_.command[0] + ": " + uv_strerror(rc));
      status_ = exit_status::cannot_execute;
    }
    release();
  }

  void on_signal(int signum) {
    if (running_) {
      uv_process_kill(child_.get(), signum);
      return;
    }
    if (lock_ || interrupted_) return;  // releasing already
    // Still waiting for the lock: stop waiting, exit as the signal would have.
    interrupted_ = true;
    line_.stop();
    status_ = 128 + signum;
    finish();
  }

  void on_exit(std::int64_t status, int term_signal) {
    running_ = false;
    kill_timer_.close();
    child_.close();
    if (lost_) {
      status_ = exit_status::lost;
      finish();
      return;
    }
    status_ = term_signal != 0 ? 128 + term_signal : static_cast<int>(status);
    release();
  }

  void on_lost(std::error_code why) {
    lost_ = why;
    if (!running_) return;
    complain("lost the lock on '" + inv_.resource + "' (" + why.message() + "); sending SIGTERM to " +
             inv_.command[0] + " (pid " + std::to_string(child_.get()->pid) + ")");
    uv_process_kill(child_.get(), SIGTERM);
    kill_timer_ = make_timer(session_.loop(), this);
    uv_timer_start(
        kill_timer_.get(), [](uv_timer_t* h) { owner_of<Runner>(h)->on_kill_after(); },
        static_cast<std::uint64_t>(inv_.kill_after.count()), 0);
  }

  void on_kill_after() {
    if (!running_) return;
    complain(inv_.command[0] + " still running " + duration_text(inv_.kill_after) +
             " after SIGTERM; sending SIGKILL");
    uv_process_kill(child_.get(), SIGKILL);
  }

  void release() {
    session_.client().unlock(*lock_, [this](std::error_code ec) {
      if (ec) complain("releasing '" + inv_.resource + "': " + ec.message());
      finish();
    });
  }

  void close_handles() {
    for (auto& s : signals_) s.close();
    kill_timer_.close();
    child_.close();
  }

  void finish() {
    close_handles();
    session_.client().close(nullptr);
  }

  const Invocation& inv_;
  // session_ is declared first, so it is destroyed last: the handles below
  // close into its loop.
  Session session_;
  WaitLine line_;
  std::array<Handle<uv_signal_t>, forwarded.size()> signals_;
  Handle<uv_process_t> child_;
  Timer kill_timer_;
  std::optional<Lock> lock_;
  std::error_code lost_;
  bool running_ = false;
  bool interrupted_ = false;
  int status_ = 0;
};

}  // namespace

int run_command(const Invocation& inv) {
  Runner runner(inv);
  return runner.run();
}

}  // namespace redlock::cli
