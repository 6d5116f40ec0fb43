#pragma once

#include <sys/types.h>

namespace redlock::test {

/// The descriptors a child gets as its stdin, stdout and stderr.
struct ChildStdio {
  int in;
  int out;
  int err;
};

/// fork + execve(argv[0], argv, envp) for the test kit's child processes.
/// The child dies with the thread that spawned it (PR_SET_PDEATHSIG), starts
/// with no signal blocked and SIGPIPE at its default, gets `stdio`, and
/// inherits no descriptor above 2 (hiredis and test sockets lack CLOEXEC).
/// With `own_group` it leads a process group of its own, so that the whole
/// group can be signalled. Everything must be prepared before the call:
/// between fork and exec only async-signal-safe calls run (the test may have
/// other threads). Returns the pid, or -1 with errno set when fork fails.
pid_t spawn_child(char* const* argv, char* const* envp, ChildStdio stdio, bool own_group);

}  // namespace redlock::test
