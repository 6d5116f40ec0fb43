#pragma once

#include "args.hpp"

namespace redlock::cli {

/// `redlock run`: acquire, run CMD while keeping the lock, release; returns
/// CMD's exit status or one of exit_status.
int run_command(const Invocation& inv);

}  // namespace redlock::cli
