#include "spawn.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace redlock::test {

pid_t spawn_child(char* const* argv, char* const* envp, ChildStdio stdio, bool own_group) {
  const pid_t parent = ::getpid();
  // Blocked across the fork: in the child, until the test's handlers are gone.
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  const pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    if (own_group) ::setpgid(0, 0);
    // The test's own handlers (Catch's, for SIGTERM and the like) must not
    // run in this copy of it: a signal before execve acts as it would after.
    for (int signum = 1; signum < NSIG; ++signum) ::signal(signum, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(stdio.in, STDIN_FILENO);
    ::dup2(stdio.out, STDOUT_FILENO);
    ::dup2(stdio.err, STDERR_FILENO);
    ::close_range(3, ~0U, 0);
    ::execve(argv[0], argv, envp);
    ::_exit(127);
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (child < 0) return -1;
  // Also from here, so the group exists before anyone signals it.
  if (own_group) ::setpgid(child, child);
  return child;
}

}  // namespace redlock::test
