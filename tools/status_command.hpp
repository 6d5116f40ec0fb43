#pragma once

#include <redlock/inspect.hpp>

#include <string>

#include "args.hpp"

namespace redlock::cli {

/// `redlock status`: 0 when every master votes, 2 when a quorum does, 69
/// otherwise.
int status_command(const Invocation& inv);

/// `text` with its control characters as '?': what the masters hold may come
/// from anyone, and must not drive the terminal.
std::string printable(std::string text);

/// `text` as a JSON string, quoted and escaped.
std::string json_string(const std::string& text);

/// Who holds a resource: its owner tag, or its value when it carries none
/// (printable).
std::string holder_name(const ResourceReport& r);

/// The inspection as text for people, and as one JSON object.
std::string status_text(const Inspection& inspection);
std::string status_json(const Inspection& inspection);

}  // namespace redlock::cli
