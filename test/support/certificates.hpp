#pragma once

#include <string>
#include <vector>

namespace redlock::test {

/// Test certificates, made with the `openssl` command in a temporary
/// directory that the destructor removes: a CA, certificates it signed for
/// the server (localhost and 127.0.0.1), a client, a server of another name
/// and an expired server, and a second CA that signed none of them. EC P-256
/// keys, unencrypted PEM. Throws std::runtime_error with openssl's output
/// when a step fails.
class Certificates {
 public:
  Certificates();
  ~Certificates();
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;

  /// <dir>/<name>: ca.crt, server.crt/.key, client.crt/.key,
  /// other-name.crt/.key (DNS:other.invalid only), expired.crt/.key,
  /// other-ca.crt.
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  void openssl(std::vector<std::string> args) const;
  void make_ca(const std::string& name) const;
  void make_signed(const std::string& name, const std::string& subject_alt_names, int days) const;

  std::string dir_;
};

}  // namespace redlock::test
