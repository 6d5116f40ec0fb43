#pragma once

namespace redlock::cli {

/// How `redlock run` starts CMD: it runs itself as `redlock GUARD_ARG -- CMD...`
/// with the read end of a pipe at descriptor 3, whose write end only the
/// `redlock run` process holds. That process, the guardian, leads a process
/// group of its own, takes the terminal's foreground when `redlock run` had
/// it (so Ctrl-C reaches CMD once), starts CMD in its group, and ignores the
/// signals `redlock run` sends the group. When the pipe says `redlock run`
/// is gone (it died, even of SIGKILL), it kills the whole group; when CMD
/// exits, it gives the terminal back and exits with CMD's status (128 + N for
/// a signal N), and `redlock run` then kills what CMD left in the group.
constexpr const char* guard_arg = "--internal-guard";
/// The descriptor the guardian watches.
constexpr int guard_fd = 3;

/// The guardian's main: `command` is CMD's argv, null-terminated.
int guard(char** command);

}  // namespace redlock::cli
