#pragma once

#include <redlock/options.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace redlock::test {

/// RESP encodings for FakeMaster scripts to answer with. Nothing is checked:
/// a status or error with CR or LF in it is the script's own hostile choice.
namespace resp {
/// "+OK\r\n" for status("OK").
std::string status(std::string_view s);
/// "-ERR no\r\n" for error("ERR no"): `s` without the leading '-'.
std::string error(std::string_view s);
/// ":42\r\n" for integer(42).
std::string integer(long long n);
/// "$-1\r\n", the nil bulk string.
std::string nil();
/// "$5\r\nhello\r\n" for bulk("hello").
std::string bulk(std::string_view s);
/// "*2\r\n" for array_header(2); the elements follow as separate encodings.
std::string array_header(long long n);
}  // namespace resp

/// True when argv[0] is `name`, ignoring ASCII case ("set" is SET).
bool is_command(const std::vector<std::string>& argv, std::string_view name);

/// A scriptable RESP server on a free 127.0.0.1 port, for tests that need a
/// master that says what a real Redis never would: garbage, half a reply, two
/// replies for one command, a reply nobody asked for, silence. It is not a
/// Redis: it stores nothing and answers only what its script says.
///
/// It runs on its own thread with its own uv_loop_t, like FaultProxy, so it
/// keeps answering while the test thread blocks (a sync hiredis client, the
/// blocking API) or runs a loop of its own. Every public member may be called
/// from any thread. Called from a script (the fake's own thread), push() and
/// close_connections() return at once and act after the commands already read
/// have been answered.
///
/// Requests are parsed with hiredis's reader and must be RESP arrays of bulk
/// strings, as every client library sends them. A connection that sends
/// anything else (inline commands, nested arrays), or holds more than 16 MB of
/// an unfinished request, is closed.
class FakeMaster {
 public:
  using Argv = std::vector<std::string>;
  /// What to answer one command: bytes written as they are (several replies,
  /// part of one, garbage; "" writes nothing), or std::nullopt for silence.
  /// Called on the fake's thread, one command at a time across every
  /// connection, in the order they arrive; it may call any member of this
  /// FakeMaster but must share other state with the test through atomics or a
  /// mutex. An exception it throws is printed and closes that connection.
  using Script = std::function<std::optional<std::string>(const Argv& argv)>;

  /// Binds a free 127.0.0.1 port, starts listening and starts the thread.
  /// Without a script every command is answered by handshake().
  /// Throws std::runtime_error when a libuv call fails.
  explicit FakeMaster(Script script = {});
  /// Closes every connection and handle and joins the thread.
  ~FakeMaster();
  FakeMaster(const FakeMaster&) = delete;
  FakeMaster& operator=(const FakeMaster&) = delete;

  /// The port it listens on, on 127.0.0.1.
  int port() const { return port_; }
  /// host 127.0.0.1 and port(), no password, database 0.
  redlock::Endpoint endpoint() const;

  /// Replaces the script (empty: handshake() only) from the next command on;
  /// a command being answered now finishes with the script it started with.
  void set_script(Script script);

  /// What a healthy master answers the commands the client sends at connect,
  /// std::nullopt for any other command, so a script can start with
  /// `if (auto answer = fake.handshake(argv)) return answer;`:
  /// AUTH and SELECT (any arguments) +OK; PING +PONG; SCRIPT LOAD body the
  /// SHA-1 of body as a bulk string when body is one of redlock::scripts::all,
  /// else an error (the fake computes no SHA-1); INFO (any section) info().
  std::optional<std::string> handshake(const Argv& argv) const;

  /// The INFO text handshake() sends, as a bulk string's content: "# Server",
  /// run_id (40 hex digits, random per FakeMaster) and uptime_in_seconds
  /// 100000; "# Replication", role master; "# Memory", maxmemory_policy
  /// noeviction. Lines end in CRLF.
  std::string info() const;
  /// This FakeMaster's run_id, as info() reports it.
  std::string run_id() const;
  /// Sets an INFO field's value where it is, or adds the field at the end.
  /// The value goes out as given, CR, LF and all; the name must be non-empty,
  /// not start with '#' and hold no ':', CR or LF (std::invalid_argument).
  void set_info_field(const std::string& name, std::string value);
  /// Removes an INFO field; nothing happens when there is none.
  void erase_info_field(const std::string& name);

  /// Writes `bytes` to every open connection, unasked. Returns once they are
  /// handed to the kernel or queued behind the connection's earlier writes.
  void push(std::string bytes);
  /// Closes every open connection with a FIN; bytes the kernel has not yet
  /// taken (a client that stopped reading) are dropped. Returns once they are
  /// closed. The fake keeps listening.
  void close_connections();

  /// Connections accepted since construction.
  std::size_t connections_accepted() const { return accepted_.load(); }
  /// Connections open now.
  std::size_t connections() const { return open_.load(); }
  /// Commands received named `name` (argv[0], ignoring ASCII case), counted
  /// before the script is asked for an answer.
  std::size_t commands(std::string_view name) const;
  /// Bytes read from every client since construction.
  std::size_t bytes_received() const { return bytes_received_.load(); }

 private:
  // Something the test asked the fake's thread to do to every connection.
  struct Action {
    enum class Kind { push, close } kind;
    std::string bytes;  // Kind::push only
  };
  class Loop;  // the fake's thread state; defined in fake_master.cpp

  // Queues `action` for the fake's thread and, from any other thread, waits
  // until it has been carried out.
  void act(Action action);
  // Called by the fake's thread for each complete command.
  std::optional<std::string> answer(const Argv& argv);

  int port_ = 0;
  std::atomic<std::size_t> accepted_{0};
  std::atomic<std::size_t> open_{0};
  std::atomic<std::size_t> bytes_received_{0};

  // Guards everything below it up to loop_. The script is held by shared_ptr
  // so that a call in progress keeps its own, and a script with mutable state
  // keeps that state across calls (it is never copied).
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  std::shared_ptr<const Script> script_;
  // INFO lines in order as name, value; a "# Section" line is a name alone.
  std::vector<std::pair<std::string, std::string>> info_;
  std::map<std::string, std::size_t, std::less<>> commands_;  // by upper-case name
  std::vector<Action> actions_;
  bool stopping_ = false;
  std::uint64_t requested_ = 0;  // actions queued since construction
  std::uint64_t done_ = 0;       // actions carried out since construction

  // loop_ is declared before thread_, so the thread is joined (in the
  // destructor body) before the loop state it runs goes away.
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace redlock::test
