#include "guardian.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "args.hpp"

namespace redlock::cli {
namespace {

// The guardian leads CMD's group, so what the terminal sends that group
// reaches it too. It must outlive all of these; CMD gets them as they come.
constexpr int group_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU};

// Ctrl-C after Ctrl-Z: CMD is stopped with the signal pending; continue it so
// that the signal acts (otherwise the terminal would hang).
void continue_group(int) {
  kill(0, SIGCONT);
}

void set_dispositions(bool guardian) {
  for (int signum : group_signals) {
    bool stops = signum == SIGTSTP || signum == SIGTTIN || signum == SIGTTOU;
    struct sigaction action {};
    action.sa_handler = !guardian ? SIG_DFL : stops ? SIG_IGN : continue_group;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(signum, &action, nullptr);
  }
}

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// The controlling terminal, when `redlock run`'s group had its foreground:
// then CMD's group takes it. Returns the terminal (or -1) and the group to
// give it back to.
int take_terminal(pid_t& give_back) {
  give_back = -1;
  int tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (tty < 0) return -1;
  pid_t parent_group = getpgid(getppid());
  // SIGTTOU is ignored here: a background group may then take the terminal.
  if (parent_group > 0 && tcgetpgrp(tty) == parent_group && tcsetpgrp(tty, getpgrp()) == 0) {
    give_back = parent_group;
  }
  return tty;
}

void give_terminal_back(int tty, pid_t give_back) {
  if (tty >= 0 && give_back > 0 && tcgetpgrp(tty) == getpgrp()) tcsetpgrp(tty, give_back);
}

// A process's parent, from /proc; 0 when it is gone.
pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close == std::string::npos || close + 4 >= text.size()) return 0;
  // After "pid (comm) ": the state, then the parent's pid.
  return static_cast<pid_t>(std::strtol(text.c_str() + close + 4, nullptr, 10));
}

// Every process whose chain of parents leads to us (our subreaping makes
// orphans our children), read from /proc.
std::map<pid_t, pid_t> descendants() {
  std::map<pid_t, pid_t> parent;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* entry = readdir(proc)) {
      char* end = nullptr;
      long pid = std::strtol(entry->d_name, &end, 10);
      if (pid > 0 && *end == '\0') parent[static_cast<pid_t>(pid)] = parent_of(static_cast<pid_t>(pid));
    }
    closedir(proc);
  }
  std::map<pid_t, pid_t> found;
  pid_t self = getpid();
  for (const auto& [pid, ppid] : parent) {
    pid_t up = ppid;
    for (int depth = 0; depth < 4096 && up > 1 && up != self; ++depth) {
      auto it = parent.find(up);
      up = it == parent.end() ? 0 : it->second;
    }
    if (up == self) found[pid] = ppid;
  }
  return found;
}

// Signals the descendants found, each through a pidfd taken after checking
// that the pid still has the parent the scan saw: a pid that ended and was
// reused meanwhile by a process not ours is left alone.
std::size_t signal_found(const std::map<pid_t, pid_t>& found, int signum) {
  for (const auto& [pid, ppid] : found) {
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0) continue;  // gone
    if (parent_of(pid) == ppid) syscall(SYS_pidfd_send_signal, pidfd, signum, nullptr, 0);
    close(pidfd);
  }
  return found.size();
}

// Sends `signum` to every process of CMD's. One that asks them to end also
// continues stopped ones, so that it acts (Ctrl-C after Ctrl-Z, a job
// brought back with fg that stopped on the terminal).
void signal_all(int signum) {
  std::map<pid_t, pid_t> found = descendants();
  signal_found(found, signum);
  if (signum == SIGHUP || signum == SIGINT || signum == SIGQUIT || signum == SIGTERM)
    signal_found(found, SIGCONT);
}

// Orphans of CMD's that ended (we subreap them): reaped as they come, CMD
// itself left for the caller.
void reap_orphans(pid_t child) {
  for (int i = 0; i < 1024; ++i) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0 || info.si_pid == child)
      return;
    waitpid(info.si_pid, nullptr, 0);
  }
}

[[noreturn]] void lost(int tty, pid_t give_back) {
  give_terminal_back(tty, give_back);  // first: the shell may read the terminal at once
  kill_descendants();
  _exit(exit_status::lost);
}

[[noreturn]] void exec_command(char** command, const sigset_t& unblock) {
  set_dispositions(false);
  sigprocmask(SIG_UNBLOCK, &unblock, nullptr);  // what came meanwhile acts now
  execvp(command[0], command);
  int error = errno;
  std::fprintf(stderr, "redlock: %s: %s\n", command[0],
               error == ENOENT ? "command not found" : std::strerror(error));
  _exit(error == ENOENT ? exit_status::not_found : exit_status::cannot_execute);
}

// Applies the lines `redlock run` wrote; false once the pipe has closed.
bool read_orders(int watch, std::string& pending, std::int64_t& deadline) {
  char bytes[256];
  ssize_t got = read(watch, bytes, sizeof bytes);
  if (got < 0) return errno == EINTR || errno == EAGAIN;
  if (got == 0) return false;
  pending.append(bytes, static_cast<std::size_t>(got));
  for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
    std::string line = pending.substr(0, end);
    pending.erase(0, end + 1);
    if (line.rfind("signal ", 0) == 0) signal_all(std::atoi(line.c_str() + 7));
    if (line.rfind("deadline ", 0) == 0) deadline = std::strtoll(line.c_str() + 9, nullptr, 10);
  }
  return true;
}

}  // namespace

bool kill_descendants() {
  for (int round = 0; round < 200; ++round) {
    std::size_t left = signal_found(descendants(), SIGKILL);
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (left == 0) return true;
    usleep(5000);
  }
  return false;
}

std::string guard_signal(int signum) {
  return "signal " + std::to_string(signum) + "\n";
}

std::string guard_deadline(std::chrono::steady_clock::time_point deadline) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  return "deadline " + std::to_string(ns) + "\n";
}

int guard(char** argv) {
  int watch = std::atoi(argv[0]);
  char** command = argv + 1;
  fcntl(watch, F_SETFD, FD_CLOEXEC);
  // Not "redlock...": `pkill -9 redlock` must not take the guardian with it.
  prctl(PR_SET_NAME, "lock-guardian");
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  setpgid(0, 0);
  set_dispositions(true);
  pid_t give_back = -1;
  int tty = take_terminal(give_back);
  // Blocked across the fork: a signal for the group in between stays
  // pending in CMD and acts once CMD has its own dispositions.
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int signum : group_signals) sigaddset(&blocked, signum);
  sigprocmask(SIG_BLOCK, &blocked, nullptr);
  pid_t child = fork();
  if (child == 0) exec_command(command, blocked);
  sigprocmask(SIG_UNBLOCK, &blocked, nullptr);
  if (child < 0) {
    std::fprintf(stderr, "redlock: cannot start %s: %s\n", command[0], std::strerror(errno));
    give_terminal_back(tty, give_back);
    return exit_status::cannot_execute;
  }
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  std::string pending;
  std::int64_t deadline = 0;
  int status = 0;
  for (;;) {
    int wait_ms = -1;
    if (deadline != 0) {
      std::int64_t left = deadline - now_ns();
      if (left <= 0) lost(tty, give_back);  // the lock is about to end: nothing of CMD's may run on
      wait_ms = static_cast<int>(std::min<std::int64_t>(left / 1'000'000 + 1, 60'000));
    }
    // Without pidfd_open (a kernel before 5.3), CMD's end is polled for.
    if (pidfd < 0 && (wait_ms < 0 || wait_ms > 20)) wait_ms = 20;
    pollfd fds[2] = {{watch, POLLIN, 0}, {pidfd, POLLIN, 0}};
    if (poll(fds, pidfd >= 0 ? 2 : 1, wait_ms) < 0 && errno != EINTR) lost(tty, give_back);
    if (fds[0].revents != 0 && !read_orders(watch, pending, deadline)) lost(tty, give_back);
    if (waitpid(child, &status, WNOHANG) == child) break;
    reap_orphans(child);
  }
  give_terminal_back(tty, give_back);
  kill_descendants();
  if (WIFSIGNALED(status)) {
    int signum = WTERMSIG(status);
    if (signum == SIGINT) {
      // Die of it too, so that a shell running `redlock run` in a loop stops.
      signal(SIGINT, SIG_DFL);
      kill(getpid(), SIGINT);
    }
    return 128 + signum;
  }
  return WEXITSTATUS(status);
}

}  // namespace redlock::cli
