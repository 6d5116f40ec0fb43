#pragma once

// `redlock leader NAME [--watch]`: who leads an election (redlock::Election).

#include <redlock/election.hpp>

#include <string>

#include "args.hpp"

namespace redlock::cli {

/// One line: "NAME: led by ID (term T), value V" or "NAME: no leader"; with
/// `json`, one JSON object.
std::string leader_text(const std::string& name, const Leader& leader, bool json);

/// Prints who leads NAME (--watch: each change until SIGINT or SIGTERM).
/// 0 when someone leads (--watch: when interrupted), 1 when nobody does,
/// 69 when too few masters answer.
int leader_command(const Invocation& inv);

}  // namespace redlock::cli
