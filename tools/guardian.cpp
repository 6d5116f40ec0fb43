#include "guardian.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "args.hpp"

namespace redlock::cli {
namespace {

// What the guardian must outlive: the signals `redlock run` sends the group
// (every one it forwards) and job control. Faults (SIGSEGV and the like),
// SIGKILL, SIGSTOP and SIGCHLD keep their dispositions.
constexpr int ignored[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,   SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE,
                           SIGTSTP, SIGTTIN, SIGTTOU, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGPWR};

void set_all(void (*disposition)(int)) {
  for (int signum : ignored) std::signal(signum, disposition);
}

// The terminal on standard input, when this group should have it: the group
// of `redlock run` had the foreground. Returns the group to give it back to.
pid_t take_terminal() {
  if (isatty(STDIN_FILENO) == 0) return -1;
  pid_t parent_group = getpgid(getppid());
  if (parent_group < 0 || tcgetpgrp(STDIN_FILENO) != parent_group) return -1;
  // SIGTTOU is ignored here: a background group may then take the terminal.
  if (tcsetpgrp(STDIN_FILENO, getpgrp()) != 0) return -1;
  return parent_group;
}

[[noreturn]] void exec_command(char** command) {
  set_all(SIG_DFL);
  close(guard_fd);
  execvp(command[0], command);
  int error = errno;
  std::fprintf(stderr, "redlock: %s: %s\n", command[0],
               error == ENOENT ? "command not found" : std::strerror(error));
  _exit(error == ENOENT ? exit_status::not_found : exit_status::cannot_execute);
}

// CMD has exited (not reaped yet).
bool exited(pid_t child) {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == child;
}

// Blocks until CMD exits (true) or the pipe from `redlock run` reports its
// end (false). Bytes on the pipe mean nothing yet.
bool wait_for(pid_t child) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  for (;;) {
    pollfd fds[2] = {{guard_fd, POLLIN, 0}, {pidfd, POLLIN, 0}};
    // Without pidfd_open (a kernel before 5.3), CMD's end is polled for.
    int n = poll(fds, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 50);
    if (n < 0 && errno != EINTR) return false;
    if (pidfd >= 0 ? fds[1].revents != 0 : exited(child)) {
      if (pidfd >= 0) close(pidfd);
      return true;
    }
    if (fds[0].revents != 0) {
      char bytes[64];
      ssize_t got = read(guard_fd, bytes, sizeof bytes);
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return false;
    }
  }
}

}  // namespace

int guard(char** command) {
  setpgid(0, 0);
  set_all(SIG_IGN);
  pid_t give_back = take_terminal();
  pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "redlock: cannot start %s: %s\n", command[0], std::strerror(errno));
    return exit_status::cannot_execute;
  }
  if (child == 0) exec_command(command);
  if (!wait_for(child)) {
    // `redlock run` is gone: nothing keeps the lock any more.
    kill(0, SIGKILL);
    _exit(exit_status::lost);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (give_back > 0) tcsetpgrp(STDIN_FILENO, give_back);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

}  // namespace redlock::cli
