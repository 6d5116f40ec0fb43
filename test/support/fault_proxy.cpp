#include "fault_proxy.hpp"

#include <hiredis/read.h>
#include <uv.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cassert>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cluster.hpp"
#include "loopback_listener.hpp"
#include "timeouts.hpp"
#include "uv_handle.hpp"

namespace redlock::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* loopback = "127.0.0.1";
// Tests open a handful of connections; anything near these limits is a
// runaway client, which gets closed rather than growing the proxy without bound.
constexpr std::size_t max_connections = 256;
constexpr std::size_t max_buffered_bytes = std::size_t{64} << 20;  // per connection
constexpr std::size_t read_buffer_bytes = std::size_t{64} << 10;
// How long a mode setter waits for the proxy thread; it only waits for one
// loop turn, so running out means the proxy thread is stuck.
constexpr auto apply_timeout = 5s;

std::runtime_error uv_failure(const char* what, int rc) {
  return std::runtime_error(std::string("FaultProxy: ") + what + ": " + uv_strerror(rc));
}

void check(const char* what, int rc) {
  if (rc != 0) throw uv_failure(what, rc);
}

// Handle<uv_tcp_t> from uv_handle.hpp, plus a close that sends a TCP RST. As
// there, the memory is freed only in the close callback and no callback of
// the handle reaches its owner after close().
class Tcp {
 public:
  Tcp(uv_loop_t* loop, void* data) : tcp_(std::make_unique<uv_tcp_t>()) {
    check("uv_tcp_init", uv_tcp_init(loop, tcp_.get()));
    tcp_->data = data;
  }
  ~Tcp() { close(false); }
  Tcp(const Tcp&) = delete;
  Tcp& operator=(const Tcp&) = delete;

  uv_tcp_t* get() const noexcept { return tcp_.get(); }
  uv_stream_t* stream() const noexcept { return reinterpret_cast<uv_stream_t*>(tcp_.get()); }
  explicit operator bool() const noexcept { return tcp_ != nullptr; }

  /// With `reset`, SO_LINGER 0 makes the kernel send RST instead of FIN; a
  /// socket that cannot take it (never connected) is closed plainly.
  void close(bool reset) noexcept {
    if (!tcp_) return;
    uv_tcp_t* raw = tcp_.release();
    raw->data = nullptr;
    auto free_it = [](uv_handle_t* h) { std::unique_ptr<uv_tcp_t> free_now(reinterpret_cast<uv_tcp_t*>(h)); };
    if (reset && uv_tcp_close_reset(raw, free_it) == 0) return;
    uv_close(reinterpret_cast<uv_handle_t*>(raw), free_it);
  }

 private:
  std::unique_ptr<uv_tcp_t> tcp_;
};

struct WriteRequest {
  uv_write_t request{};
  std::string bytes;
};

struct ReaderFree {
  void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
};

}  // namespace

/// The proxy thread's world: the loop, the listener, the wake-up handle and
/// the connections. Everything here runs on the proxy thread, except the
/// constructor and destructor, which run while that thread is not running.
class FaultProxy::Loop {
 public:
  Loop(FaultProxy& owner, int target_port);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  int port() const { return port_; }
  /// Thread-safe: wakes the proxy thread to read the owner's wanted mode.
  void wake() { uv_async_send(wake_.get()); }
  /// The proxy thread's body; returns once stop() has closed every handle.
  void run() { uv_run(&loop_, UV_RUN_DEFAULT); }

 private:
  // One chunk held back by delay(): `due` is in uv_now() milliseconds.
  struct Chunk {
    std::uint64_t due;
    std::string bytes;
  };
  // One direction of one connection.
  struct Flow {
    std::deque<Chunk> delayed;
    std::size_t delayed_bytes = 0;
    Timer timer;

    void clear() {
      delayed.clear();
      delayed_bytes = 0;
      uv_timer_stop(timer.get());
    }
  };
  // A client connection and its own connection to the target.
  struct Connection {
    Loop& proxy;
    Tcp client;
    Tcp upstream;
    bool upstream_ready = false;
    std::string unsent;                               // for the target, while its connection is being made
    std::unique_ptr<redisReader, ReaderFree> reader;  // null once the client spoke non-RESP
    Flow to_server;
    Flow to_client;

    explicit Connection(Loop& p)
        : proxy(p),
          client(&p.loop_, this),
          upstream(&p.loop_, this),
          reader(redisReaderCreateWithFunctions(nullptr)) {
      if (!reader) throw std::runtime_error("FaultProxy: redisReaderCreateWithFunctions failed");
      to_server.timer = make_timer(&p.loop_, this);
      to_client.timer = make_timer(&p.loop_, this);
    }
  };

  void on_wake();
  void apply(const Mode& mode);
  void stop();
  void on_accept(int status);
  void open(std::unique_ptr<Connection> c);
  void on_upstream_connected(Connection& c, int status);
  void on_client_read(Connection& c, ssize_t nread, const uv_buf_t* buf);
  void on_upstream_read(Connection& c, ssize_t nread, const uv_buf_t* buf);
  std::size_t count_requests(Connection& c, const char* data, std::size_t size);
  bool forward(Connection& c, Flow& flow, const char* data, std::size_t size);
  bool send_to(Connection& c, Flow& flow, std::string bytes);
  void on_flow_timer(Connection& c, Flow& flow);
  bool write(Connection& c, uv_stream_t* to, std::string bytes);
  bool within_budget(const Connection& c) const;
  void close(Connection& c, bool reset);

  static void alloc(uv_handle_t* h, std::size_t suggested, uv_buf_t* buf);
  static void on_timer(uv_timer_t* t);

  FaultProxy& owner_;
  uv_loop_t loop_{};
  sockaddr_in target_{};
  int port_ = 0;
  Mode mode_;  // the mode applied last; owner_.wanted_ may already be newer
  std::vector<char> read_buffer_ = std::vector<char>(read_buffer_bytes);

  // The handles close in stop() (or in the destructor if the thread never
  // ran), before uv_loop_close; their own destructors then have nothing to do.
  Handle<uv_tcp_t> listener_;
  Handle<uv_async_t> wake_;
  std::unordered_map<Connection*, std::unique_ptr<Connection>> connections_;
};

FaultProxy::Loop::Loop(FaultProxy& owner, int target_port) : owner_(owner) {
  check("uv_loop_init", uv_loop_init(&loop_));
  try {
    check("target address", uv_ip4_addr(loopback, target_port, &target_));
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

FaultProxy::Loop::~Loop() {
  // Normally stop() ran on the proxy thread; this covers a thread that never
  // started. Either way the close callbacks still due run here.
  stop();
  uv_run(&loop_, UV_RUN_DEFAULT);
  [[maybe_unused]] const int rc = uv_loop_close(&loop_);
  assert(rc == 0);
}

void FaultProxy::Loop::on_wake() {
  Mode mode;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    if (owner_.stopping_) {
      stop();
      return;
    }
    mode = owner_.wanted_;
    generation = owner_.requested_;
  }
  apply(mode);
  {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    owner_.applied_ = std::max(owner_.applied_, generation);
  }
  owner_.applied_cv_.notify_all();
}

void FaultProxy::Loop::apply(const Mode& mode) {
  mode_ = mode;
  switch (mode_.kind) {
    case Kind::pass:
    case Kind::delay:
    case Kind::blackhole_after:
      // Chunks already held back keep their due time; later ones queue
      // behind them, so the byte order never changes.
      break;
    case Kind::drop_replies:
      for (auto& entry : connections_) entry.second->to_client.clear();
      break;
    case Kind::blackhole:
    case Kind::error_reply:
      for (auto& entry : connections_) {
        Connection& c = *entry.second;
        c.unsent.clear();
        c.to_server.clear();
        c.to_client.clear();
      }
      break;
    case Kind::reset: {
      auto doomed = std::move(connections_);
      connections_.clear();
      for (auto& entry : doomed) entry.second->client.close(true);
      owner_.connections_ = 0;
      break;
    }
  }
}

void FaultProxy::Loop::stop() {
  connections_.clear();
  owner_.connections_ = 0;
  listener_.close();
  wake_.close();
}

void FaultProxy::Loop::on_accept(int status) {
  if (status < 0) return;  // the listener stays up; the client will see its own error
  auto c = std::make_unique<Connection>(*this);
  if (uv_accept(reinterpret_cast<uv_stream_t*>(listener_.get()), c->client.stream()) != 0) return;
  if (mode_.kind == Kind::reset) {
    c->client.close(true);
    return;
  }
  if (connections_.size() >= max_connections) return;  // ~Connection closes it
  open(std::move(c));
}

void FaultProxy::Loop::open(std::unique_ptr<Connection> owned) {
  Connection& c = *owned;
  connections_.emplace(&c, std::move(owned));
  owner_.connections_ = connections_.size();
  // Small writes must leave at once: Nagle would add latency no mode asked for.
  uv_tcp_nodelay(c.client.get(), 1);
  uv_tcp_nodelay(c.upstream.get(), 1);

  auto* request = new uv_connect_t;
  const int rc = uv_tcp_connect(request, c.upstream.get(), reinterpret_cast<const sockaddr*>(&target_),
                                [](uv_connect_t* r, int status) {
                                  std::unique_ptr<uv_connect_t> free_now(r);
                                  // Null when the connection was closed while connecting.
                                  if (auto* conn = owner_of<Connection>(r->handle)) {
                                    conn->proxy.on_upstream_connected(*conn, status);
                                  }
                                });
  if (rc != 0) {
    delete request;
    close(c, true);
    return;
  }
  const int read = uv_read_start(c.client.stream(), alloc, [](uv_stream_t* s, ssize_t n, const uv_buf_t* b) {
    auto* conn = owner_of<Connection>(s);
    conn->proxy.on_client_read(*conn, n, b);
  });
  if (read != 0) close(c, false);
}

void FaultProxy::Loop::on_upstream_connected(Connection& c, int status) {
  if (status < 0) {
    // The target refused: the client sees what it would have seen connecting
    // to the target directly.
    close(c, true);
    return;
  }
  c.upstream_ready = true;
  const int read =
      uv_read_start(c.upstream.stream(), alloc, [](uv_stream_t* s, ssize_t n, const uv_buf_t* b) {
        auto* conn = owner_of<Connection>(s);
        conn->proxy.on_upstream_read(*conn, n, b);
      });
  if (read != 0) {
    close(c, false);
    return;
  }
  if (!c.unsent.empty()) write(c, c.upstream.stream(), std::exchange(c.unsent, {}));
}

void FaultProxy::Loop::alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) {
  // One buffer serves every read: a read callback copies what it keeps
  // before libuv asks for the buffer again.
  auto& buffer = owner_of<Connection>(h)->proxy.read_buffer_;
  *buf = uv_buf_init(buffer.data(), static_cast<unsigned>(buffer.size()));
}

void FaultProxy::Loop::on_client_read(Connection& c, ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;
  if (nread < 0) {
    close(c, false);
    return;
  }
  const auto size = static_cast<std::size_t>(nread);
  const std::size_t requests = count_requests(c, buf->base, size);
  switch (mode_.kind) {
    case Kind::pass:
    case Kind::delay:
    case Kind::drop_replies:
      if (!forward(c, c.to_server, buf->base, size)) return;
      break;
    case Kind::blackhole_after:
      if (!c.reader || requests > mode_.pass_left) {
        apply({Kind::blackhole, {}, {}, 0});
        break;
      }
      mode_.pass_left -= requests;
      if (!forward(c, c.to_server, buf->base, size)) return;
      break;
    case Kind::blackhole:
      break;
    case Kind::error_reply:
      if (!c.reader) {
        // Without a parse we cannot tell how many answers are owed.
        close(c, false);
        return;
      }
      if (requests > 0) {
        std::string answers;
        for (std::size_t i = 0; i < requests; ++i) answers += mode_.error_line;
        if (!write(c, c.client.stream(), std::move(answers))) return;
      }
      break;
    case Kind::reset:
      close(c, true);  // apply() already reset every connection; only a race gets here
      return;
  }
  if (!within_budget(c)) close(c, false);
}

void FaultProxy::Loop::on_upstream_read(Connection& c, ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;
  if (nread < 0) {
    close(c, false);
    return;
  }
  switch (mode_.kind) {
    case Kind::pass:
    case Kind::delay:
    case Kind::blackhole_after:
      if (!forward(c, c.to_client, buf->base, static_cast<std::size_t>(nread))) return;
      break;
    case Kind::blackhole:
    case Kind::drop_replies:
    case Kind::error_reply:
    case Kind::reset:
      return;
  }
  if (!within_budget(c)) close(c, false);
}

std::size_t FaultProxy::Loop::count_requests(Connection& c, const char* data, std::size_t size) {
  if (!c.reader) return 0;
  if (redisReaderFeed(c.reader.get(), data, size) != REDIS_OK) {
    c.reader.reset();
    return 0;
  }
  std::size_t complete = 0;
  for (;;) {
    void* request = nullptr;
    if (redisReaderGetReply(c.reader.get(), &request) != REDIS_OK) {
      c.reader.reset();
      break;
    }
    // Without reply functions the reader builds no objects: `request` is a
    // non-null marker per complete request, with nothing to free.
    if (request == nullptr) break;
    ++complete;
  }
  owner_.requests_seen_ += complete;
  return complete;
}

// Sends now, or holds the chunk back under delay() or behind chunks still held.
// False when the connection was closed.
bool FaultProxy::Loop::forward(Connection& c, Flow& flow, const char* data, std::size_t size) {
  std::string bytes(data, size);
  const bool delaying = mode_.kind == Kind::delay && mode_.delay.count() > 0;
  if (!delaying && flow.delayed.empty()) return send_to(c, flow, std::move(bytes));
  uv_update_time(&loop_);
  const std::uint64_t now = uv_now(&loop_);
  // +1: uv_now() is truncated to the millisecond, so without it a chunk
  // could leave up to a millisecond early.
  std::uint64_t due = delaying ? now + static_cast<std::uint64_t>(mode_.delay.count()) + 1 : now;
  if (!flow.delayed.empty()) due = std::max(due, flow.delayed.back().due);
  flow.delayed_bytes += bytes.size();
  flow.delayed.push_back({due, std::move(bytes)});
  if (flow.delayed.size() == 1) uv_timer_start(flow.timer.get(), on_timer, due - now, 0);
  return true;
}

bool FaultProxy::Loop::send_to(Connection& c, Flow& flow, std::string bytes) {
  if (&flow == &c.to_client) return write(c, c.client.stream(), std::move(bytes));
  if (c.upstream_ready) return write(c, c.upstream.stream(), std::move(bytes));
  c.unsent += bytes;
  return true;
}

void FaultProxy::Loop::on_timer(uv_timer_t* t) {
  auto* conn = owner_of<Connection>(t);
  conn->proxy.on_flow_timer(*conn, t == conn->to_server.timer.get() ? conn->to_server : conn->to_client);
}

void FaultProxy::Loop::on_flow_timer(Connection& c, Flow& flow) {
  const std::uint64_t now = uv_now(&loop_);
  while (!flow.delayed.empty() && flow.delayed.front().due <= now) {
    Chunk chunk = std::move(flow.delayed.front());
    flow.delayed.pop_front();
    flow.delayed_bytes -= chunk.bytes.size();
    if (!send_to(c, flow, std::move(chunk.bytes))) return;
  }
  if (!flow.delayed.empty()) {
    uv_timer_start(flow.timer.get(), on_timer, flow.delayed.front().due - now, 0);
  }
}

// False when the write failed and the connection was closed.
bool FaultProxy::Loop::write(Connection& c, uv_stream_t* to, std::string bytes) {
  auto request = std::make_unique<WriteRequest>();
  request->bytes = std::move(bytes);
  uv_buf_t buf = uv_buf_init(request->bytes.data(), static_cast<unsigned>(request->bytes.size()));
  const int rc = uv_write(&request->request, to, &buf, 1, [](uv_write_t* r, int status) {
    std::unique_ptr<WriteRequest> free_now(reinterpret_cast<WriteRequest*>(r));
    // UV_ECANCELED means the connection is already closing.
    if (status < 0 && status != UV_ECANCELED) {
      if (auto* conn = owner_of<Connection>(r->handle)) conn->proxy.close(*conn, false);
    }
  });
  if (rc != 0) {
    close(c, false);
    return false;
  }
  static_cast<void>(request.release());  // the write callback frees it
  return true;
}

bool FaultProxy::Loop::within_budget(const Connection& c) const {
  std::size_t held = c.unsent.size() + c.to_server.delayed_bytes + c.to_client.delayed_bytes +
                     uv_stream_get_write_queue_size(c.client.stream()) +
                     uv_stream_get_write_queue_size(c.upstream.stream());
  if (c.reader) held += c.reader->len - c.reader->pos;
  return held <= max_buffered_bytes;
}

// Destroys `c`: callers return at once after calling it.
void FaultProxy::Loop::close(Connection& c, bool reset) {
  c.client.close(reset);
  auto it = connections_.find(&c);
  if (it == connections_.end()) return;  // never opened: its owner frees it
  connections_.erase(it);
  owner_.connections_ = connections_.size();
}

FaultProxy::FaultProxy(int target_port) : loop_(std::make_unique<Loop>(*this, target_port)) {
  port_ = loop_->port();
  thread_ = std::thread([this] {
    block_sigpipe_in_this_thread();
    loop_->run();
  });
}

FaultProxy::~FaultProxy() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  loop_->wake();
  thread_.join();
  loop_.reset();  // asserts uv_loop_close() == 0
}

redlock::Endpoint FaultProxy::endpoint() const {
  redlock::Endpoint e;
  e.host = loopback;
  e.port = port_;
  return e;
}

void FaultProxy::set_mode(Mode mode) {
  std::unique_lock<std::mutex> lock(mutex_);
  wanted_ = std::move(mode);
  const std::uint64_t generation = ++requested_;
  loop_->wake();
  if (!applied_cv_.wait_for(lock, scaled(apply_timeout), [&] { return applied_ >= generation; })) {
    throw std::runtime_error("FaultProxy: the proxy thread did not apply the new mode in time");
  }
}

void FaultProxy::pass() {
  set_mode({Kind::pass, {}, {}, 0});
}

void FaultProxy::delay(std::chrono::milliseconds d) {
  if (d.count() < 0) throw std::invalid_argument("FaultProxy::delay: negative delay");
  set_mode({Kind::delay, d, {}, 0});
}

void FaultProxy::blackhole() {
  set_mode({Kind::blackhole, {}, {}, 0});
}

void FaultProxy::drop_replies() {
  set_mode({Kind::drop_replies, {}, {}, 0});
}

void FaultProxy::blackhole_after(std::uint64_t requests) {
  set_mode({Kind::blackhole_after, {}, {}, requests});
}

void FaultProxy::error_reply(std::string line) {
  if (line.size() < 2 || line.front() != '-' || line.find_first_of("\r\n") != std::string::npos) {
    throw std::invalid_argument("FaultProxy::error_reply: want \"-CODE message\" without CR or LF");
  }
  set_mode({Kind::error_reply, {}, line + "\r\n", 0});
}

void FaultProxy::reset() {
  set_mode({Kind::reset, {}, {}, 0});
}

std::vector<redlock::Endpoint> proxy_each(Cluster& masters,
                                          std::vector<std::unique_ptr<FaultProxy>>& proxies) {
  std::vector<redlock::Endpoint> endpoints;
  for (std::size_t i = 0; i < masters.size(); ++i) {
    proxies.push_back(std::make_unique<FaultProxy>(masters[i].port()));
    endpoints.push_back(proxies.back()->endpoint());
  }
  return endpoints;
}

}  // namespace redlock::test
