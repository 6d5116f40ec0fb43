#pragma once

#include "args.hpp"

namespace redlock::cli {

/// `redlock acquire`, `extend` and `release`: one call each; returns the exit status.
int acquire_command(const Invocation& inv);
int extend_command(const Invocation& inv);
int release_command(const Invocation& inv);

}  // namespace redlock::cli
