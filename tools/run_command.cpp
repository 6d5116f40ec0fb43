#include "run_command.hpp"

#include <redlock/error.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "guardian.hpp"
#include "session.hpp"
#include "uv_handle.hpp"
#include "wait_line.hpp"

extern char**
    environ;  // NOLINT(readability-redundant-declaration): POSIX, not in unistd.h without _GNU_SOURCE

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

// Every signal whose default would end `redlock run` (and so orphan CMD's
// work without renewals): passed on to CMD's whole process group.
constexpr std::array<int, 12> forwarded = {SIGINT,  SIGTERM,   SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,
                                           SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR};

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
    // Our value stays on the masters after a loss until CMD is gone (then
    // release() deletes it), so nobody gets the lock while CMD still runs.
    KeepOptions keep;
    keep.release_on_loss = false;
    session_.client().keep(
        *lock_, keep, [this](std::error_code why) { on_lost(why); },
        [this](std::chrono::steady_clock::time_point valid_until) { arm_deadline(valid_until); });
    spawn();
    arm_deadline(lock_->valid_until);
  }

  // CMD must be gone before the lock's validity ends: unless a renewal moves
  // it on, its group gets SIGKILL `margin` before.
  void arm_deadline(std::chrono::steady_clock::time_point valid_until) {
    if (!running_) return;
    if (!deadline_timer_) deadline_timer_ = make_timer(session_.loop(), this);
    auto left = std::chrono::duration_cast<milliseconds>(valid_until - std::chrono::steady_clock::now()) -
                kill_margin();
    uv_timer_start(
        deadline_timer_.get(), [](uv_timer_t* h) { owner_of<Runner>(h)->on_deadline(); },
        static_cast<std::uint64_t>(std::max<milliseconds::rep>(left.count(), 0)), 0);
  }

  milliseconds kill_margin() const { return std::min(milliseconds{100}, inv_.ttl / 10); }

  void on_deadline() {
    if (!running_) return;
    if (!lost_) lost_ = make_error_code(errc::expired);
    complain("the lock on '" + inv_.resource + "' is valid for " + std::to_string(kill_margin().count()) +
             " ms more and no renewal succeeded; sending SIGKILL to " + inv_.command[0] + "'s process group");
    signal_group(SIGKILL);
  }

  // CMD's process group: the guardian's pid (see guardian.hpp). A signal that
  // comes before the guardian made its group finds no group: CMD has not
  // started, and the guardian is stopped instead, so it never starts.
  void signal_group(int signum) {
    if (!running_) return;
    pid_t group = child_.get()->pid;
    if (kill(-group, signum) != 0 && errno == ESRCH) uv_process_kill(child_.get(), SIGKILL);
  }

  // CMD runs under a guardian, our own binary (see guardian.hpp), which
  // watches the read end of `watch` (its descriptor guard_fd).
  void spawn() {
    std::vector<std::string> env = child_environment(*lock_);
    std::vector<std::string> args = {"redlock", guard_arg};
    args.insert(args.end(), inv_.command.begin(), inv_.command.end());
    std::vector<char*> env_ptrs = pointers(env);
    std::vector<char*> arg_ptrs = pointers(args);
    int watch[2];
    if (pipe2(watch, O_CLOEXEC) != 0) {
      spawn_failed(uv_translate_sys_error(errno));
      return;
    }
    watch_ = watch[1];
    std::array<uv_stdio_container_t, guard_fd + 1> stdio{};
    for (int fd = 0; fd < 3; ++fd) {
      stdio[fd].flags = UV_INHERIT_FD;
      stdio[fd].data.fd = fd;
    }
    stdio[guard_fd].flags = UV_INHERIT_FD;
    stdio[guard_fd].data.fd = watch[0];
    uv_process_options_t options{};
    options.file = "/proc/self/exe";
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
    close(watch[0]);
    child_.get()->data = this;
    if (rc != 0) {
      spawn_failed(rc);
      return;
    }
    running_ = true;
  }

  void spawn_failed(int rc) {
    child_.close();
    complain("cannot start " + inv_.command[0] + ": " + uv_strerror(rc));
    status_ = exit_status::cannot_execute;
    release();
  }

  void on_signal(int signum) {
    if (running_) {
      signal_group(signum);
      return;
    }
    if (lock_ || interrupted_) return;  // releasing already
    // Still waiting for the lock: stop waiting, exit as the signal would have.
    interrupted_ = true;
    line_.stop();
    status_ = 128 + signum;
    finish();
  }

  // The guardian exited: CMD has. What CMD left in its group (a job put in
  // the background) must not outlive the lock.
  void on_exit(std::int64_t status, int term_signal) {
    pid_t group = child_.get()->pid;
    kill(-group, SIGKILL);
    take_terminal_back(group);
    running_ = false;
    kill_timer_.close();
    deadline_timer_.close();
    child_.close();
    status_ = lost_ ? exit_status::lost : term_signal != 0 ? 128 + term_signal : static_cast<int>(status);
    release();
  }

  // A guardian killed with its group had no time to give the terminal back.
  static void take_terminal_back(pid_t group) {
    if (isatty(STDIN_FILENO) == 0 || tcgetpgrp(STDIN_FILENO) != group) return;
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(STDIN_FILENO, getpgrp());
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void on_lost(std::error_code why) {
    lost_ = why;
    if (!running_) return;
    complain("lost the lock on '" + inv_.resource + "' (" + why.message() + "); sending SIGTERM to " +
             inv_.command[0] + "'s process group (" + std::to_string(child_.get()->pid) + ")");
    signal_group(SIGTERM);
    kill_timer_ = make_timer(session_.loop(), this);
    uv_timer_start(
        kill_timer_.get(), [](uv_timer_t* h) { owner_of<Runner>(h)->on_kill_after(); },
        static_cast<std::uint64_t>(inv_.kill_after.count()), 0);
  }

  void on_kill_after() {
    if (!running_) return;
    complain(inv_.command[0] + " still running " + duration_text(inv_.kill_after) +
             " after SIGTERM; sending SIGKILL");
    signal_group(SIGKILL);
  }

  // After a loss too: our value may remain on some masters (the keep left it).
  void release() {
    session_.client().unlock(*lock_, [this](std::error_code ec) {
      if (ec && !lost_) complain("releasing '" + inv_.resource + "': " + ec.message());
      finish();
    });
  }

  void close_handles() {
    for (auto& s : signals_) s.close();
    kill_timer_.close();
    deadline_timer_.close();
    child_.close();
    if (watch_ >= 0) close(std::exchange(watch_, -1));
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
  Timer deadline_timer_;
  int watch_ = -1;  // the write end of the guardian's pipe: closed, the guardian kills CMD's group
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
