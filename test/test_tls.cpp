#include <catch2/catch.hpp>

#include <redlock/client.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/calls.hpp"
#include "support/certificates.hpp"
#include "support/cluster.hpp"
#include "support/eventually.hpp"
#include "support/fault_proxy.hpp"
#include "support/holders.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// The certificates are made once for the whole binary (openssl takes a while).
const Certificates& certificates() {
  static const Certificates made;
  return made;
}

ServerOptions tls_server(const std::string& name = "server", bool auth_clients = false) {
  const Certificates& c = certificates();
  ServerOptions o;
  o.tls = ServerOptions::Tls{c.path(name + ".crt"), c.path(name + ".key"), c.path("ca.crt"), auth_clients};
  return o;
}

// rediss:// to `endpoints`, trusting our CA; what the Client says through
// diagnostics goes to `said`.
Options tls_options(std::vector<Endpoint> endpoints, std::shared_ptr<std::vector<std::string>> said) {
  Options o;
  o.masters = std::move(endpoints);
  o.tls.ca_file = certificates().path("ca.crt");
  o.connect_timeout = 1s;
  o.command_timeout = 500ms;
  o.retry_count = 0;
  o.diagnostics = [said](std::string_view line) { said->emplace_back(line); };
  return o;
}

// The same to every master of `masters`.
Options tls_options(Cluster& masters, std::shared_ptr<std::vector<std::string>> said) {
  std::vector<Endpoint> endpoints;
  for (std::size_t i = 0; i < masters.size(); ++i) endpoints.push_back(masters[i].tls_endpoint());
  return tls_options(std::move(endpoints), std::move(said));
}

bool any_says(const std::vector<std::string>& said, const std::string& words) {
  for (const std::string& line : said)
    if (line.find(words) != std::string::npos) return true;
  return false;
}

std::string all_of(const std::vector<std::string>& said) {
  std::string text;
  for (const std::string& line : said) text += line + "\n";
  return text;
}

// A try_lock with one master that must not work, and what the Client said.
void expect_refused(Options options, const std::string& words) {
  LoopFixture loop;
  auto said = std::make_shared<std::vector<std::string>>();
  options.diagnostics = [said](std::string_view line) { said->emplace_back(line); };
  {
    Client client(loop.get(), options);
    Answer a = try_lock(loop, client, "refused", 1s);
    CHECK(a.error == errc::unavailable);
    loop.run_until([&] { return any_says(*said, words); }, 3s);
    INFO(all_of(*said));
    REQUIRE(any_says(*said, words));
    CHECK(any_says(*said, options.masters[0].to_string()));
  }
  REQUIRE(loop.close());
}

}  // namespace

TEST_CASE("lock, extend and unlock over TLS on three masters", "[tls]") {
  Cluster masters(3, tls_server());
  LoopFixture loop;
  auto said = std::make_shared<std::vector<std::string>>();
  {
    Client client(loop.get(), tls_options(masters, said));
    Answer a = try_lock(loop, client, "over-tls", 5s);
    REQUIRE_FALSE(a.error);
    // A round decides at a majority: the third master may answer a moment later.
    CHECK(held_everywhere(masters, "{over-tls}", a.lock.value));

    Answer e = extend(loop, client, a.lock, 20s);
    REQUIRE_FALSE(e.error);
    for (std::size_t i = 0; i < 3; ++i)
      CHECK(eventually([&] { return masters[i].pttl("{over-tls}") > 10000; }));

    CHECK_FALSE(unlock(loop, client, e.lock));
    for (std::size_t i = 0; i < 3; ++i) CHECK_FALSE(masters[i].get("{over-tls}"));

    REQUIRE(loop.run_until([&] { return client.stats().masters[2].state == MasterState::up; }, 2s));
    Stats s = client.stats();
    for (const MasterStats& m : s.masters) {
      CHECK(m.state == MasterState::up);
      CHECK(m.role == "master");
      CHECK(m.endpoint.rfind("rediss://", 0) == 0);
      CHECK(m.votes_failed == 0);
      CHECK(m.rtt > 0us);
    }
    CHECK(s.masters[0].votes_granted >= 2);  // the lock and the extend
  }
  INFO(all_of(*said));
  CHECK(said->empty());
  REQUIRE(loop.close());
}

TEST_CASE("mutual TLS: a master that asks for a client certificate takes ours and refuses none", "[tls]") {
  Cluster masters(1, tls_server("server", true));
  auto said = std::make_shared<std::vector<std::string>>();
  Options with_cert = tls_options(masters, said);
  with_cert.tls.cert_file = certificates().path("client.crt");
  with_cert.tls.key_file = certificates().path("client.key");
  LoopFixture loop;
  {
    Client client(loop.get(), with_cert);
    Answer a = try_lock(loop, client, "mutual", 5s);
    REQUIRE_FALSE(a.error);
    CHECK(masters[0].get("{mutual}") == a.lock.value);
  }
  REQUIRE(loop.close());

  expect_refused(tls_options(masters, said), "certificate");
  CHECK_FALSE(masters[0].get("{refused}"));
}

TEST_CASE("a certificate from a CA we do not trust is refused, and said", "[tls]") {
  Cluster masters(1, tls_server());
  Options o = tls_options(masters, std::make_shared<std::vector<std::string>>());
  o.tls.ca_file = certificates().path("other-ca.crt");
  // redis-server sends our CA along: "self-signed certificate in certificate chain".
  expect_refused(o, "(is its CA in TlsOptions::ca_file?)");
}

TEST_CASE("a certificate for another name is refused; server_name picks the name to check", "[tls]") {
  Cluster masters(1, tls_server("other-name"));
  auto said = std::make_shared<std::vector<std::string>>();
  expect_refused(tls_options(masters, said), "IP address mismatch");

  Options named = tls_options(masters, said);
  named.tls.server_name = "localhost";
  expect_refused(named, "hostname mismatch");

  named.tls.server_name = "other.invalid";
  LoopFixture loop;
  {
    Client client(loop.get(), named);
    Answer a = try_lock(loop, client, "named", 5s);
    CHECK_FALSE(a.error);
  }
  REQUIRE(loop.close());
}

TEST_CASE("an expired certificate is refused, and said", "[tls]") {
  Cluster masters(1, tls_server("expired"));
  expect_refused(tls_options(masters, std::make_shared<std::vector<std::string>>()),
                 "certificate verify failed: certificate has expired");
}

TEST_CASE("verify_peer = false takes any certificate and says so once", "[tls]") {
  Cluster masters(3, tls_server("other-name"));
  auto said = std::make_shared<std::vector<std::string>>();
  Options o = tls_options(masters, said);
  o.tls.ca_file = certificates().path("other-ca.crt");
  o.tls.verify_peer = false;
  LoopFixture loop;
  {
    Client client(loop.get(), o);
    Answer a = try_lock(loop, client, "unverified", 5s);
    CHECK_FALSE(a.error);
    CHECK_FALSE(unlock(loop, client, a.lock));
  }
  REQUIRE(loop.close());
  INFO(all_of(*said));
  REQUIRE(said->size() == 1);
  CHECK(any_says(*said, "verification is off"));
}

TEST_CASE("TLS to a plain port, and plain to a TLS port, are refused with a hint", "[tls]") {
  Cluster masters(1, tls_server());
  Options o = tls_options(masters, std::make_shared<std::vector<std::string>>());

  Options tls_to_plain = o;
  tls_to_plain.masters[0] = masters[0].endpoint();
  tls_to_plain.masters[0].tls = true;
  tls_to_plain.connect_timeout = 300ms;
  expect_refused(tls_to_plain, "speak TLS");

  Options plain_to_tls = o;
  plain_to_tls.masters[0].tls = false;
  expect_refused(plain_to_tls, "is this a TLS port? use rediss://");
}

TEST_CASE("a waiter over TLS is woken by the release, not by retry_delay", "[tls][wait]") {
  Cluster masters(3, tls_server());
  auto said = std::make_shared<std::vector<std::string>>();
  LoopFixture loop;
  {
    Client holder(loop.get(), tls_options(masters, said));
    Options slow = tls_options(masters, said);
    slow.retry_delay = 10s;
    slow.retry_jitter = 0ms;
    Client waiter(loop.get(), slow);
    Answer held = try_lock(loop, holder, "handoff", 30s);
    REQUIRE_FALSE(held.error);
    auto answer = std::make_shared<Answer>();
    waiter.lock("handoff", 10s, 20s, [answer](std::error_code e, Lock l) {
      ++answer->calls;
      answer->error = e;
      answer->lock = std::move(l);
    });
    // The waiter is queued at the gate master, which needs its wake channel
    // subscribed there (over TLS too).
    REQUIRE(loop.run_until([&] { return masters.queued_on("{handoff}", 1).size() == 1; }, 5s));
    REQUIRE(answer->calls == 0);

    auto released = std::chrono::steady_clock::now();
    REQUIRE_FALSE(unlock(loop, holder, held.lock));
    REQUIRE(loop.run_until([&] { return answer->calls > 0; }, 5s));
    REQUIRE_FALSE(answer->error);
    CHECK(std::chrono::steady_clock::now() - released < 5s);  // retry_delay is 10 s
    CHECK(masters[0].get("{handoff}") == answer->lock.value);
  }
  REQUIRE(loop.close());
}

TEST_CASE("a TLS master killed and restarted: votes fail, then it reconnects and votes again", "[tls]") {
  Cluster masters(3, tls_server());
  auto said = std::make_shared<std::vector<std::string>>();
  LoopFixture loop;
  {
    Client client(loop.get(), tls_options(masters, said));
    REQUIRE(loop.run_until([&] { return client.stats().masters[2].state == MasterState::up; }, 5s));
    masters[2].kill9();
    Answer a = try_lock(loop, client, "with-two", 1s);
    REQUIRE_FALSE(a.error);  // two of three
    CHECK(masters[0].get("{with-two}") == a.lock.value);
    CHECK_FALSE(unlock(loop, client, a.lock));

    masters[2].restart(false);
    REQUIRE(loop.run_until([&] { return client.stats().masters[2].state == MasterState::up; }, 10s));
    CHECK(client.stats().masters[2].reconnects == 1);
    Answer b = try_lock(loop, client, "with-three", 1s);
    REQUIRE_FALSE(b.error);
    // Every master got the write, also the one that came back.
    REQUIRE(loop.run_until([&] { return masters[2].get("{with-three}") == b.lock.value; }, 2s));
  }
  REQUIRE(loop.close());
}

TEST_CASE("an impostor that takes over a master's port is refused when the Client reconnects", "[tls]") {
  auto genuine = std::make_unique<RedisServer>(tls_server());
  const int port = genuine->tls_port();
  auto said = std::make_shared<std::vector<std::string>>();
  LoopFixture loop;
  {
    Client client(loop.get(), tls_options({genuine->tls_endpoint()}, said));
    REQUIRE_FALSE(try_lock(loop, client, "genuine", 1s).error);
    genuine.reset();
    // Our CA signed its certificate, but for another name.
    ServerOptions impostor_options = tls_server("other-name");
    impostor_options.args = {"--tls-port", std::to_string(port)};
    RedisServer impostor(impostor_options);
    REQUIRE(loop.run_until([&] { return any_says(*said, "certificate verify failed: IP address mismatch"); },
                           5s));
    Answer a = try_lock(loop, client, "impostor", 1s);
    CHECK(a.error == errc::unavailable);
    CHECK_FALSE(impostor.get("{impostor}"));
  }
  REQUIRE(loop.close());
}

TEST_CASE("the fault proxy in front of a TLS master: a delay costs the vote, then TLS again", "[tls]") {
  Cluster masters(1, tls_server());
  FaultProxy proxy(masters[0].tls_port());
  auto said = std::make_shared<std::vector<std::string>>();
  Options o = tls_options(masters, said);
  o.masters[0] = proxy.endpoint();
  o.masters[0].tls = true;
  o.command_timeout = 100ms;
  LoopFixture loop;
  {
    Client client(loop.get(), o);
    REQUIRE(loop.run_until([&] { return client.stats().masters[0].state == MasterState::up; }, 5s));
    proxy.delay(300ms);
    Answer slow = try_lock(loop, client, "delayed", 1s);
    CHECK(slow.error == errc::unavailable);
    CHECK(client.stats().masters[0].timeouts >= 1);

    proxy.pass();
    Answer a = await_answer(
        loop, [&](Client::LockCallback cb) { client.lock("delayed", 1s, 5s, std::move(cb)); }, 10s);
    REQUIRE_FALSE(a.error);
    CHECK(masters[0].get("{delayed}") == a.lock.value);
    CHECK(client.stats().masters[0].reconnects >= 1);
  }
  REQUIRE(loop.close());
}

TEST_CASE("TLS options that cannot be used throw at construction, naming the field", "[tls][options]") {
  Cluster masters(1, tls_server());
  LoopFixture loop;
  Options o = tls_options(masters, std::make_shared<std::vector<std::string>>());

  Options missing_ca = o;
  missing_ca.tls.ca_file = certificates().path("no-such.crt");
  CHECK_THROWS_WITH(Client(loop.get(), missing_ca), Catch::Contains("tls.ca_file"));

  Options key_without_cert = o;
  key_without_cert.tls.key_file = certificates().path("client.key");
  CHECK_THROWS_WITH(Client(loop.get(), key_without_cert), Catch::Contains("tls.cert_file and tls.key_file"));

  Options wrong_key = o;
  wrong_key.tls.cert_file = certificates().path("client.crt");
  wrong_key.tls.key_file = certificates().path("server.key");
  CHECK_THROWS_WITH(Client(loop.get(), wrong_key), Catch::Contains("tls.key_file"));

  Options not_a_certificate = o;
  not_a_certificate.tls.cert_file = certificates().path("client.ext");
  not_a_certificate.tls.key_file = certificates().path("client.key");
  CHECK_THROWS_WITH(Client(loop.get(), not_a_certificate), Catch::Contains("tls.cert_file"));
  REQUIRE(loop.close());
}
