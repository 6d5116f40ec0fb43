#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace redlock::test {

/// A program run as a child process, for tests that drive a built binary
/// (the redlock command). stdin is /dev/null; stdout and stderr go to files in
/// its own temporary directory. The child leads a process group of its own
/// and gets PR_SET_PDEATHSIG(SIGKILL); the destructor SIGKILLs that group (the
/// child and anything it started) and reaps the child, so nothing outlives
/// the test.
class Command {
 public:
  /// Starts `argv` (argv[0] is a path) with `env` ("NAME=value") added to
  /// this process's environment. Throws std::runtime_error if it cannot fork.
  explicit Command(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Command();
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  pid_t pid() const { return pid_; }
  /// Sends `signum` to the child alone.
  void signal(int signum) const;
  /// Polls until the child exits or `deadline` (scaled) passes; its exit
  /// status (128 + N when signal N ended it), or nothing if it still runs.
  std::optional<int> wait(std::chrono::milliseconds deadline);
  /// Whether it has exited (reaps it if so).
  bool exited();
  /// What it wrote so far.
  std::string out() const;
  std::string err() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string dir_;
};

/// Runs `argv` to its end (at most `deadline`, scaled; the test fails with
/// std::runtime_error past it) and returns its exit status, stdout and stderr.
struct Finished {
  int status = -1;
  std::string out;
  std::string err;
};
Finished run_command(std::vector<std::string> argv, std::vector<std::string> env = {},
                     std::chrono::milliseconds deadline = std::chrono::seconds(20));

}  // namespace redlock::test
