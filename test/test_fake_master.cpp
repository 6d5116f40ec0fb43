#include <catch2/catch.hpp>

#include <redlock/client.hpp>

#include <hiredis/hiredis.h>

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "scripts.hpp"
#include "support/calls.hpp"
#include "support/eventually.hpp"
#include "support/fake_master.hpp"
#include "support/loop.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Argv = FakeMaster::Argv;

namespace {

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

std::string encode(const Argv& argv) {
  std::vector<const char*> args;
  std::vector<std::size_t> lengths;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* raw = nullptr;
  const int n = redisFormatCommandArgv(&raw, static_cast<int>(args.size()), args.data(), lengths.data());
  REQUIRE(n > 0);
  std::string bytes(raw, static_cast<std::size_t>(n));
  redisFreeCommand(raw);
  return bytes;
}

struct Reply {
  int type = 0;      // REDIS_REPLY_*
  std::string text;  // string, status or error (without the '-'); integer in decimal
};

// A plain blocking hiredis connection to 127.0.0.1:port, every wait bounded by
// `timeout` (scaled). command() goes through hiredis; send() and receive()
// bypass it for byte-exact checks (use one or the other for a given reply).
class SyncClient {
 public:
  explicit SyncClient(int port, std::chrono::milliseconds timeout = 1s)
      : timeout_(scaled(timeout)),
        context_(redisConnectWithTimeout("127.0.0.1", port, to_timeval(timeout_))) {
    if (context_ == nullptr) throw std::runtime_error("redisConnectWithTimeout: out of memory");
    REQUIRE(context_->err == 0);
    redisSetTimeout(context_, to_timeval(timeout_));
  }
  ~SyncClient() { redisFree(context_); }
  SyncClient(const SyncClient&) = delete;
  SyncClient& operator=(const SyncClient&) = delete;

  /// One command and its reply; std::nullopt when none came (see error()).
  std::optional<Reply> command(const Argv& argv) {
    send(encode(argv));
    return reply();
  }

  /// The next reply, parsed by hiredis.
  std::optional<Reply> reply() {
    if (context_->err != 0) return std::nullopt;
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) return std::nullopt;
    auto* r = static_cast<redisReply*>(raw);
    Reply out;
    out.type = r->type;
    if (r->type == REDIS_REPLY_INTEGER) {
      out.text = std::to_string(r->integer);
    } else if (r->str != nullptr) {
      out.text.assign(r->str, r->len);
    }
    freeReplyObject(r);
    return out;
  }

  /// Raw bytes on the socket; false when the connection is gone.
  bool send(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(context_->fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  /// Exactly `n` raw bytes, or what came before the timeout or end of stream.
  std::string receive(std::size_t n) {
    std::string got;
    char buffer[4096];
    while (got.size() < n) {
      const std::size_t want = std::min(sizeof buffer, n - got.size());
      const ssize_t r = ::recv(context_->fd, buffer, want, 0);
      if (r <= 0) break;  // EOF, or the receive timeout hiredis set on the socket
      got.append(buffer, static_cast<std::size_t>(r));
    }
    return got;
  }

  /// True when the peer closed the connection within the timeout.
  bool closed_by_peer() {
    pollfd p{context_->fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_.count())) <= 0) return false;
    char byte = 0;
    const ssize_t r = ::recv(context_->fd, &byte, 1, MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }

  std::string error() const { return context_->err != 0 ? context_->errstr : ""; }

 private:
  std::chrono::milliseconds timeout_;
  redisContext* context_;
};

bool is_status(const std::optional<Reply>& r, const std::string& text) {
  return r && r->type == REDIS_REPLY_STATUS && r->text == text;
}

bool is_string(const std::optional<Reply>& r, const std::string& text) {
  return r && r->type == REDIS_REPLY_STRING && r->text == text;
}

bool is_integer(const std::optional<Reply>& r, long long n) {
  return r && r->type == REDIS_REPLY_INTEGER && r->text == std::to_string(n);
}

bool is_hex40(const std::string& s) {
  return s.size() == 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

TEST_CASE("resp helpers encode what scripts answer with", "[fake_master]") {
  CHECK(resp::status("OK") == "+OK\r\n");
  CHECK(resp::error("LOADING not yet") == "-LOADING not yet\r\n");
  CHECK(resp::integer(-3) == ":-3\r\n");
  CHECK(resp::nil() == "$-1\r\n");
  CHECK(resp::bulk("") == "$0\r\n\r\n");
  CHECK(resp::bulk(std::string("a\0b", 3)) == std::string("$3\r\na\0b\r\n", 9));
  CHECK(resp::array_header(2) == "*2\r\n");
  CHECK(is_command({"evalsha", "x"}, "EVALSHA"));
  CHECK_FALSE(is_command({"EVAL", "x"}, "EVALSHA"));
  CHECK_FALSE(is_command({}, "PING"));
}

TEST_CASE("without a script the fake answers the handshake and nothing else", "[fake_master]") {
  FakeMaster fake;
  CHECK(fake.endpoint().host == "127.0.0.1");
  CHECK(fake.endpoint().port == fake.port());
  SyncClient client(fake.port());

  CHECK(is_status(client.command({"AUTH", "user", "secret"}), "OK"));
  CHECK(is_status(client.command({"select", "3"}), "OK"));
  CHECK(is_status(client.command({"PING"}), "PONG"));
  for (const Script* s : scripts::all) {
    CHECK(is_string(client.command({"SCRIPT", "LOAD", std::string(s->body)}), std::string(s->sha1)));
  }
  std::optional<Reply> unknown = client.command({"SCRIPT", "LOAD", "return 1"});
  REQUIRE(unknown);
  CHECK(unknown->type == REDIS_REPLY_ERROR);

  std::optional<Reply> info = client.command({"INFO"});
  REQUIRE(info);
  CHECK(info->type == REDIS_REPLY_STRING);
  CHECK(info->text == fake.info());
  REQUIRE(is_hex40(fake.run_id()));
  CHECK(info->text == "# Server\r\nrun_id:" + fake.run_id() +
                          "\r\nuptime_in_seconds:100000\r\n"
                          "# Replication\r\nrole:master\r\n"
                          "# Memory\r\nmaxmemory_policy:noeviction\r\n");

  CHECK(fake.commands("SCRIPT") == scripts::all.size() + 1);  // and the unknown one
  CHECK(fake.commands("script") == scripts::all.size() + 1);
  CHECK(fake.commands("SELECT") == 1);
  CHECK(fake.commands("GET") == 0);
  CHECK(fake.connections_accepted() == 1);
  CHECK(fake.connections() == 1);

  SyncClient quick(fake.port(), 200ms);
  CHECK_FALSE(quick.command({"GET", "anything"}));  // silence: the read times out
  CHECK(fake.commands("GET") == 1);
}

TEST_CASE("INFO fields can be changed, added and removed; run_id differs per fake", "[fake_master]") {
  FakeMaster fake;
  FakeMaster other;
  CHECK(fake.run_id() != other.run_id());

  fake.set_info_field("uptime_in_seconds", "9223372036854775807");
  fake.set_info_field("role", "slave");
  fake.set_info_field("loading", "1");
  fake.erase_info_field("maxmemory_policy");
  CHECK(fake.info() == "# Server\r\nrun_id:" + fake.run_id() +
                           "\r\nuptime_in_seconds:9223372036854775807\r\n"
                           "# Replication\r\nrole:slave\r\n"
                           "# Memory\r\nloading:1\r\n");
  fake.set_info_field("run_id", other.run_id());
  CHECK(fake.run_id() == other.run_id());
  SyncClient client(fake.port());
  CHECK(is_string(client.command({"INFO", "server"}), fake.info()));

  CHECK_THROWS_AS(fake.set_info_field("", "x"), std::invalid_argument);
  CHECK_THROWS_AS(fake.set_info_field("# Server", "x"), std::invalid_argument);
  CHECK_THROWS_AS(fake.set_info_field("a:b", "x"), std::invalid_argument);
}

TEST_CASE("a script's bytes reach the client byte for byte", "[fake_master]") {
  const std::string garbage("+OK\r\n:1\r\n\x00\xff not RESP at all\r\n$-7\r\n", 34);
  FakeMaster fake([&](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "SET")) return garbage;
    return std::nullopt;
  });
  SyncClient client(fake.port(), 300ms);
  REQUIRE(client.send(encode({"SET", "k", "v", "NX", "PX", "1000"})));
  CHECK(client.receive(garbage.size()) == garbage);
  CHECK(client.receive(1).empty());  // and nothing more
  CHECK(fake.commands("SET") == 1);
}

TEST_CASE("a script can answer after the handshake, keep state and be replaced", "[fake_master]") {
  FakeMaster fake;
  std::mutex mutex;
  std::vector<Argv> seen;  // guarded by mutex
  int sets = 0;            // the script's own state
  fake.set_script([&fake, &mutex, &seen, sets](const Argv& argv) mutable -> std::optional<std::string> {
    if (auto answer = fake.handshake(argv)) return answer;
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(argv);
    if (is_command(argv, "SET")) return resp::integer(++sets);
    return resp::error("ERR unexpected");
  });
  SyncClient client(fake.port());
  CHECK(is_status(client.command({"PING"}), "PONG"));
  CHECK(is_integer(client.command({"SET", "a", "1"}), 1));
  CHECK(is_integer(client.command({"set", "b", std::string("\0\r\n", 3)}), 2));
  {
    std::lock_guard<std::mutex> lock(mutex);
    REQUIRE(seen.size() == 2);
    CHECK(seen[1] == Argv{"set", "b", std::string("\0\r\n", 3)});
  }

  SECTION("set_script replaces it for the next command") {
    fake.set_script([](const Argv&) { return std::optional<std::string>(resp::nil()); });
    std::optional<Reply> r = client.command({"PING"});
    REQUIRE(r);
    CHECK(r->type == REDIS_REPLY_NIL);
  }
  SECTION("an empty script leaves the handshake only") {
    fake.set_script({});
    CHECK(is_status(client.command({"SELECT", "1"}), "OK"));
  }
  SECTION("half a reply, completed by push") {
    fake.set_script([](const Argv&) { return std::optional<std::string>("$5\r\nhel"); });
    REQUIRE(client.send(encode({"GET", "k"})));
    REQUIRE(eventually([&] { return fake.commands("GET") == 1; }));
    fake.push("lo\r\n");
    CHECK(is_string(client.reply(), "hello"));
  }
}

TEST_CASE("push writes unsolicited bytes to every open connection", "[fake_master]") {
  FakeMaster fake;
  SyncClient first(fake.port());
  SyncClient second(fake.port());
  REQUIRE(eventually([&] { return fake.connections() == 2; }));

  const std::string bytes = ">2\r\n$7\r\nmessage\r\n:1\r\n";
  fake.push(bytes);
  CHECK(first.receive(bytes.size()) == bytes);
  CHECK(second.receive(bytes.size()) == bytes);

  fake.push("+surprise\r\n");
  CHECK(is_status(first.reply(), "surprise"));
  // The unsolicited reply is taken for the answer to the next command.
  CHECK(is_status(second.command({"PING"}), "surprise"));
  CHECK(is_status(second.reply(), "PONG"));
}

TEST_CASE("close_connections closes every connection; the fake keeps listening", "[fake_master]") {
  FakeMaster fake;
  SyncClient client(fake.port());
  REQUIRE(is_status(client.command({"PING"}), "PONG"));
  REQUIRE(fake.connections() == 1);

  fake.close_connections();
  CHECK(fake.connections() == 0);
  CHECK(client.closed_by_peer());
  CHECK_FALSE(client.command({"PING"}));

  SyncClient again(fake.port());
  CHECK(is_status(again.command({"PING"}), "PONG"));
  CHECK(fake.connections_accepted() == 2);
  CHECK(fake.connections() == 1);
}

TEST_CASE("a script may push and close connections from the fake's own thread", "[fake_master]") {
  FakeMaster fake;
  fake.set_script([&fake](const Argv& argv) -> std::optional<std::string> {
    if (is_command(argv, "GET")) {
      fake.push(resp::integer(7));  // goes out after this answer
      return resp::bulk("v");
    }
    if (is_command(argv, "QUIT")) {
      fake.close_connections();
      return resp::status("OK");
    }
    return fake.handshake(argv);
  });
  SyncClient client(fake.port());
  CHECK(is_string(client.command({"GET", "k"}), "v"));
  CHECK(is_integer(client.reply(), 7));
  CHECK(is_status(client.command({"QUIT"}), "OK"));
  CHECK(client.closed_by_peer());
  CHECK(eventually([&] { return fake.connections() == 0; }));
}

TEST_CASE("commands are counted by name and bytes as they arrive", "[fake_master]") {
  FakeMaster fake;
  SyncClient client(fake.port());
  std::string pipelined;
  for (const Argv& argv : std::vector<Argv>{{"PING"}, {"ping"}, {"Ping", "x"}, {"INFO"}, {"GET", "k"}}) {
    pipelined += encode(argv);
  }
  REQUIRE(client.send(pipelined));
  REQUIRE(eventually([&] { return fake.commands("GET") == 1; }));
  CHECK(fake.commands("PING") == 3);
  CHECK(fake.commands("info") == 1);
  CHECK(fake.commands("SET") == 0);
  CHECK(fake.bytes_received() == pipelined.size());
}

TEST_CASE("a client that sends no RESP request, or too much of one, is disconnected", "[fake_master]") {
  FakeMaster fake;
  SyncClient client(fake.port(), 2s);
  REQUIRE(eventually([&] { return fake.connections() == 1; }));

  SECTION("an inline command") {
    REQUIRE(client.send("PING\r\n"));
  }
  SECTION("a reply instead of a request") {
    REQUIRE(client.send("+OK\r\n"));
  }
  SECTION("a nested array") {
    REQUIRE(client.send("*1\r\n*1\r\n$4\r\nPING\r\n"));
  }
  SECTION("an unfinished request over 16 MB") {
    REQUIRE(client.send("*2\r\n$3\r\nSET\r\n$100000000\r\n"));
    const std::string chunk(1 << 20, 'x');
    // The fake closes while this is still sending, which fails a send.
    for (int i = 0; i < 20 && client.send(chunk); ++i) {
    }
    // Closed for its size, not before: the fake read past the cap first.
    REQUIRE(eventually([&] { return fake.connections() == 0; }));
    CHECK(fake.bytes_received() > (std::size_t{16} << 20));
  }
  CHECK(eventually([&] { return fake.connections() == 0; }));
  CHECK(fake.commands("PING") == 0);
  CHECK(fake.commands("SET") == 0);
}

TEST_CASE("a fake destroyed with connected clients closes them cleanly", "[fake_master]") {
  auto fake = std::make_unique<FakeMaster>([](const Argv&) { return std::nullopt; });
  SyncClient idle(fake->port());
  SyncClient waiting(fake->port());
  REQUIRE(waiting.send(encode({"GET", "k"})));  // never answered
  SyncClient partial(fake->port());
  REQUIRE(partial.send("*2\r\n$3\r\nGET\r\n$1"));  // half a request
  REQUIRE(eventually([&] { return fake->commands("GET") == 1 && fake->connections() == 3; }));
  fake.reset();
  CHECK(idle.closed_by_peer());
  CHECK(waiting.closed_by_peer());
  CHECK(partial.closed_by_peer());
}

TEST_CASE("a Client completes its handshake with the fake and takes a lock", "[fake_master][client]") {
  std::mutex mutex;
  std::string value;  // what SET stored, guarded by mutex
  FakeMaster fake;
  fake.set_script([&](const Argv& argv) -> std::optional<std::string> {
    if (auto answer = fake.handshake(argv)) return answer;
    std::lock_guard<std::mutex> lock(mutex);
    if (is_command(argv, "SET") && argv.size() == 6) {
      value = argv[2];
      return resp::status("OK");
    }
    // EVALSHA sha 2 key marker value ms
    if (is_command(argv, "EVALSHA") && argv.size() == 7 && argv[1] == scripts::unlock_and_wake.sha1 &&
        argv[5] == value) {
      return resp::integer(1);
    }
    return resp::error("ERR unexpected");
  });

  Options options;
  options.masters = {fake.endpoint()};
  LoopFixture loop;
  {
    Client client(loop.get(), options);
    Answer locked = try_lock(loop, client, "job", 10s);
    REQUIRE_FALSE(locked.error);
    CHECK(locked.lock.resource == "job");
    CHECK_FALSE(unlock(loop, client, locked.lock));
    client.close(nullptr);
  }
  REQUIRE(loop.close());

  std::lock_guard<std::mutex> lock(mutex);
  CHECK(value.size() > 33);
  CHECK(fake.commands("SCRIPT") == scripts::all.size());
  CHECK(fake.commands("INFO") == 1);
  CHECK(fake.commands("SET") == 1);
  CHECK(fake.commands("EVALSHA") == 1);
  CHECK(fake.connections_accepted() == 1);
}
