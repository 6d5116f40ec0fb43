// redlock: a distributed flock(1). See `redlock --help` and docs/command-line.md.

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "guardian.hpp"
#include "leader_command.hpp"
#include "lock_commands.hpp"
#include "run_command.hpp"
#include "status_command.hpp"

namespace cli = redlock::cli;

namespace {

int dispatch(const cli::Invocation& inv) {
  switch (inv.verb) {
    case cli::Verb::help:
      std::fputs(cli::help_text(inv.help_for).c_str(), stdout);
      return 0;
    case cli::Verb::version:
      std::puts("redlock " REDLOCK_VERSION);
      return 0;
    case cli::Verb::run:
      return cli::run_command(inv);
    case cli::Verb::acquire:
      return cli::acquire_command(inv);
    case cli::Verb::extend:
      return cli::extend_command(inv);
    case cli::Verb::release:
      return cli::release_command(inv);
    case cli::Verb::status:
      return cli::status_command(inv);
    case cli::Verb::leader:
      return cli::leader_command(inv);
  }
  return cli::exit_status::software;
}

}  // namespace

int main(int argc, char** argv) {
  // `redlock run` starts CMD through this same binary (see guardian.hpp).
  if (argc > 3 && std::string(argv[1]) == cli::guard_arg) return cli::guard(argv + 2);
  // A closed standard descriptor would be taken by the first one we open
  // (libuv's, a socket) and handed to CMD, or closed as ours: /dev/null stands in.
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return cli::exit_status::software;
  }
  // A master dying mid-write must cost a vote, not this process. CMD does
  // not inherit this: libuv resets every signal's disposition in the child.
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  cli::Invocation inv;
  try {
    inv = cli::parse(args, cli::Environment{std::getenv("REDLOCK_MASTERS"), std::getenv("REDLOCK_PASSWORD")});
  } catch (const cli::UsageError& e) {
    std::fprintf(stderr, "redlock: %s\n%s\n", e.what(), cli::usage_line(e.verb).c_str());
    // What `eval "$(redlock acquire ...)"` must fail on, as a refusal does.
    if (e.verb == cli::Verb::acquire || e.verb == cli::Verb::extend) std::puts("false");
    return cli::exit_status::usage;
  }
  try {
    return dispatch(inv);
  } catch (const std::invalid_argument& e) {
    // Options the library refused when it set up: a TLS file it cannot use.
    std::fprintf(stderr, "redlock: %s\n", cli::in_cli_words(e.what()).c_str());
    if (inv.verb == cli::Verb::acquire || inv.verb == cli::Verb::extend) std::puts("false");
    return cli::exit_status::usage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redlock: %s\n", e.what());
    return cli::exit_status::software;
  }
}
