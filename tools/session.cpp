#include "session.hpp"

#include <redlock/error.hpp>

#include <cstdio>
#include <stdexcept>

namespace redlock::cli {

Loop::Loop() : loop_(std::make_unique<uv_loop_t>()) {
  int rc = uv_loop_init(loop_.get());
  if (rc != 0) throw std::runtime_error(std::string("uv_loop_init: ") + uv_strerror(rc));
}

Loop::~Loop() {
  uv_run(loop_.get(), UV_RUN_DEFAULT);
  if (uv_loop_close(loop_.get()) != 0) {
    // A handle still open points into the loop: leak it rather than free it.
    static_cast<void>(loop_.release());
  }
}

void Loop::run() {
  uv_run(loop_.get(), UV_RUN_DEFAULT);
}

Options with_diagnostics(Options options) {
  options.diagnostics = [](std::string_view line) { complain(in_cli_words(std::string(line))); };
  return options;
}

Session::Session(const Options& options)
    : client_(std::make_unique<Client>(loop_.get(), with_diagnostics(options))) {
}

int status_for(std::error_code error, int conflict) {
  if (error == errc::not_acquired || error == errc::timeout) return conflict;
  if (error == errc::not_held) return exit_status::conflict;
  if (error == errc::unavailable) return exit_status::unavailable;
  if (error == errc::invalid_argument) return exit_status::usage;
  return exit_status::software;
}

void complain(const std::string& text) {
  std::fprintf(stderr, "redlock: %s\n", text.c_str());
}

std::string shell_quote(const std::string& text) {
  bool plain = !text.empty();
  for (char c : text) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-' || c == '.' || c == '/' || c == ':' || c == '@' || c == '+' || c == ',';
    if (!safe) plain = false;
  }
  if (plain) return text;
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string describe(const Lock& lock) {
  std::string text = "REDLOCK_RESOURCE=" + shell_quote(lock.resource) + "\n";
  text += "REDLOCK_VALUE=" + shell_quote(lock.value) + "\n";
  text += "REDLOCK_TTL_MS=" + std::to_string(lock.ttl.count()) + "\n";
  text += "REDLOCK_VALIDITY_MS=" + std::to_string(lock.validity().count()) + "\n";
  if (lock.fencing_token > 0) text += "REDLOCK_FENCING_TOKEN=" + std::to_string(lock.fencing_token) + "\n";
  return text;
}

}  // namespace redlock::cli
