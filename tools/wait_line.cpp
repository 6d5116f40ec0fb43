#include "wait_line.hpp"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "status_command.hpp"

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

constexpr std::uint64_t every_ms = 1000;

std::string seconds_text(milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(d.count()) / 1000.0);
  return text;
}

}  // namespace

WaitLine::WaitLine(uv_loop_t* loop, Options options, std::string resource)
    : loop_(loop), options_(std::move(options)), resource_(std::move(resource)) {
  // The status line speaks for the Client: its diagnostics would repeat.
  options_.diagnostics = nullptr;
}

WaitLine::~WaitLine() {
  stop();
}

void WaitLine::start() {
  if (isatty(STDERR_FILENO) == 0) return;
  started_ = uv_now(loop_);
  inspector_ = std::make_unique<Inspector>(loop_, options_);
  timer_ = make_timer(loop_, this);
  // The first look soon (a short wait shows nothing), then every second.
  uv_timer_start(
      timer_.get(), [](uv_timer_t* h) { owner_of<WaitLine>(h)->tick(); }, 300, every_ms);
}

void WaitLine::stop() {
  timer_.close();
  if (inspector_) inspector_->close(nullptr);
  if (shown_) std::fputs("\r\033[K", stderr);
  shown_ = false;
}

void WaitLine::tick() {
  if (asking_ || !inspector_) return;
  asking_ = true;
  std::weak_ptr<bool> alive = alive_;
  inspector_->inspect({resource_}, [this, alive](std::error_code ec, const Inspection& inspection) {
    if (alive.expired()) return;
    asking_ = false;
    if (ec || !timer_) return;  // closed: stop() ran meanwhile
    show(render(inspection, milliseconds{uv_now(loop_) - started_}, resource_));
  });
}

void WaitLine::show(const std::string& line) {
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

std::string WaitLine::render(const Inspection& inspection, milliseconds waited, const std::string& resource) {
  std::string line = "redlock: waiting " + seconds_text(waited) + " for '" + printable(resource) + "'";
  std::size_t n = inspection.masters.size();
  std::size_t answering = 0;
  for (const MasterReport& m : inspection.masters) answering += m.reachable ? 1 : 0;
  if (answering < n / 2 + 1) {
    return line + ": only " + std::to_string(answering) + " of " + std::to_string(n) + " masters answer";
  }
  if (inspection.resources.empty() || inspection.resources[0].holders == 0) return line + ": free";
  const ResourceReport& r = inspection.resources[0];
  line += ": held by " + holder_name(r) + " on " + std::to_string(r.holders) + " of " +
          std::to_string(inspection.masters.size()) + " masters, ";
  line += r.ttl.count() < 0 ? "no expiry" : seconds_text(r.ttl) + " left";
  return line;
}

}  // namespace redlock::cli
