#pragma once

#include <chrono>
#include <string>

namespace redlock::cli {

/// How `redlock run` starts CMD: it runs itself as
///   redlock GUARD_ARG FD CMD...
/// where FD is the read end of a pipe whose write end only `redlock run`
/// holds. That process, the guardian, becomes a child subreaper (whatever CMD
/// starts stays its descendant, even in another process group or session),
/// leads a process group of its own and takes the terminal's foreground when
/// `redlock run`'s group had it (so Ctrl-C reaches CMD once), then starts
/// CMD. It kills every descendant, and reaps them, when:
/// - the pipe closes: `redlock run` is gone (even SIGKILLed);
/// - the deadline `redlock run` last wrote passes: the lock's validity is
///   about to end, whether or not `redlock run` is running to say so;
/// - CMD exits: what it left behind must not outlive the lock.
/// It then gives the terminal back and exits with CMD's status (128 + N for a
/// signal N; it dies of SIGINT itself when CMD did, so a calling shell
/// stops too), or with exit_status::lost.
constexpr const char* guard_arg = "--internal-guard";

/// The guardian's main: `argv` holds FD and then CMD's argv, null-terminated.
int guard(char** argv);

/// Kills (SIGKILL) and reaps every descendant of this process, found through
/// /proc: for a child subreaper, everything its children ever started. False
/// if some were still there after a second.
bool kill_descendants();

/// What `redlock run` writes to the guardian, one line each.
/// Send `signum` to every process of CMD's.
std::string guard_signal(int signum);
/// Kill every process of CMD's at `deadline` (steady_clock, CLOCK_MONOTONIC).
std::string guard_deadline(std::chrono::steady_clock::time_point deadline);

}  // namespace redlock::cli
