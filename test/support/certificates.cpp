#include "certificates.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "command.hpp"

namespace redlock::test {
namespace {

std::string find_openssl() {
  for (const char* candidate : {"/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  throw std::runtime_error("the openssl command is not installed (scripts/setup.sh installs it)");
}

}  // namespace

Certificates::Certificates() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/redlock-certs-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
  dir_ = pattern;
  try {
    make_ca("ca");
    make_ca("other-ca");
    make_signed("server", "DNS:localhost,IP:127.0.0.1", 2);
    make_signed("client", "DNS:redlock-test-client", 2);
    make_signed("other-name", "DNS:other.invalid", 2);
    make_signed("expired", "DNS:localhost,IP:127.0.0.1", -1);  // not after the day before it starts
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

Certificates::~Certificates() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void Certificates::openssl(std::vector<std::string> args) const {
  args.insert(args.begin(), find_openssl());
  Finished done = run_command(args);
  if (done.status != 0) {
    std::string line;
    for (const auto& a : args) line += a + " ";
    throw std::runtime_error("failed (" + std::to_string(done.status) + "): " + line + "\n" + done.err);
  }
}

void Certificates::make_ca(const std::string& name) const {
  openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           path(name + ".key"), "-out", path(name + ".crt"), "-days", "2", "-subj",
           "/CN=redlock test " + name});
}

void Certificates::make_signed(const std::string& name, const std::string& subject_alt_names,
                               int days) const {
  openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
           path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=redlock test " + name});
  std::ofstream(path(name + ".ext")) << "subjectAltName=" << subject_alt_names << "\n";
  openssl({"x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.crt"), "-CAkey", path("ca.key"),
           "-CAcreateserial", "-out", path(name + ".crt"), "-days", std::to_string(days), "-extfile",
           path(name + ".ext")});
}

}  // namespace redlock::test
