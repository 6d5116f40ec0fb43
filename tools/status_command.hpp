#pragma once

#include <redlock/inspect.hpp>

#include <string>

#include "args.hpp"

namespace redlock::cli {

/// `redlock status`: 0 when a quorum of masters answered, 69 otherwise.
int status_command(const Invocation& inv);

/// The inspection as text for people, and as one JSON object.
std::string status_text(const Inspection& inspection);
std::string status_json(const Inspection& inspection);

}  // namespace redlock::cli
