#include "leader_command.hpp"

#include <uv.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <vector>

#include "session.hpp"
#include "status_command.hpp"
#include "uv_handle.hpp"

namespace redlock::cli {

std::string leader_text(const std::string& name, const Leader& leader, bool json) {
  if (json) {
    if (!leader.present) return "{\"election\":" + json_string(name) + ",\"leader\":null}";
    return "{\"election\":" + json_string(name) + ",\"leader\":{\"id\":" + json_string(leader.id) +
           ",\"value\":" + json_string(leader.value) + ",\"term\":" + std::to_string(leader.term) + "}}";
  }
  if (!leader.present) return printable(name) + ": no leader";
  return printable(name) + ": led by " + printable(leader.id) + " (term " + std::to_string(leader.term) +
         "), value " + printable(leader.value);
}

namespace {

// --watch: every change on a line of its own until SIGINT or SIGTERM.
int watch(Session& session, std::unique_ptr<Election>& election, const Invocation& inv) {
  std::vector<Handle<uv_signal_t>> signals;
  bool interrupted = false;
  // The observer's timer would keep the loop running: the Election goes first.
  auto stop = [&] {
    interrupted = true;
    for (auto& s : signals) s.close();
    election.reset();
    session.client().close(nullptr);
  };
  for (int signum : {SIGINT, SIGTERM}) {
    signals.emplace_back(session.loop(), &stop, uv_signal_init);
    uv_signal_start(
        signals.back().get(), [](uv_signal_t* h, int) { (*static_cast<decltype(stop)*>(h->data))(); },
        signum);
  }
  election->observe([&](const Leader& leader) {
    std::printf("%s\n", leader_text(inv.resource, leader, inv.json).c_str());
    std::fflush(stdout);
  });
  session.run();
  return interrupted ? 0 : exit_status::software;
}

}  // namespace

int leader_command(const Invocation& inv) {
  Options options = inv.options;
  options.fencing = true;  // an Election's terms are fencing tokens
  Session session(options);
  auto election = std::make_unique<Election>(session.client(), inv.resource, "redlock-cli", inv.ttl);
  if (inv.watch) {
    return watch(session, election, inv);
  }
  std::error_code error = make_error_code(errc::closed);
  Leader leader;
  election->leader([&](std::error_code e, Leader l) {
    error = e;
    leader = std::move(l);
    session.client().close(nullptr);
  });
  session.run();
  election.reset();
  if (error) {
    complain("leader: " + error.message());
    return status_for(error, exit_status::conflict);
  }
  std::printf("%s\n", leader_text(inv.resource, leader, inv.json).c_str());
  return leader.present ? 0 : 1;
}

}  // namespace redlock::cli
