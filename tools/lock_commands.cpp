#include "lock_commands.hpp"

#include <redlock/error.hpp>

#include <chrono>
#include <cstdio>
#include <limits>

#include "session.hpp"
#include "wait_line.hpp"

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

// Without end: Client::lock treats anything this long as no deadline.
constexpr milliseconds forever = milliseconds::max();

// A lock named on the command line: its validity is not known here, so the
// masters alone decide (extend and unlock compare the value on each one).
Lock named_lock(const Invocation& inv, std::chrono::steady_clock::time_point valid_until) {
  Lock lock;
  lock.resource = inv.resource;
  lock.value = inv.value;
  lock.valid_until = valid_until;
  lock.shared = inv.shared;
  return lock;
}

// A failure prints `false` for `eval "$(redlock acquire ...)"`: an empty
// eval succeeds, and a `set -e` script would go on without the lock.
int print_or_fail(std::error_code error, const Lock& lock, const Invocation& inv, const char* what) {
  if (error) {
    bool conflict = error == errc::timeout || error == errc::not_acquired;
    if (!conflict || inv.verbose || inv.verb != Verb::acquire)
      complain(std::string(what) + " '" + inv.resource + "': " + error.message());
    std::fputs("false\n", stdout);
    return status_for(error, inv.conflict_exit);
  }
  std::fputs(describe(lock).c_str(), stdout);
  return 0;
}

}  // namespace

int acquire_command(const Invocation& inv) {
  Session session(inv.options);
  WaitLine line(session.loop(), inv.options, inv.resource);
  std::error_code error = make_error_code(errc::closed);
  Lock lock;
  auto done = [&](std::error_code ec, Lock l) {
    line.stop();
    error = ec;
    lock = std::move(l);
    session.client().close(nullptr);
  };
  Client& client = session.client();
  if (inv.wait && inv.wait->count() == 0) {
    if (inv.shared) {
      client.try_lock_shared(inv.resource, inv.ttl, done);
    } else {
      client.try_lock(inv.resource, inv.ttl, done);
    }
  } else {
    if (inv.shared) {
      client.lock_shared(inv.resource, inv.ttl, inv.wait.value_or(forever), done);
    } else {
      client.lock(inv.resource, inv.ttl, inv.wait.value_or(forever), done);
    }
    line.start();
  }
  session.run();
  return print_or_fail(error, lock, inv, "acquire");
}

int extend_command(const Invocation& inv) {
  Session session(inv.options);
  std::error_code error = make_error_code(errc::closed);
  Lock lock;
  // The longest ttl from now: extend's own check of the old validity cannot be
  // made here; a value still held on a quorum is the proof that it is ours.
  auto unknown = std::chrono::steady_clock::now() + milliseconds{std::numeric_limits<std::int32_t>::max()};
  session.client().extend(named_lock(inv, unknown), inv.ttl, [&](std::error_code ec, Lock l) {
    error = ec;
    lock = std::move(l);
    session.client().close(nullptr);
  });
  session.run();
  return print_or_fail(error, lock, inv, "extend");
}

int release_command(const Invocation& inv) {
  Session session(inv.options);
  std::error_code error = make_error_code(errc::closed);
  // Validity now: a master that is down gets connect_timeout to come back.
  session.client().unlock(named_lock(inv, std::chrono::steady_clock::now()), [&](std::error_code ec) {
    error = ec;
    session.client().close(nullptr);
  });
  session.run();
  if (error) {
    complain("release '" + inv.resource + "': " + error.message());
    return status_for(error, exit_status::conflict);
  }
  return 0;
}

}  // namespace redlock::cli
