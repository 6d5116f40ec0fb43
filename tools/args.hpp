#pragma once

// The redlock command's arguments: what each subcommand takes, parsed into an
// Invocation without touching the network, so that every bad input is caught
// before a connection opens (and can be tested without Redis).

#include <redlock/options.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace redlock::cli {

enum class Verb { run, acquire, extend, release, status, leader, help, version };

/// Exit statuses, documented in `redlock --help` and docs/command-line.md. flock(1)'s
/// where it has one (1 for a conflict); sysexits.h otherwise.
namespace exit_status {
constexpr int conflict = 1;      // not acquired within the wait (-E changes it); extend/release: not held
constexpr int degraded = 2;      // status: a quorum votes, but not every master
constexpr int usage = 64;        // EX_USAGE: bad arguments
constexpr int unavailable = 69;  // EX_UNAVAILABLE: too few masters reachable for a quorum
constexpr int software = 70;     // EX_SOFTWARE: anything else that went wrong inside
constexpr int lost = 75;         // EX_TEMPFAIL: the lock was lost while CMD ran; CMD was stopped
constexpr int cannot_execute = 126;
constexpr int not_found = 127;
}  // namespace exit_status

/// Everything one command line asks for.
struct Invocation {
  Verb verb = Verb::help;
  /// help: the subcommand whose help to print (help itself for the overview).
  Verb help_for = Verb::help;
  Options options;
  /// run, acquire, extend, release.
  std::string resource;
  /// extend, release: the lock's value as acquire printed it.
  std::string value;
  /// status: the resources to show (none: masters only).
  std::vector<std::string> resources;
  /// run: CMD and its arguments.
  std::vector<std::string> command;
  std::chrono::milliseconds ttl{30000};
  /// -w: how long to wait for the lock; empty means without end (run and
  /// acquire), -n means zero (one attempt).
  std::optional<std::chrono::milliseconds> wait;
  bool no_wait = false;
  int conflict_exit = exit_status::conflict;
  /// run: how long CMD has between SIGTERM and SIGKILL after a loss.
  std::chrono::milliseconds kill_after{10000};
  bool json = false;
  /// leader --watch: follow every change until interrupted.
  bool watch = false;
  /// run, acquire: say on stderr when the lock was not acquired (a conflict
  /// is silent otherwise, as with flock -n).
  bool verbose = false;
  /// run, acquire, extend, release: a shared lock (Client::lock_shared).
  bool shared = false;
  /// run: one of this many permits (Client::lock_permit); 0: the resource itself.
  int permits = 0;
  /// run --also: more resources taken with RESOURCE, all or none (Client::lock_all).
  std::vector<std::string> also;
  /// run --elect: lead the election RESOURCE (redlock::Election) while CMD runs.
  bool elect = false;
  /// --password-file: where the masters' password is (first line).
  std::string password_file;
};

/// Bad input: what() is one line naming what is wrong; verb says which usage
/// line to print under it.
class UsageError : public std::runtime_error {
 public:
  UsageError(Verb verb, const std::string& message) : std::runtime_error(message), verb(verb) {}
  Verb verb;
};

/// A message of the library's, with the names of its options (TlsOptions
/// fields, a password in the URI) said as this command's flags.
std::string in_cli_words(std::string text);

/// `250ms`, `10s`, `2m`, `1h`: decimal digits and a unit. Throws UsageError
/// (naming `what`) for anything else or above 2^31-1 ms.
std::chrono::milliseconds parse_duration(std::string_view text, std::string_view what, Verb verb);

/// What the environment gives the command line.
struct Environment {
  const char* masters = nullptr;   // REDLOCK_MASTERS: URIs separated by commas, used without -m
  const char* password = nullptr;  // REDLOCK_PASSWORD: for masters whose URI has none
};

/// Parses argv after the program name; throws UsageError for bad input. A
/// master whose URI has no password gets --password-file's (its first line),
/// else REDLOCK_PASSWORD.
Invocation parse(const std::vector<std::string>& args, const Environment& env);
/// The same, with REDLOCK_MASTERS only.
inline Invocation parse(const std::vector<std::string>& args, const char* masters_env) {
  return parse(args, Environment{masters_env, nullptr});
}

/// "usage: redlock run [options] RESOURCE -- CMD [ARGS...]"
std::string usage_line(Verb verb);
/// The full --help text for a subcommand (Verb::help: the overview).
std::string help_text(Verb verb);

}  // namespace redlock::cli
