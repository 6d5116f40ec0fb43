// TlsContext and TlsSession for a build without OpenSSL (meson -Dtls=disabled):
// a rediss:// master is refused when the Client is constructed, so no session
// is ever made.
#include "tls.hpp"

#include <algorithm>
#include <stdexcept>

namespace redlock {

struct TlsContext::Impl {};
struct TlsSession::Impl {
  std::string error = "redlock was built without TLS";
};

TlsContext::TlsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
}
TlsContext::~TlsContext() = default;

std::shared_ptr<const TlsContext> TlsContext::for_options(const Options& options) {
  bool any =
      std::any_of(options.masters.begin(), options.masters.end(), [](const Endpoint& e) { return e.tls; });
  if (any) {
    throw std::invalid_argument(
        "redlock::Options: a rediss:// master needs TLS, and this redlock was built without it (meson "
        "-Dtls=disabled)");
  }
  return nullptr;
}

std::string TlsContext::server_name(const std::string& host) const {
  return host;
}

TlsSession::TlsSession(const TlsContext&, const std::string&) : impl_(std::make_unique<Impl>()) {
}
TlsSession::~TlsSession() = default;
void TlsSession::receive(const char*, std::size_t) {
}
TlsSession::Progress TlsSession::handshake() {
  return Progress::failed;
}
bool TlsSession::handshake_done() const {
  return false;
}
bool TlsSession::read(std::string&) {
  return false;
}
bool TlsSession::write(std::string_view) {
  return false;
}
void TlsSession::take_output(std::string& into) {
  into.clear();
}
const std::string& TlsSession::error() const {
  return impl_->error;
}

}  // namespace redlock
