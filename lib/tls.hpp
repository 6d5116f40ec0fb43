#pragma once

#include <redlock/options.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace redlock {

/// What every rediss:// master of one Client shares: the trust store, the
/// client certificate and the verification rules (an OpenSSL SSL_CTX).
class TlsContext {
 public:
  /// Null when no master of `options` uses TLS. Throws std::invalid_argument
  /// naming the TlsOptions field and OpenSSL's reason when a file cannot be
  /// used, or when redlock was built without TLS. Says once through
  /// `options.diagnostics` that verification is off, when it is.
  static std::shared_ptr<const TlsContext> for_options(const Options& options);

  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  /// TlsOptions::server_name, or `host` when that is empty.
  std::string server_name(const std::string& host) const;

  struct Impl;
  explicit TlsContext(std::unique_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// One client-side TLS connection whose bytes we carry ourselves (OpenSSL
/// over memory BIOs): what the socket reads goes in through receive(), what
/// must be written comes out of take_output(), after every call.
class TlsSession {
 public:
  enum class Progress { more, done, failed };

  TlsSession(const TlsContext& context, const std::string& host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  /// Bytes read from the socket.
  void receive(const char* data, std::size_t size);
  /// Moves the handshake on with what was received: done once it finished,
  /// failed with error() set.
  Progress handshake();
  bool handshake_done() const;
  /// Appends what could be decrypted so far to `plain`; false when the
  /// connection failed or the server closed it (error() says which).
  bool read(std::string& plain);
  /// Encrypts `plain` into the output; false on failure (error()).
  bool write(std::string_view plain);
  /// The bytes to write to the socket now, in order, in place of what
  /// `into` held (its buffer is reused); empties the output.
  void take_output(std::string& into);
  /// Why the last failing call failed, in words for a diagnostics line.
  const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock
