#include "tls.hpp"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <stdexcept>

namespace redlock {
namespace {

struct CtxFree {
  void operator()(SSL_CTX* ctx) const noexcept { SSL_CTX_free(ctx); }
};
struct SslFree {
  void operator()(SSL* ssl) const noexcept { SSL_free(ssl); }
};

// The oldest queued OpenSSL error, in its own words; clears the queue.
std::string take_openssl_error(unsigned long* code = nullptr) {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (code) *code = e;
  if (e == 0) return "no reason given";
  const char* reason = ERR_reason_error_string(e);
  if (reason) return reason;
  std::array<char, 256> text{};
  ERR_error_string_n(e, text.data(), text.size());
  return text.data();
}

[[noreturn]] void bad_file(const char* field, const std::string& path) {
  throw std::invalid_argument("redlock::Options: tls." + std::string(field) + " '" + path +
                              "' cannot be used: " + take_openssl_error());
}

bool is_ip_address(const std::string& host) {
  std::array<unsigned char, sizeof(in6_addr)> address{};
  return inet_pton(AF_INET, host.c_str(), address.data()) == 1 ||
         inet_pton(AF_INET6, host.c_str(), address.data()) == 1;
}

bool any_tls(const Options& options) {
  return std::any_of(options.masters.begin(), options.masters.end(), [](const Endpoint& e) { return e.tls; });
}

// A TLS record that is not one: the other side is not speaking TLS.
bool not_tls(unsigned long code) {
  int reason = ERR_GET_REASON(code);
  return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
         reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_RECORD_LENGTH_MISMATCH;
}

}  // namespace

struct TlsContext::Impl {
  std::unique_ptr<SSL_CTX, CtxFree> ctx;
  TlsOptions options;
};

TlsContext::TlsContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
}
TlsContext::~TlsContext() = default;

std::shared_ptr<const TlsContext> TlsContext::for_options(const Options& options) {
  if (!any_tls(options)) return nullptr;
  const TlsOptions& o = options.tls;
  auto impl = std::make_unique<Impl>();
  impl->options = o;
  impl->ctx.reset(SSL_CTX_new(TLS_client_method()));
  SSL_CTX* ctx = impl->ctx.get();
  if (!ctx) throw std::runtime_error("redlock: cannot set up TLS: " + take_openssl_error());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (o.verify_peer) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (o.ca_file.empty() && o.ca_path.empty()) {
      if (SSL_CTX_set_default_verify_paths(ctx) != 1) bad_file("ca_file", "(the system's default store)");
    } else if (SSL_CTX_load_verify_locations(ctx, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                             o.ca_path.empty() ? nullptr : o.ca_path.c_str()) != 1) {
      bad_file(o.ca_file.empty() ? "ca_path" : "ca_file", o.ca_file.empty() ? o.ca_path : o.ca_file);
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) bad_file("cert_file", o.cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      bad_file("key_file", o.key_file);
    if (SSL_CTX_check_private_key(ctx) != 1) bad_file("key_file", o.key_file);
  }
  if (!o.verify_peer && options.diagnostics) {
    options.diagnostics(
        "TLS certificate verification is off (TlsOptions::verify_peer = false): the rediss:// masters are "
        "not authenticated, and anyone on the path can pose as one");
  }
  return std::make_shared<const TlsContext>(std::move(impl));
}

std::string TlsContext::server_name(const std::string& host) const {
  return impl_->options.server_name.empty() ? host : impl_->options.server_name;
}

struct TlsSession::Impl {
  std::unique_ptr<SSL, SslFree> ssl;
  BIO* in = nullptr;   // owned by ssl: what the socket read
  BIO* out = nullptr;  // owned by ssl: what the socket must write
  std::string name;
  bool done = false;
  std::string error;
  // What SSL_read decrypts into, one per connection: a buffer per read
  // would cost an allocation, or 16 KiB zeroed, per reply.
  static constexpr std::size_t chunk_size = 16 * 1024;
  std::unique_ptr<char[]> chunk = std::make_unique<char[]>(chunk_size);

  // Why the handshake failed: the certificate check's verdict when it
  // failed, else OpenSSL's reason, with what to do about the usual causes.
  void handshake_failed() {
    long verdict = SSL_get_verify_result(ssl.get());
    unsigned long code = 0;
    std::string reason = take_openssl_error(&code);
    if (verdict != X509_V_OK) {
      error = std::string("certificate verify failed: ") + X509_verify_cert_error_string(verdict);
      if (verdict == X509_V_ERR_HOSTNAME_MISMATCH || verdict == X509_V_ERR_IP_ADDRESS_MISMATCH) {
        error +=
            " (the certificate does not name '" + name + "'; TlsOptions::server_name sets the name to check)";
      } else if (verdict == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY ||
                 verdict == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
                 verdict == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN) {
        error += " (is its CA in TlsOptions::ca_file?)";
      }
    } else if (not_tls(code)) {
      error = reason + " (the server does not speak TLS on this port: a plain port takes redis://)";
    } else {
      error = reason;
    }
  }

  void failed_after_handshake(int rc) {
    int kind = SSL_get_error(ssl.get(), rc);
    unsigned long code = 0;
    std::string reason = take_openssl_error(&code);
    if (kind == SSL_ERROR_ZERO_RETURN) {
      error = "the server closed the TLS connection";
    } else if (ERR_GET_REASON(code) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED) {
      error = reason + " (the master asks for a client certificate: TlsOptions::cert_file and key_file)";
    } else {
      error = reason;
    }
  }
};

TlsSession::TlsSession(const TlsContext& context, const std::string& host) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.name = context.server_name(host);
  s.ssl.reset(SSL_new(context.impl().ctx.get()));
  s.in = BIO_new(BIO_s_mem());
  s.out = BIO_new(BIO_s_mem());
  if (!s.ssl || !s.in || !s.out) {
    BIO_free(s.in);
    BIO_free(s.out);
    throw std::bad_alloc();
  }
  BIO_set_mem_eof_return(s.in, -1);  // empty means "no bytes yet", not end of stream
  SSL_set_bio(s.ssl.get(), s.in, s.out);
  SSL_set_connect_state(s.ssl.get());
  if (!is_ip_address(s.name)) SSL_set_tlsext_host_name(s.ssl.get(), s.name.c_str());
  if (context.impl().options.verify_peer) {
    X509_VERIFY_PARAM* param = SSL_get0_param(s.ssl.get());
    if (is_ip_address(s.name)) {
      X509_VERIFY_PARAM_set1_ip_asc(param, s.name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      X509_VERIFY_PARAM_set1_host(param, s.name.c_str(), 0);
    }
  }
}

TlsSession::~TlsSession() = default;

void TlsSession::receive(const char* data, std::size_t size) {
  BIO_write(impl_->in, data, static_cast<int>(size));
}

TlsSession::Progress TlsSession::handshake() {
  if (impl_->done) return Progress::done;
  ERR_clear_error();
  int rc = SSL_do_handshake(impl_->ssl.get());
  if (rc == 1) {
    impl_->done = true;
    return Progress::done;
  }
  int kind = SSL_get_error(impl_->ssl.get(), rc);
  if (kind == SSL_ERROR_WANT_READ || kind == SSL_ERROR_WANT_WRITE) return Progress::more;
  impl_->handshake_failed();
  return Progress::failed;
}

bool TlsSession::handshake_done() const {
  return impl_->done;
}

bool TlsSession::read(std::string& plain) {
  for (;;) {
    ERR_clear_error();
    int rc = SSL_read(impl_->ssl.get(), impl_->chunk.get(), static_cast<int>(Impl::chunk_size));
    if (rc > 0) {
      plain.append(impl_->chunk.get(), static_cast<std::size_t>(rc));
      continue;
    }
    if (SSL_get_error(impl_->ssl.get(), rc) == SSL_ERROR_WANT_READ) return true;
    impl_->failed_after_handshake(rc);
    return false;
  }
}

bool TlsSession::write(std::string_view plain) {
  // A memory BIO takes everything: one SSL_write per buffer is enough.
  if (plain.empty()) return true;
  ERR_clear_error();
  int rc = SSL_write(impl_->ssl.get(), plain.data(), static_cast<int>(plain.size()));
  if (rc == static_cast<int>(plain.size())) return true;
  impl_->failed_after_handshake(rc);
  return false;
}

void TlsSession::take_output(std::string& into) {
  into.resize(BIO_ctrl_pending(impl_->out));
  if (!into.empty()) {
    int n = BIO_read(impl_->out, into.data(), static_cast<int>(into.size()));
    into.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
}

const std::string& TlsSession::error() const {
  return impl_->error;
}

}  // namespace redlock
