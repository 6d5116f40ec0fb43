#pragma once

// One libuv loop and one Client for one command line, and what every
// subcommand shares: exit statuses for errors, messages on stderr.

#include <redlock/client.hpp>
#include <redlock/lock.hpp>

#include <uv.h>

#include <memory>
#include <string>
#include <system_error>

#include "args.hpp"

namespace redlock::cli {

/// A libuv loop. The destructor runs it until every handle has closed, then
/// closes it: whatever used it must be destroyed (or closed) first.
class Loop {
 public:
  Loop();
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  uv_loop_t* get() { return loop_.get(); }
  /// Runs the loop until nothing is left to do.
  void run();

 private:
  std::unique_ptr<uv_loop_t> loop_;
};

/// The loop and a Client on it, which prints its diagnostics on stderr.
class Session {
 public:
  explicit Session(const Options& options);

  uv_loop_t* loop() { return loop_.get(); }
  Client& client() { return *client_; }
  void run() { loop_.run(); }

 private:
  // client_ is declared after loop_, so it is destroyed (and its handles
  // start closing) before the loop finishes them.
  Loop loop_;
  std::unique_ptr<Client> client_;
};

/// `options` with its diagnostics printed on stderr.
Options with_diagnostics(Options options);

/// The exit status for a failed call: `conflict` for not_acquired and
/// timeout, 1 for not_held, 69 unavailable, 64 invalid_argument, 70 otherwise.
int status_for(std::error_code error, int conflict);

/// "redlock: <text>" on stderr.
void complain(const std::string& text);

/// 'text' quoted for a POSIX shell when it needs to be.
std::string shell_quote(const std::string& text);

/// The lock as shell assignments (REDLOCK_RESOURCE=..., one a line).
std::string describe(const Lock& lock);

}  // namespace redlock::cli
