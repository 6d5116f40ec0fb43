// What every example does with its command line: the masters are named on it
// (never a default the user did not ask for), --help prints the usage, and
// anything it cannot use prints the usage and exits 64 (EX_USAGE).
#pragma once

#include <redlock/redlock.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

namespace example {

constexpr int usage_error = 64;  // EX_USAGE from <sysexits.h>

[[noreturn]] inline void usage(const char* text, int status) {
  std::fprintf(status == 0 ? stdout : stderr, "%s", text);
  std::exit(status);
}

/// True when `arg` asks for help.
inline bool is_help(std::string_view arg) {
  return arg == "--help" || arg == "-h";
}

/// Appends the master URI `arg` to `options`, or prints why it is no URI and
/// the usage, and exits 64.
inline void add_master(redlock::Options& options, const char* arg, const char* usage_text) {
  if (std::string_view(arg).rfind('-', 0) == 0) {
    std::fprintf(stderr, "unknown option '%s'\n", arg);
    usage(usage_text, usage_error);
  }
  try {
    options.masters.push_back(redlock::Endpoint::parse(arg));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bad master URI '%s': %s\n", arg, e.what());
    usage(usage_text, usage_error);
  }
}

/// Options with the masters argv[first..argc) names; --help anywhere prints
/// the usage and exits 0, no master at all exits 64. Diagnostics (a master
/// that cannot be reached, and why) go to stderr.
inline redlock::Options masters_from(int argc, char** argv, int first, const char* usage_text) {
  for (int i = 1; i < argc; ++i) {
    if (is_help(argv[i])) usage(usage_text, 0);
  }
  redlock::Options options;
  for (int i = first; i < argc; ++i) add_master(options, argv[i], usage_text);
  if (options.masters.empty()) {
    std::fprintf(stderr, "no master named\n");
    usage(usage_text, usage_error);
  }
  options.diagnostics = [](std::string_view line) {
    std::fprintf(stderr, "redlock: %.*s\n", static_cast<int>(line.size()), line.data());
  };
  return options;
}

/// After errc::unavailable: which masters failed, and why.
template <class Locks>
void print_master_errors(Locks& locks) {
  for (const redlock::MasterError& e : locks.master_errors())
    std::fprintf(stderr, "  %s: %s\n", e.endpoint.c_str(), e.cause.c_str());
}

}  // namespace example
