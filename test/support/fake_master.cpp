#include "fake_master.hpp"

#include <hiredis/read.h>
#include <uv.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <exception>
#include <new>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include "loopback_listener.hpp"
#include "scripts.hpp"
#include "timeouts.hpp"
#include "uv_handle.hpp"

namespace redlock::test {

namespace resp {

std::string status(std::string_view s) {
  return "+" + std::string(s) + "\r\n";
}

std::string error(std::string_view s) {
  return "-" + std::string(s) + "\r\n";
}

std::string integer(long long n) {
  return ":" + std::to_string(n) + "\r\n";
}

std::string nil() {
  return "$-1\r\n";
}

std::string bulk(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

std::string array_header(long long n) {
  return "*" + std::to_string(n) + "\r\n";
}

}  // namespace resp

namespace {

using namespace std::chrono_literals;

constexpr const char* loopback = "127.0.0.1";
// Tests open a handful of connections and send short commands; anything near
// these limits is a runaway client, which gets closed rather than growing the
// fake without bound.
constexpr std::size_t max_connections = 256;
constexpr std::size_t max_unparsed_bytes = std::size_t{16} << 20;  // per connection
constexpr int max_arguments = 1 << 20;
constexpr std::size_t read_buffer_bytes = std::size_t{64} << 10;
// How long push() and close_connections() wait for the fake's thread; it only
// waits for one loop turn, so running out means that thread is stuck.
constexpr auto act_timeout = 5s;

// The FakeMaster whose thread this is; null on every other thread.
thread_local const FakeMaster* running_on = nullptr;

std::runtime_error uv_failure(const char* what, int rc) {
  return std::runtime_error(std::string("FakeMaster: ") + what + ": " + uv_strerror(rc));
}

void check(const char* what, int rc) {
  if (rc != 0) throw uv_failure(what, rc);
}

char upper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) { return upper(c); });
  return out;
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return upper(x) == upper(y); });
}

std::string random_run_id() {
  std::random_device device;
  constexpr const char* digits = "0123456789abcdef";
  std::string id;
  for (int word = 0; word < 5; ++word) {
    std::uint32_t bits = device();
    for (int i = 0; i < 8; ++i, bits >>= 4) id += digits[bits & 15];
  }
  return id;
}

// hiredis's reader parses requests with these functions instead of building
// redisReply objects: a request is a top-level array of bulk strings, built
// straight into an argv; anything else makes the reader fail. The reader's
// privdata is the reader itself.
struct Request {
  FakeMaster::Argv argv;
};

char element_marker;  // what an element "object" is: its bytes are already in the argv

void* create_string(const redisReadTask* task, char* str, std::size_t len) {
  if (task->type != REDIS_REPLY_STRING || task->parent == nullptr || task->privdata == nullptr) {
    return nullptr;
  }
  // hiredis 0.14 does not check a bulk length against the bytes it holds
  // (a length near LLONG_MAX wraps around): check it here.
  const auto* reader = static_cast<const redisReader*>(task->privdata);
  const char* end = reader->buf + reader->len;
  if (str < reader->buf || str > end || len > static_cast<std::size_t>(end - str)) return nullptr;
  static_cast<Request*>(task->parent->obj)->argv.emplace_back(str, len);
  return &element_marker;
}

void* create_array(const redisReadTask* task, int elements) {
  // Nested or absurd arrays are no request. The argv is not reserved from
  // `elements`: that count comes from the client.
  if (task->parent != nullptr || elements < 0 || elements > max_arguments) return nullptr;
  return new (std::nothrow) Request;
}

void* create_integer(const redisReadTask*, long long) {
  return nullptr;
}

void* create_nil(const redisReadTask*) {
  return nullptr;
}

// hiredis frees only the top-level object, which is always a Request.
void free_request(void* request) {
  delete static_cast<Request*>(request);
}

redisReplyObjectFunctions request_functions{create_string, create_array, create_integer, create_nil,
                                            free_request};

struct ReaderFree {
  void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
};

struct WriteRequest {
  uv_write_t request{};
  std::string bytes;
};

}  // namespace

bool is_command(const std::vector<std::string>& argv, std::string_view name) {
  return !argv.empty() && same_name(argv[0], name);
}

/// The fake's thread state: the loop, the listener, the wake-up handle and the
/// connections. Everything here runs on that thread, except the constructor
/// and destructor, which run while it is not running.
class FakeMaster::Loop {
 public:
  explicit Loop(FakeMaster& owner);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  int port() const { return port_; }
  /// Thread-safe: wakes the fake's thread to carry out the owner's actions.
  void wake() { uv_async_send(wake_.get()); }
  /// The thread's body; returns once stop() has closed every handle.
  void run() { uv_run(&loop_, UV_RUN_DEFAULT); }

 private:
  struct Connection {
    Loop& fake;
    Handle<uv_tcp_t> tcp;
    std::unique_ptr<redisReader, ReaderFree> reader;

    explicit Connection(Loop& f)
        : fake(f),
          tcp(&f.loop_, this, uv_tcp_init),
          reader(redisReaderCreateWithFunctions(&request_functions)) {
      if (!reader) throw std::runtime_error("FakeMaster: redisReaderCreateWithFunctions failed");
      // Not redisReaderSetPrivdata: hiredis 0.14's macro casts the pointer to int.
      reader->privdata = reader.get();
    }
    uv_stream_t* stream() const { return reinterpret_cast<uv_stream_t*>(tcp.get()); }
  };

  void on_wake();
  void apply(const Action& action);
  void stop();
  void on_accept(int status);
  void on_read(Connection& c, ssize_t nread, const uv_buf_t* buf);
  bool write(Connection& c, std::string bytes);
  void close(Connection& c);
  void close_all();

  static void alloc(uv_handle_t* h, std::size_t suggested, uv_buf_t* buf);

  FakeMaster& owner_;
  uv_loop_t loop_{};
  int port_ = 0;
  std::vector<char> read_buffer_ = std::vector<char>(read_buffer_bytes);

  // The handles close in stop() (or in the destructor if the thread never
  // ran), before uv_loop_close; their own destructors then have nothing to do.
  Handle<uv_tcp_t> listener_;
  Handle<uv_async_t> wake_;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
};

FakeMaster::Loop::Loop(FakeMaster& owner) : owner_(owner) {
  check("uv_loop_init", uv_loop_init(&loop_));
  try {
    wake_ = Handle<uv_async_t>(&loop_, this, [](uv_loop_t* loop, uv_async_t* a) {
      return uv_async_init(loop, a, [](uv_async_t* h) { owner_of<Loop>(h)->on_wake(); });
    });
    listener_ = Handle<uv_tcp_t>(&loop_, this, uv_tcp_init);
    port_ = listen_on_free_loopback_port(
        listener_.get(), [](uv_stream_t* s, int status) { owner_of<Loop>(s)->on_accept(status); }, check);
  } catch (...) {
    stop();
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    throw;
  }
}

FakeMaster::Loop::~Loop() {
  // Normally stop() ran on the fake's thread; this covers a thread that never
  // started. Either way the close callbacks still due run here.
  stop();
  uv_run(&loop_, UV_RUN_DEFAULT);
  [[maybe_unused]] const int rc = uv_loop_close(&loop_);
  assert(rc == 0);
}

void FakeMaster::Loop::on_wake() {
  std::vector<Action> actions;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    if (owner_.stopping_) {
      stop();
      return;
    }
    actions.swap(owner_.actions_);
    generation = owner_.requested_;
  }
  for (const Action& action : actions) apply(action);
  {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    owner_.done_ = std::max(owner_.done_, generation);
  }
  owner_.done_cv_.notify_all();
}

void FakeMaster::Loop::apply(const Action& action) {
  switch (action.kind) {
    case Action::Kind::push: {
      // write() closes only the connection it writes to, so the others stay
      // valid while this walks them.
      std::vector<Connection*> open;
      for (auto& entry : connections_) open.push_back(entry.first);
      for (Connection* c : open) write(*c, action.bytes);
      break;
    }
    case Action::Kind::close:
      close_all();
      break;
  }
}

void FakeMaster::Loop::stop() {
  close_all();
  listener_.close();
  wake_.close();
}

void FakeMaster::Loop::on_accept(int status) {
  if (status < 0) return;  // the listener stays up; the client sees its own error
  auto owned = std::make_unique<Connection>(*this);
  if (uv_accept(reinterpret_cast<uv_stream_t*>(listener_.get()), owned->stream()) != 0) return;
  ++owner_.accepted_;
  if (connections_.size() >= max_connections) return;  // ~Connection closes it
  Connection& c = *owned;
  connections_.emplace(&c, std::move(owned));
  owner_.open_ = connections_.size();
  // A reply must leave at once, even one written in pieces.
  uv_tcp_nodelay(c.tcp.get(), 1);
  const int rc = uv_read_start(c.stream(), alloc, [](uv_stream_t* s, ssize_t n, const uv_buf_t* b) {
    auto* conn = owner_of<Connection>(s);
    conn->fake.on_read(*conn, n, b);
  });
  if (rc != 0) close(c);
}

void FakeMaster::Loop::alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) {
  // One buffer serves every read: the reader copies what it keeps before
  // libuv asks for the buffer again.
  auto& buffer = owner_of<Connection>(h)->fake.read_buffer_;
  *buf = uv_buf_init(buffer.data(), static_cast<unsigned>(buffer.size()));
}

void FakeMaster::Loop::on_read(Connection& c, ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;
  if (nread < 0) {
    close(c);
    return;
  }
  owner_.bytes_received_ += static_cast<std::size_t>(nread);
  if (redisReaderFeed(c.reader.get(), buf->base, static_cast<std::size_t>(nread)) != REDIS_OK) {
    close(c);
    return;
  }
  for (;;) {
    void* parsed = nullptr;
    if (redisReaderGetReply(c.reader.get(), &parsed) != REDIS_OK) {
      close(c);  // not a RESP request
      return;
    }
    if (parsed == nullptr) break;
    std::unique_ptr<Request> request(static_cast<Request*>(parsed));
    if (request->argv.empty()) continue;  // "*0\r\n": Redis ignores it too
    std::optional<std::string> answer;
    try {
      answer = owner_.answer(request->argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "FakeMaster: the script threw (%s); closing the connection\n", e.what());
      close(c);
      return;
    } catch (...) {
      std::fprintf(stderr, "FakeMaster: the script threw; closing the connection\n");
      close(c);
      return;
    }
    if (answer && !answer->empty() && !write(c, std::move(*answer))) return;
  }
  const redisReader& reader = *c.reader;
  if (reader.len - reader.pos > max_unparsed_bytes) close(c);
}

// False when the write failed and the connection was closed.
bool FakeMaster::Loop::write(Connection& c, std::string bytes) {
  if (bytes.empty()) return true;
  auto request = std::make_unique<WriteRequest>();
  request->bytes = std::move(bytes);
  uv_buf_t buf = uv_buf_init(request->bytes.data(), static_cast<unsigned>(request->bytes.size()));
  const int rc = uv_write(&request->request, c.stream(), &buf, 1, [](uv_write_t* r, int status) {
    std::unique_ptr<WriteRequest> free_now(reinterpret_cast<WriteRequest*>(r));
    // UV_ECANCELED means the connection is already closing.
    if (status < 0 && status != UV_ECANCELED) {
      if (auto* conn = owner_of<Connection>(r->handle)) conn->fake.close(*conn);
    }
  });
  if (rc != 0) {
    close(c);
    return false;
  }
  static_cast<void>(request.release());  // the write callback frees it
  return true;
}

// Destroys `c`: callers return at once after calling it.
void FakeMaster::Loop::close(Connection& c) {
  connections_.erase(&c);
  owner_.open_ = connections_.size();
}

void FakeMaster::Loop::close_all() {
  connections_.clear();
  owner_.open_ = 0;
}

FakeMaster::FakeMaster(Script script)
    : info_{{"# Server", ""},
            {"run_id", random_run_id()},
            {"uptime_in_seconds", "100000"},
            {"# Replication", ""},
            {"role", "master"},
            {"# Memory", ""},
            {"maxmemory_policy", "noeviction"}} {
  set_script(std::move(script));
  loop_ = std::make_unique<Loop>(*this);
  port_ = loop_->port();
  thread_ = std::thread([this] {
    running_on = this;
    block_sigpipe_in_this_thread();
    loop_->run();
  });
}

FakeMaster::~FakeMaster() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  loop_->wake();
  thread_.join();
  loop_.reset();  // asserts uv_loop_close() == 0
}

redlock::Endpoint FakeMaster::endpoint() const {
  redlock::Endpoint e;
  e.host = loopback;
  e.port = port_;
  return e;
}

void FakeMaster::set_script(Script script) {
  auto shared = script ? std::make_shared<const Script>(std::move(script)) : nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  script_ = std::move(shared);
}

std::optional<std::string> FakeMaster::answer(const Argv& argv) {
  std::shared_ptr<const Script> script;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++commands_[upper(argv[0])];
    script = script_;
  }
  // Called without the lock: the script may call handshake(), set_script(), ...
  if (script) return (*script)(argv);
  return handshake(argv);
}

std::optional<std::string> FakeMaster::handshake(const Argv& argv) const {
  if (is_command(argv, "AUTH") || is_command(argv, "SELECT")) return resp::status("OK");
  if (is_command(argv, "PING")) return resp::status("PONG");
  if (is_command(argv, "PUBLISH")) return resp::integer(0);
  if (is_command(argv, "INFO")) return resp::bulk(info());
  if (is_command(argv, "SCRIPT") && argv.size() == 3 && same_name(argv[1], "LOAD")) {
    for (const redlock::Script* s : scripts::all) {
      if (s->body == argv[2]) return resp::bulk(s->sha1);
    }
    return resp::error("ERR FakeMaster knows the SHA-1 of redlock's own scripts only");
  }
  return std::nullopt;
}

std::string FakeMaster::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  for (const auto& [name, value] : info_) {
    text += name;
    if (name.front() != '#') text += ":" + value;
    text += "\r\n";
  }
  return text;
}

std::string FakeMaster::run_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, value] : info_) {
    if (name == "run_id") return value;
  }
  return {};
}

void FakeMaster::set_info_field(const std::string& name, std::string value) {
  if (name.empty() || name.front() == '#' || name.find_first_of(":\r\n") != std::string::npos) {
    throw std::invalid_argument("FakeMaster::set_info_field: bad field name \"" + name + "\"");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [existing, old] : info_) {
    if (existing == name) {
      old = std::move(value);
      return;
    }
  }
  info_.emplace_back(name, std::move(value));
}

void FakeMaster::erase_info_field(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  info_.erase(
      std::remove_if(info_.begin(), info_.end(),
                     [&](const auto& line) { return line.first.front() != '#' && line.first == name; }),
      info_.end());
}

void FakeMaster::push(std::string bytes) {
  act({Action::Kind::push, std::move(bytes)});
}

void FakeMaster::close_connections() {
  act({Action::Kind::close, {}});
}

void FakeMaster::act(Action action) {
  std::unique_lock<std::mutex> lock(mutex_);
  actions_.push_back(std::move(action));
  const std::uint64_t generation = ++requested_;
  loop_->wake();
  // On the fake's own thread (a script) the action runs once the script returns.
  if (running_on == this) return;
  if (!done_cv_.wait_for(lock, scaled(act_timeout), [&] { return done_ >= generation; })) {
    throw std::runtime_error("FakeMaster: the fake's thread did not act in time");
  }
}

std::size_t FakeMaster::commands(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = commands_.find(upper(name));
  return it == commands_.end() ? 0 : it->second;
}

}  // namespace redlock::test
