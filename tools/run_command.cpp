#include "run_command.hpp"

#include <redlock/election.hpp>
#include <redlock/error.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
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

// Every signal whose default would end `redlock run` and that another
// process sends (faults such as SIGSEGV are left alone): passed on to every
// process of CMD's. Should one still end us, the guardian kills CMD's.
std::vector<int> forwarded() {
  std::vector<int> signals = {SIGINT,    SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1, SIGUSR2,  SIGALRM,
                              SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR,  SIGSTKFLT};
  for (int signum = SIGRTMIN; signum <= SIGRTMAX; ++signum) signals.push_back(signum);
  return signals;
}

// Dropped from CMD's environment: our lock's variables (CMD gets its own,
// so a nested run cannot see its parent's lock), and the masters and their
// password, which CMD has no business with.
constexpr std::array<const char*, 8> lock_variables = {
    "REDLOCK_RESOURCE=", "REDLOCK_VALUE=",         "REDLOCK_TTL_MS=",  "REDLOCK_VALIDITY_MS=",
    "REDLOCK_PERMIT=",   "REDLOCK_FENCING_TOKEN=", "REDLOCK_MASTERS=", "REDLOCK_PASSWORD="};

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
  if (lock.permit >= 0) env.push_back("REDLOCK_PERMIT=" + std::to_string(lock.permit));
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
    for (int signum : forwarded()) {
      signals_.push_back(Handle<uv_signal_t>(session_.loop(), this, uv_signal_init));
      uv_signal_start(
          signals_.back().get(), [](uv_signal_t* h, int n) { owner_of<Runner>(h)->on_signal(n); }, signum);
    }
    // Once CMD's group has the terminal we are in the background, and with
    // `stty tostop` a line on stderr would stop us (and our renewals).
    std::signal(SIGTTOU, SIG_IGN);
    std::signal(SIGTTIN, SIG_IGN);
    // Should the guardian itself be killed, CMD's processes become ours.
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    acquire();
    session_.run();
    if (died_of_ == SIGINT && status_ == 128 + SIGINT) {
      // As CMD did: a shell running us in a loop then stops too.
      std::signal(SIGINT, SIG_DFL);
      // The terminal would have told our own group, had CMD's not had the foreground.
      if (had_terminal_) kill(0, SIGINT);
      std::raise(SIGINT);
    }
    return status_;
  }

 private:
  void acquire() {
    auto cb = [this](std::error_code ec, Lock lock) { on_acquired(ec, std::move(lock)); };
    Client& client = session_.client();
    const bool once = inv_.wait && inv_.wait->count() == 0;
    const milliseconds wait = inv_.wait.value_or(milliseconds::max());
    if (inv_.elect) {
      campaign(once ? milliseconds{0} : wait);
    } else if (!inv_.also.empty()) {
      std::vector<std::string> resources = {inv_.resource};
      resources.insert(resources.end(), inv_.also.begin(), inv_.also.end());
      client.lock_all(std::move(resources), inv_.ttl, once ? milliseconds{0} : wait, cb);
    } else if (inv_.permits > 0) {
      client.lock_permit(inv_.resource, inv_.permits, inv_.ttl, once ? milliseconds{0} : wait, cb);
    } else if (inv_.shared && once) {
      client.try_lock_shared(inv_.resource, inv_.ttl, cb);
    } else if (inv_.shared) {
      client.lock_shared(inv_.resource, inv_.ttl, wait, cb);
    } else if (once) {
      client.try_lock(inv_.resource, inv_.ttl, cb);
    } else {
      client.lock(inv_.resource, inv_.ttl, wait, cb);
    }
    if (!once) line_.start();
  }

  // --elect: the Election keeps the leadership as keep() below would
  // keep a lock (our value stays after a loss until CMD is gone).
  void campaign(milliseconds wait) {
    election_ = std::make_unique<Election>(session_.client(), inv_.resource, owner(), inv_.ttl);
    KeepOptions keep;
    keep.release_on_loss = false;
    election_->keep_with(keep, [this](std::chrono::steady_clock::time_point v) { arm_deadline(v); });
    election_->campaign(
        "", wait, [this](std::error_code ec, const Leader&) { on_acquired(ec, election_->lock()); },
        [this](std::error_code why) { on_lost(why); });
  }

  // --owner, else what the library would name us: hostname:pid.
  std::string owner() const {
    if (!inv_.options.owner.empty()) return inv_.options.owner;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(host) + ":" + std::to_string(getpid());
  }

  void on_acquired(std::error_code ec, Lock lock) {
    line_.stop();
    // Interrupted: close() answered errc::closed and released what was in
    // flight. Only a lock whose answer was already on its way when the signal
    // came gets here with no error; the closed client cannot release it, and
    // it expires after its ttl.
    if (interrupted_) return;
    if (ec) {
      // Another holder is no error to report (flock -n is silent), unless asked.
      bool conflict = ec == errc::timeout || ec == errc::not_acquired;
      if (ec == errc::timeout && inv_.verbose) {
        complain("'" + inv_.resource + "' is held by another owner; gave up after " +
                 duration_text(*inv_.wait));
      } else if (!conflict || inv_.verbose) {
        complain("'" + inv_.resource + "': " + ec.message());
      }
      status_ = status_for(ec, inv_.conflict_exit);
      finish();
      return;
    }
    lock_ = std::move(lock);
    // Our value stays on the masters after a loss until CMD is gone (then
    // release() deletes it), so nobody gets the lock while CMD still runs.
    if (!election_) {
      KeepOptions keep;
      keep.release_on_loss = false;
      session_.client().keep(
          *lock_, keep, [this](std::error_code why) { on_lost(why); },
          [this](std::chrono::steady_clock::time_point valid_until) { arm_deadline(valid_until); });
    }
    spawn();
    arm_deadline(lock_->valid_until);
  }

  // CMD must be gone before the lock's validity ends: unless a renewal moves
  // it on, every process of CMD's gets SIGKILL `margin` before. The guardian
  // keeps the same deadline, so it holds while this process is stopped too.
  void arm_deadline(std::chrono::steady_clock::time_point valid_until) {
    if (!running_) return;
    tell_guardian(guard_deadline(valid_until - kill_margin()));
    if (!deadline_timer_) deadline_timer_ = make_timer(session_.loop(), this);
    auto left = std::chrono::duration_cast<milliseconds>(valid_until - std::chrono::steady_clock::now()) -
                kill_margin();
    uv_timer_start(
        deadline_timer_.get(), [](uv_timer_t* h) { owner_of<Runner>(h)->on_deadline(); },
        static_cast<std::uint64_t>(std::max<milliseconds::rep>(left.count(), 0)), 0);
  }

  milliseconds kill_margin() const { return std::min(milliseconds{100}, inv_.ttl / 10); }

  // Not left to the guardian alone (it may be stopped): it is killed, and
  // what it leaves becomes ours and is killed when libuv reports its end.
  void on_deadline() {
    if (!running_) return;
    if (!lost_) lost_ = make_error_code(errc::expired);
    complain("the lock on '" + inv_.resource + "' is valid for " + std::to_string(kill_margin().count()) +
             " ms more and no renewal succeeded; sending SIGKILL to " + inv_.command[0] +
             " and all it started");
    tell_guardian(guard_signal(SIGKILL));
    uv_process_kill(child_.get(), SIGKILL);
  }

  // The guardian passes it on to every process of CMD's (see guardian.hpp).
  // A line is far below the pipe's buffer; a full pipe means the guardian is
  // stuck, and its deadline still holds.
  void tell_guardian(const std::string& line) {
    if (watch_ < 0) return;
    if (write(watch_, line.data(), line.size()) < 0)
      return;                                              // the guardian is gone: redlock's own checks act
    if (running_) uv_process_kill(child_.get(), SIGCONT);  // a stopped guardian would not act on it
  }

  // CMD runs under a guardian, our own binary (see guardian.hpp), which
  // watches the read end of a pipe: a descriptor above the ones a caller
  // hands CMD (3, 4...), given to it on its command line.
  void spawn() {
    std::vector<std::string> env = child_environment(*lock_);
    int watch[2];
    if (pipe2(watch, O_CLOEXEC | O_NONBLOCK) != 0) {
      spawn_failed(uv_translate_sys_error(errno));
      return;
    }
    watch_ = watch[1];
    constexpr int high_fd = 100;
    int inherited = fcntl(watch[0], F_DUPFD, high_fd);  // without FD_CLOEXEC: the guardian gets it
    close(watch[0]);
    if (inherited < 0) {
      spawn_failed(uv_translate_sys_error(errno));
      return;
    }
    std::vector<std::string> args = {"redlock", guard_arg, std::to_string(inherited)};
    args.insert(args.end(), inv_.command.begin(), inv_.command.end());
    std::vector<char*> env_ptrs = pointers(env);
    std::vector<char*> arg_ptrs = pointers(args);
    std::array<uv_stdio_container_t, 3> stdio{};
    for (int fd = 0; fd < 3; ++fd) {
      stdio[fd].flags = UV_INHERIT_FD;
      stdio[fd].data.fd = fd;
    }
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
    had_terminal_ = in_foreground();  // before the guardian takes it
    int rc = uv_spawn(session_.loop(), child_.get(), &options);
    close(inherited);
    child_.get()->data = this;
    if (rc != 0) {
      spawn_failed(rc);
      return;
    }
    running_ = true;
  }

  // Our group has the controlling terminal's foreground (the guardian takes it).
  static bool in_foreground() {
    int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (tty < 0) return false;
    bool ours = tcgetpgrp(tty) == getpgrp();
    close(tty);
    return ours;
  }

  void spawn_failed(int rc) {
    child_.close();
    complain("cannot start " + inv_.command[0] + ": " + uv_strerror(rc));
    status_ = exit_status::cannot_execute;
    release();
  }

  void on_signal(int signum) {
    if (running_) {
      tell_guardian(guard_signal(signum));
      return;
    }
    if (lock_ || interrupted_) return;  // releasing already
    // Still waiting for the lock: stop waiting, exit as the signal would have.
    interrupted_ = true;
    line_.stop();
    status_ = 128 + signum;
    died_of_ = signum;
    finish();
  }

  // The guardian exited: CMD has, and the guardian killed whatever CMD left.
  // A guardian killed from outside could not: what it left is ours now (we
  // subreap too), and nothing of it may outlive the lock.
  void on_exit(std::int64_t status, int term_signal) {
    died_of_ = term_signal;
    if (!kill_descendants()) complain("some of " + inv_.command[0] + "'s processes would not die");
    take_terminal_back(child_.get()->pid);
    running_ = false;
    kill_timer_.close();
    deadline_timer_.close();
    child_.close();
    status_ = lost_ ? exit_status::lost : term_signal != 0 ? 128 + term_signal : static_cast<int>(status);
    release();
  }

  // A guardian killed from outside had no time to give the terminal back.
  static void take_terminal_back(pid_t group) {
    int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (tty < 0) return;
    if (tcgetpgrp(tty) == group) tcsetpgrp(tty, getpgrp());  // SIGTTOU is ignored while CMD runs
    close(tty);
  }

  void on_lost(std::error_code why) {
    lost_ = why;
    if (!running_) return;
    complain("lost the lock on '" + inv_.resource + "' (" + why.message() + "); sending SIGTERM to " +
             inv_.command[0] + " and all it started");
    tell_guardian(guard_signal(SIGTERM));
    kill_timer_ = make_timer(session_.loop(), this);
    uv_timer_start(
        kill_timer_.get(), [](uv_timer_t* h) { owner_of<Runner>(h)->on_kill_after(); },
        static_cast<std::uint64_t>(inv_.kill_after.count()), 0);
  }

  void on_kill_after() {
    if (!running_) return;
    complain(inv_.command[0] + " still running " + duration_text(inv_.kill_after) +
             " after SIGTERM; sending SIGKILL");
    tell_guardian(guard_signal(SIGKILL));
  }

  // After a loss too: our value may remain on some masters (the keep left it).
  void release() {
    auto done = [this](std::error_code ec) {
      if (ec && !lost_) complain("releasing '" + inv_.resource + "': " + ec.message());
      finish();
    };
    if (!election_) return session_.client().unlock(*lock_, done);
    // A lost leadership is no longer the Election's to resign: its value goes as a lock's.
    if (lost_) return session_.client().unlock(*lock_, done);
    election_->resign(done);
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
    election_.reset();
    session_.client().close(nullptr);
  }

  const Invocation& inv_;
  // session_ is declared first, so it is destroyed last: the handles below
  // close into its loop.
  Session session_;
  WaitLine line_;
  std::vector<Handle<uv_signal_t>> signals_;
  Handle<uv_process_t> child_;
  Timer kill_timer_;
  Timer deadline_timer_;
  bool had_terminal_ = false;  // when CMD started: Ctrl-C then reaches CMD's group, not ours
  int died_of_ = 0;            // the signal that ended the guardian (CMD's) or our wait
  int watch_ = -1;  // the write end of the guardian's pipe: closed, the guardian kills all of CMD's
  std::optional<Lock> lock_;
  std::unique_ptr<Election> election_;  // --elect
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
