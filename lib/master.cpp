#include "master.hpp"

#include "vote.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace redlock {

struct Master::Socket {
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
  };
  uv_connect_t connect_request{};
  Master* owner = nullptr;  // null once the Master let go of this connection

  // A graceful close (see close_gracefully): the write side shut after what is
  // queued, replies read and dropped until the server closes, `timer` bounding it.
  struct Linger {
    uv_shutdown_t shutdown{};
    uv_timer_t timer{};
    std::array<char, 4096> discard{};
    std::uint64_t quiet_ms = 0;    // closes after this long without a byte read
    std::uint64_t give_up_at = 0;  // uv_now() ms; closes then in any case
    int open_handles = 2;          // the socket and the timer
    bool closing = false;
  };
  std::unique_ptr<Linger> linger;

  explicit Socket(Master* m) : owner(m) { std::memset(&tcp, 0, sizeof tcp); }
};

namespace {

using Socket = Master::Socket;

// The close callback of the socket's handles: the last one frees the Socket.
void free_when_closed(uv_handle_t* h) {
  auto* s = static_cast<Socket*>(h->data);
  if (s->linger && --s->linger->open_handles > 0) return;
  std::unique_ptr<Socket> free_now(s);
}

void end_linger(Socket* s) {
  if (std::exchange(s->linger->closing, true)) return;
  uv_close(reinterpret_cast<uv_handle_t*>(&s->linger->timer), free_when_closed);
  uv_close(&s->handle, free_when_closed);
}

void linger_over(uv_timer_t* t) {
  end_linger(static_cast<Socket*>(t->data));
}

// Closing a socket at once loses what it has not sent yet whenever replies
// sit unread in it: Linux answers that close with a reset and drops its send
// queue (seen under load: an unlock issued just before Client::close never
// reached a master whose handshake replies were still unread). So a socket
// with commands in flight shuts its write side after them, reads and drops
// replies until the server closes its side (it ran everything it read by
// then). A server that answers nothing for `quiet` (paused, gone) does not
// hold the close up longer; one still answering (a long queue to work
// through on a loaded machine) holds it up to `cap`.
void close_gracefully(Socket* s, uv_loop_t* loop, std::chrono::milliseconds quiet,
                      std::chrono::milliseconds cap) {
  s->owner = nullptr;
  s->linger = std::make_unique<Socket::Linger>();
  Socket::Linger& linger = *s->linger;
  if (uv_timer_init(loop, &linger.timer) != 0) {
    linger.open_handles = 1;
    linger.closing = true;
    uv_close(&s->handle, free_when_closed);
    return;
  }
  linger.timer.data = s;
  // From now: the loop's cached time is that of its last turn, and a caller
  // busy since would find the bound already past and the socket closed at once.
  uv_update_time(loop);
  linger.quiet_ms = static_cast<std::uint64_t>(quiet.count());
  linger.give_up_at = uv_now(loop) + static_cast<std::uint64_t>(cap.count());
  uv_timer_start(&linger.timer, linger_over, linger.quiet_ms, 0);
  uv_read_stop(&s->stream);
  auto discard = [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
    auto& bytes = static_cast<Socket*>(h->data)->linger->discard;
    *buf = uv_buf_init(bytes.data(), static_cast<unsigned>(bytes.size()));
  };
  auto until_closed = [](uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
    auto* s = static_cast<Socket*>(stream->data);
    if (nread < 0) return end_linger(s);
    Socket::Linger& l = *s->linger;
    std::uint64_t now = uv_now(stream->loop);
    if (nread > 0 && !l.closing && now < l.give_up_at)
      uv_timer_start(&l.timer, linger_over, std::min(l.quiet_ms, l.give_up_at - now), 0);
  };
  int rc = uv_read_start(&s->stream, discard, until_closed);
  if (rc == 0) rc = uv_shutdown(&linger.shutdown, &s->stream, [](uv_shutdown_t*, int) {});
  if (rc != 0) end_linger(s);
}

}  // namespace

void Master::SocketCloser::operator()(Socket* s) const noexcept {
  s->owner = nullptr;
  uv_close(&s->handle, free_when_closed);
}

namespace {

template <class Args>
Encoded encode(std::string_view verb, const Script* script, const Args& argv) {
  constexpr std::size_t max_args = 16;  // lock commands use at most 13
  constexpr std::array<std::string_view, 6> numkeys{"0", "1", "2", "3", "4", "5"};
  if (argv.size() + 3 > max_args) throw std::length_error("redlock: too many command arguments");
  std::array<std::string_view, max_args> all;
  std::size_t n = 0;
  if (script) {
    all[n++] = verb;
    all[n++] = script->sha1;
    all[n++] = numkeys.at(static_cast<std::size_t>(script->keys));
  }
  for (std::string_view a : argv) all[n++] = a;
  return encode_command(all.data(), n);
}

}  // namespace

template <class Args>
std::shared_ptr<const Command> Command::make(const Script* script, const Args& argv) {
  auto c = std::make_shared<Command>();
  if (script) {
    c->encoded_ = encode("EVALSHA", script, argv);
    c->expect_ = Expect::script;
  } else {
    c->encoded_ = encode({}, nullptr, argv);
  }
  c->script_ = script;
  return c;
}

std::shared_ptr<const Command> Command::set_nx(std::initializer_list<std::string_view> argv) {
  auto c = make(nullptr, argv);
  std::const_pointer_cast<Command>(c)->expect_ = Expect::set_nx;
  return c;
}

bool Command::expects(const Reply& reply) const {
  switch (expect_) {
    case Expect::any:
      return true;
    case Expect::set_nx:
      return reply.is_status("OK") || reply.type == Reply::Type::nil;
    case Expect::script: {
      const Reply* result = &reply;
      if (script_->with_counter) {
        // {result, counter}; a counter stays below 2^53 (Lua's exact integers).
        if (reply.type != Reply::Type::array || reply.elements.size() != 2) return false;
        const Reply& counter = reply.elements[1];
        if (counter.type != Reply::Type::integer || counter.integer < 0 || counter.integer >= (1LL << 53))
          return false;
        result = &reply.elements[0];
      }
      return result->type == Reply::Type::integer && result->integer >= script_->min_result &&
             result->integer <= script_->max_result;
    }
    case Expect::flags:
      return reply.type == Reply::Type::string && reply.str.size() == locks_ &&
             reply.str.find_first_not_of("01") == std::string::npos;
  }
  return false;
}

std::shared_ptr<const Command> Command::plain(std::initializer_list<std::string_view> argv) {
  return make(nullptr, argv);
}

std::shared_ptr<const Command> Command::script(const Script& script,
                                               std::initializer_list<std::string_view> argv) {
  return make(&script, argv);
}

std::shared_ptr<const Command> Command::plain(const std::vector<std::string>& argv) {
  return make(nullptr, argv);
}

std::shared_ptr<const Command> Command::script(const Script& script, const std::vector<std::string>& argv) {
  return make(&script, argv);
}

// EVALSHA of `script` on `keys` keys, `argv` being KEYS and then ARGV: for
// the scripts whose key count varies.
template <class Args>
std::shared_ptr<Command> Command::over(const Script& script, std::size_t keys, const Args& argv,
                                       Expect expect) {
  std::string count = std::to_string(keys);
  std::vector<std::string_view> all{"EVALSHA", script.sha1, count};
  all.insert(all.end(), argv.begin(), argv.end());
  auto c = std::make_shared<Command>();
  c->encoded_ = encode_command(all.data(), all.size());
  c->script_ = &script;
  c->expect_ = expect;
  return c;
}

std::shared_ptr<const Command> Command::script_over(const Script& script, std::size_t keys,
                                                    const std::vector<std::string>& argv) {
  return over(script, keys, argv, Expect::script);
}

std::shared_ptr<const Command> Command::read(const Script& script, const std::vector<std::string>& argv) {
  auto c = make(&script, argv);
  std::const_pointer_cast<Command>(c)->expect_ = Expect::any;
  return c;
}

std::shared_ptr<const Command> Command::flags(const Script& script, std::size_t keys,
                                              const std::vector<std::string_view>& argv, std::size_t locks) {
  auto c = over(script, keys, argv, Expect::flags);
  c->locks_ = locks;
  return c;
}

std::string Command::encoded_as_eval() const {
  return replace_first_arguments(encoded_.bytes(), {"EVAL", script_->body});
}

namespace {

// A pub/sub message: ["message", channel, payload].
bool is_message(const Reply& r) {
  return r.type == Reply::Type::array && r.elements.size() == 3 && r.elements[0].str == "message";
}

struct WriteRequest {
  uv_write_t request{};
  std::string bytes;
};

constexpr std::uint64_t no_deadline = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t read_buffer_size = std::size_t{64} * 1024;
// How long a closing connection waits for the server to close its side
// (close_gracefully): at most this long without a reply (a paused master
// does not hold up a shutdown), and at most max_linger in all.
constexpr std::chrono::milliseconds max_linger_quiet{500};
constexpr std::chrono::milliseconds max_linger{5000};
// No reply to anything we send is near this; more unparsed bytes than this
// means the master is broken or hostile.
constexpr std::size_t max_buffered_reply = std::size_t{1} << 20;
// INFO's uptime above this (about 100 years) is not a real uptime.
constexpr long long max_uptime_seconds = 100LL * 365 * 24 * 3600;
// The oldest Redis whose scripts may call TIME and then write.
constexpr int oldest_redis_major = 5;
// An error reply is quoted up to this long in a diagnostics line.
constexpr std::size_t max_error_said = 200;

// What a diagnostics line says of a handshake step the server refused, with
// what to do about the usual causes.
std::string handshake_refusal(std::string_view step, const Reply& reply) {
  std::string_view code = reply.error_code();
  std::string hint;
  if (code == "WRONGPASS") {
    hint = " (wrong user name or password in the URI)";
  } else if (code == "NOAUTH") {
    hint = " (the server wants a password: give it in the URI, redis://:password@host)";
  } else if (code == "NOPERM") {
    hint =
        " (the ACL user lacks a permission: it needs SET, EVAL/EVALSHA, SCRIPT, INFO, PUBLISH, SUBSCRIBE, "
        "the keys ~<key_prefix>* and the channels &<key_prefix>*)";
  }
  return std::string(step) + " refused, it does not vote: " + reply.str.substr(0, max_error_said) + hint;
}

std::uint64_t after(std::uint64_t now, std::chrono::milliseconds d) {
  return now + static_cast<std::uint64_t>(d.count());
}

Master* owner_of_stream(const uv_stream_t* stream) {
  return static_cast<const Master::Socket*>(stream->data)->owner;
}

}  // namespace

// libuv's C callbacks, with access to the Master's private members.
struct Callbacks {
  static void on_connect(uv_connect_t* request, int status) {
    if (status == UV_ECANCELED) return;  // the socket is closing
    if (Master* m = owner_of_stream(request->handle)) m->on_connected(status);
  }

  static void on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buf) {
    Master* m = static_cast<Master::Socket*>(handle->data)->owner;
    assert(m);
    *buf = uv_buf_init(m->read_buffer_.data(), static_cast<unsigned>(m->read_buffer_.size()));
  }

  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
    if (Master* m = owner_of_stream(stream)) m->on_read(nread, buf);
  }

  static void on_written(uv_write_t* request, int status) {
    std::unique_ptr<WriteRequest> owned(static_cast<WriteRequest*>(request->data));
    if (status == 0 || status == UV_ECANCELED) return;
    if (Master* m = owner_of_stream(request->handle))
      m->lost(std::string("write failed: ") + uv_strerror(status));
  }
};

Master::Master(uv_loop_t* loop, MasterConfig config, std::uint64_t seed)
    : loop_(loop),
      config_(std::move(config)),
      backoff_(config_.reconnect_base, config_.reconnect_cap, seed),
      read_buffer_(read_buffer_size),
      deadline_timer_(make_timer(loop, this)),
      reconnect_timer_(make_timer(loop, this)),
      flusher_(loop, this, uv_prepare_init) {
  connect();
}

// A lookup still in flight is abandoned with lookup_: its thread ends on its own.
MasterConfig subscriber_config(const Options& options, std::size_t index,
                               const std::shared_ptr<const TlsContext>& tls) {
  MasterConfig config;
  config.endpoint = options.masters[index];
  config.index = index;
  config.connect_timeout = options.connect_timeout;
  config.command_timeout = options.command_timeout;
  config.diagnostics = options.diagnostics;
  if (config.endpoint.tls) config.tls = tls;
  config.subscriber = true;
  return config;
}

Master::~Master() {
  // What the caller issued before closing (an unlock, a release) still goes
  // out, best effort, and the socket stays open until the server ran it.
  if (!connected()) return;
  bool in_flight = awaiting_reply() || !out_.empty();
  if (!out_.empty() && (!tls_ || tls_->write(out_))) {
    if (tls_) tls_->take_output(out_);
    send_bytes(out_);
  }
  if (in_flight && !config_.subscriber)
    close_gracefully(socket_.release(), loop_, std::min(config_.command_timeout, max_linger_quiet),
                     max_linger);
}

bool Master::voting() const {
  if (state_ != State::ready || !is_master_) return false;
  if (config_.restart_quarantine.count() == 0) return true;
  // INFO reports whole seconds, truncated: count one second more to be sure.
  auto up = uptime_at_connect_ + std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - connected_at_);
  return up >= config_.restart_quarantine + std::chrono::seconds{1};
}

void Master::send(std::shared_ptr<const Command> command, std::weak_ptr<ReplyHandler> handler,
                  std::chrono::milliseconds patience) {
  std::uint64_t now = uv_now(loop_);
  std::uint64_t vote_deadline = after(now, config_.command_timeout);
  Pending p{std::move(command), std::move(handler), vote_deadline,
            std::max(vote_deadline, after(now, patience))};
  p.vote = !p.handler.expired();
  if (connected()) {
    out_ += p.command->encoded();
    p.stage = Stage::buffered;
    uv_prepare_start(flusher_.get(), [](uv_prepare_t* h) { owner_of<Master>(h)->flush(); });
  }
  pending_.push_back(std::move(p));
  if (!connected()) arm_timer();  // a buffered command has no deadline until it is written
}

void Master::flush() {
  uv_prepare_stop(flusher_.get());
  if (out_.empty() || !connected()) return;
  // The buffered commands (the tail of pending_) are written now: their
  // deadlines start here, not when they were issued (a caller that kept the
  // loop busy since must not cost their votes).
  uv_update_time(loop_);
  std::uint64_t reply_deadline = after(uv_now(loop_), config_.command_timeout);
  std::uint64_t written_ns = uv_hrtime();
  for (auto it = pending_.rbegin(); it != pending_.rend() && it->stage == Stage::buffered; ++it) {
    it->stage = Stage::written;
    it->reply_deadline = reply_deadline;
    it->written_ns = written_ns;
  }
  arm_timer();
  write_out();
}

// Writes out_, through TLS for rediss://; false when the connection was lost.
bool Master::write_out() {
  if (tls_) {
    if (!tls_->write(out_)) {
      lost("TLS: " + tls_->error());
      return false;
    }
    tls_->take_output(out_);
  }
  return write_wire(out_);
}

bool Master::write_wire(std::string& bytes) {
  std::string failure = send_bytes(bytes);
  if (!failure.empty()) lost(failure);
  return failure.empty();
}

// Sends `bytes` to the socket and empties it: at once as far as the socket
// takes them, the rest through libuv once its buffer drains. Empty when it
// worked, else why not.
std::string Master::send_bytes(std::string& bytes) {
  std::size_t written = 0;
  if (uv_stream_get_write_queue_size(&socket_->stream) == 0) {
    long sent = send_now(bytes.data(), bytes.size());
    if (sent < 0) return "write failed";
    written = static_cast<std::size_t>(sent);
  }
  if (written == bytes.size()) {
    bytes.clear();
    return {};
  }
  auto request = std::make_unique<WriteRequest>();
  request->bytes = bytes.substr(written);
  bytes.clear();
  request->request.data = request.get();
  uv_buf_t buf = uv_buf_init(request->bytes.data(), static_cast<unsigned>(request->bytes.size()));
  if (int rc = uv_write(&request->request, &socket_->stream, &buf, 1, Callbacks::on_written); rc != 0)
    return std::string("write failed: ") + uv_strerror(rc);
  [[maybe_unused]] WriteRequest* in_flight = request.release();  // on_written frees it
  return {};
}

// send() with MSG_NOSIGNAL rather than libuv's write(): a master that died
// must cost a failed vote, not a SIGPIPE that kills the caller's process.
long Master::send_now(const char* data, std::size_t size) {
  uv_os_fd_t fd = -1;
  if (uv_fileno(&socket_->handle, &fd) != 0) return -1;
  for (;;) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

void Master::connect() {
  connect_deadline_ = after(uv_now(loop_), config_.connect_timeout);
  const Endpoint& e = config_.endpoint;
  if (!e.unix_socket.empty()) {
    connect_unix();
  } else {
    sockaddr_storage address{};
    if (uv_ip4_addr(e.host.c_str(), e.port, reinterpret_cast<sockaddr_in*>(&address)) == 0 ||
        uv_ip6_addr(e.host.c_str(), e.port, reinterpret_cast<sockaddr_in6*>(&address)) == 0) {
      connect_to(reinterpret_cast<const sockaddr*>(&address));
    } else {
      // The last attempt ran out of connect_timeout on this address: this
      // one starts at the next.
      if (attempting_) skip_failed_address();
      if (failed_addresses_ < addresses_.size()) {
        connect_to_cached();
      } else {
        resolve();
      }
    }
  }
  arm_timer();
}

// Never starts a second lookup: while one runs (its DNS may hang), the
// Master waits in State::resolving and its commands fail by their deadlines.
void Master::resolve() {
  state_ = State::resolving;
  if (lookup_) return;
  lookup_ =
      Lookup::start(loop_, config_.endpoint.host, config_.endpoint.port,
                    [this](int status, Addresses addresses) { on_resolved(status, std::move(addresses)); });
  if (!lookup_) lost("cannot start a name lookup");
}

void Master::on_resolved(int status, Addresses addresses) {
  lookup_.reset();
  if (status == 0) {
    // A name may have several addresses (::1 and 127.0.0.1 for localhost);
    // each is tried in turn within connect_timeout.
    addresses_ = std::move(addresses);
    trying_ = 0;
    failed_addresses_ = 0;
  }
  // Dropped while the lookup ran: the reconnect timer will use what it found.
  if (state_ != State::resolving) return;
  if (status != 0) {
    lost("cannot resolve host name '" + config_.endpoint.host + "': " + gai_strerror(status));
    return;
  }
  connect_to_cached();
}

// A fresh socket for a connection attempt; `init` is uv_tcp_init or uv_pipe_init.
template <class Init>
bool Master::open_socket(Init init) {
  state_ = State::connecting;
  std::unique_ptr<Socket> s = std::make_unique<Socket>(this);
  if (int rc = init(*s); rc != 0) {
    lost(std::string("cannot open a socket: ") + uv_strerror(rc));
    return false;
  }
  s->handle.data = s.get();
  socket_.reset(s.release());
  return true;
}

void Master::connect_to(const sockaddr* address) {
  if (!open_socket([this](Socket& s) { return uv_tcp_init(loop_, &s.tcp); })) return;
  uv_tcp_nodelay(&socket_->tcp, 1);
  int rc = uv_tcp_connect(&socket_->connect_request, &socket_->tcp, address, Callbacks::on_connect);
  if (rc != 0 && !try_next_address()) lost(std::string("cannot connect: ") + uv_strerror(rc));
}

void Master::connect_to_cached() {
  attempting_ = true;
  connect_to(reinterpret_cast<const sockaddr*>(&addresses_[trying_]));
}

// Counts addresses_[trying_] as failed and moves to the next; false once
// every cached address has failed (the next connect() looks the name up).
bool Master::skip_failed_address() {
  attempting_ = false;
  ++failed_addresses_;
  trying_ = (trying_ + 1) % addresses_.size();
  return failed_addresses_ < addresses_.size();
}

bool Master::try_next_address() {
  if (!attempting_ || !skip_failed_address()) return false;
  socket_.reset();
  connect_to_cached();
  return true;
}

void Master::connect_unix() {
  if (!open_socket([this](Socket& s) { return uv_pipe_init(loop_, &s.pipe, 0); })) return;
  uv_pipe_connect(&socket_->connect_request, &socket_->pipe, config_.endpoint.unix_socket.c_str(),
                  Callbacks::on_connect);
}

void Master::on_connected(int status) {
  if (status != 0 && try_next_address()) return;
  if (status == 0) status = uv_read_start(&socket_->stream, Callbacks::on_alloc, Callbacks::on_read);
  if (status != 0) {
    lost(std::string("cannot connect: ") + uv_strerror(status));
    return;
  }
  attempting_ = false;
  failed_addresses_ = 0;  // trying_ stays: the next connection starts with the address that worked
  ++generation_;
  reader_ = std::make_unique<ReplyReader>();
  heard_ = false;
  if (config_.tls) {
    tls_ = std::make_unique<TlsSession>(*config_.tls, config_.endpoint.host);
    continue_tls_handshake();
    return;
  }
  start_handshake();
}

// rediss://: the TLS handshake comes first, within connect_timeout; AUTH and
// the rest follow once it is done, encrypted.
void Master::continue_tls_handshake() {
  TlsSession::Progress progress = tls_->handshake();
  std::string bytes;
  tls_->take_output(bytes);
  if (!bytes.empty() && !write_wire(bytes)) return;
  if (progress == TlsSession::Progress::failed) {
    refused("TLS handshake failed: " + tls_->error());
  } else if (progress == TlsSession::Progress::done) {
    start_handshake();
  }
}

// The handshake is pipelined with the commands that waited for the connection:
// one write carries both, so the first command costs one round trip, not three.
void Master::start_handshake() {
  state_ = State::handshaking;
  const Endpoint& e = config_.endpoint;
  std::string bytes;
  // A user with an empty password still authenticates as that user (an ACL
  // user may be "nopass"); without a user, no password means no AUTH.
  if (!e.username.empty()) {
    append_command(bytes, {"AUTH", e.username, e.password});
    handshake_.push_back({Step::auth});
  } else if (!e.password.empty()) {
    append_command(bytes, {"AUTH", e.password});
    handshake_.push_back({Step::auth});
  }
  // A subscriber needs no database (channels are server-wide), scripts or INFO.
  if (!config_.subscriber) {
    if (e.database != 0) {
      std::string db = std::to_string(e.database);
      append_command(bytes, {"SELECT", db});
      handshake_.push_back({Step::select});
    }
    for (const Script* s : scripts::all) {
      append_command(bytes, {"SCRIPT", "LOAD", s->body});
      handshake_.push_back({Step::load_script, s});
    }
    // All of INFO (a few kB, once per connection) rather than sections: asking
    // for several sections at once needs Redis 7.
    append_command(bytes, {"INFO"});
    handshake_.push_back({Step::info});
    if (!config_.publish_probe.empty()) {
      append_command(bytes, {"PUBLISH", config_.publish_probe, ""});
      handshake_.push_back({Step::publish_probe});
    }
  }
  for (Pending& p : pending_) {
    assert(p.stage == Stage::queued);
    bytes += p.rerun ? p.command->encoded_as_eval() : std::string(p.command->encoded());
    p.stage = Stage::buffered;
  }
  out_ = std::move(bytes);
  flush();
  if (handshake_.empty() && state_ == State::handshaking) handshake_done();
}

// Something is owed a reply: a handshake step or a written command.
bool Master::awaiting_reply() const {
  return !handshake_.empty() || (!pending_.empty() && pending_.front().stage == Stage::written);
}

void Master::on_read(ssize_t nread, const uv_buf_t* buf) {
  if (nread == 0) return;
  if (nread < 0) {
    lost(closed(nread == UV_EOF ? "the server closed the connection"
                                : std::string("connection lost: ") + uv_strerror(static_cast<int>(nread))));
    return;
  }
  heard_ = true;
  if (tls_) {
    on_tls_bytes(buf->base, static_cast<std::size_t>(nread));
  } else {
    on_plaintext(buf->base, static_cast<std::size_t>(nread));
  }
}

// What a closed connection says, with a hint when TLS is the likely cause:
// a TLS port closes on a plain client before any reply, and a plain port
// never finishes a TLS handshake.
std::string Master::closed(std::string why) const {
  if (tls_ && !tls_->handshake_done()) {
    why += " during the TLS handshake";
  } else if (!tls_ && !heard_ && config_.endpoint.unix_socket.empty()) {
    why += " before any reply (is this a TLS port? use rediss://)";
  }
  return why;
}

void Master::on_tls_bytes(const char* data, std::size_t size) {
  std::uint64_t generation = generation_;
  tls_->receive(data, size);
  if (!tls_->handshake_done()) {
    continue_tls_handshake();
    if (generation != generation_ || !tls_->handshake_done()) return;
  }
  std::string plain;
  bool ok = tls_->read(plain);
  std::string bytes;
  tls_->take_output(bytes);  // TLS may answer what it read
  if (!bytes.empty() && !write_wire(bytes)) return;
  if (!plain.empty()) on_plaintext(plain.data(), plain.size());
  if (!ok && generation == generation_) lost("TLS: " + tls_->error());
}

void Master::on_plaintext(const char* data, std::size_t size) {
  if (!awaiting_reply() && !config_.subscriber) {
    protocol_error("sent bytes nobody asked for");
    return;
  }
  if (!reader_->feed(data, size)) {
    protocol_error(reader_->error());
    return;
  }
  std::uint64_t generation = generation_;
  while (generation == generation_) {
    std::optional<Reply> reply = reader_->next();
    if (!reply) {
      if (!reader_->error().empty()) {
        protocol_error(reader_->error());
      } else if (reader_->buffered() > max_buffered_reply) {
        protocol_error("a reply larger than any we ask for");
      }
      return;
    }
    if (config_.subscriber && is_message(*reply)) {
      if (config_.on_message) config_.on_message(reply->elements[1].str, reply->elements[2].str);
    } else if (!handshake_.empty()) {
      on_handshake_reply(*reply);
    } else if (!pending_.empty() && pending_.front().stage == Stage::written) {
      on_command_reply(*reply);
    } else {
      protocol_error("sent a reply nobody asked for");
    }
  }
}

// Reads what the socket already holds, without waiting: libuv runs timers
// before it polls, so after a stall replies that came in time may sit unread
// when a deadline fires.
void Master::read_now() {
  uv_os_fd_t fd = -1;
  if (!connected() || uv_fileno(&socket_->handle, &fd) != 0) return;
  std::uint64_t generation = generation_;
  for (int i = 0; i < 16 && generation == generation_; ++i) {
    ssize_t n = ::recv(fd, read_buffer_.data(), read_buffer_.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      lost(closed(n == 0 ? "the server closed the connection"
                         : std::string("connection lost: ") + std::strerror(errno)));
      return;
    }
    uv_buf_t buf = uv_buf_init(read_buffer_.data(), static_cast<unsigned>(n));
    on_read(n, &buf);
  }
}

void Master::on_handshake_reply(const Reply& reply) {
  HandshakeStep step = handshake_.front();
  handshake_.pop_front();
  if (step.step == Step::publish_probe && reply.is_error()) {
    // Not a reason to refuse the vote: unlocks still delete, they just wake nobody.
    warn("PUBLISH refused: " + reply.str.substr(0, max_error_said) +
         " (unlocks cannot wake waiters, who fall back to retry_delay; give the ACL user the channels "
         "&<key_prefix>*)");
    if (handshake_.empty()) handshake_done();
    return;
  }
  if (reply.is_error()) {
    // Wrong password, unknown database, scripting disabled: this master cannot vote.
    std::string_view name = step.step == Step::auth     ? "AUTH"
                            : step.step == Step::select ? "SELECT"
                            : step.step == Step::info   ? "INFO"
                                                        : "SCRIPT LOAD";
    refused(handshake_refusal(name, reply));
    return;
  }
  bool expected = false;
  switch (step.step) {
    case Step::auth:
    case Step::select:
      expected = reply.is_status("OK");
      break;
    case Step::load_script:
      expected = reply.type == Reply::Type::string && reply.str == step.script->sha1;
      break;
    case Step::info:
      expected = reply.type == Reply::Type::string;
      if (expected) {
        std::string unfit = parse_info(reply.str);
        if (!unfit.empty()) {
          refused(unfit);
          return;
        }
      }
      break;
    case Step::publish_probe:
      expected = reply.type == Reply::Type::integer;
      break;
  }
  if (!expected) {
    protocol_error("answered the handshake with something Redis never sends");
    return;
  }
  if (handshake_.empty()) handshake_done();
}

void Master::handshake_done() {
  state_ = State::ready;
  is_master_ = is_master_ || config_.subscriber;  // a subscriber reads no INFO and never votes anyway
  connected_at_ = std::chrono::steady_clock::now();
  ++connections_;
  if (cause_before_ready_) recovered();
  arm_timer();
  if (config_.on_ready) config_.on_ready(*this);
  if (std::exchange(restarted_, false) && config_.on_restarted) config_.on_restarted(*this);
}

// Each cause is said once, however often it repeats: again only when it
// changes or after the master recovered. A subscriber connection keeps
// network failures to itself (`network`): the command connection to the same
// master says those.
void Master::report(const std::string& cause, bool network) {
  cause_before_ready_ = state_ != State::ready;
  if (cause == cause_) return;
  cause_ = cause;
  cause_said_ = !config_.subscriber || !network;
  if (cause_said_) warn(cause);
}

void Master::recovered() {
  if (cause_.empty()) return;
  cause_.clear();
  if (cause_said_) warn("connected and answering again");
}

void Master::refused(const std::string& why) {
  report(why, false);
  drop(Failure::disconnected);
}

void Master::protocol_error(const std::string& why) {
  refused("protocol error, connection dropped: " + why);
}

// The connection could not be made or was lost: said, then reconnected with backoff.
void Master::lost(const std::string& why, Failure failure) {
  report(why, true);
  drop(failure);
}

// Which part of setting up a connection missed connect_timeout.
std::string Master::connect_timed_out() const {
  std::string limit = "within connect_timeout (" + std::to_string(config_.connect_timeout.count()) + " ms)";
  switch (state_) {
    case State::resolving:
      return "no answer from DNS for '" + config_.endpoint.host + "' " + limit;
    case State::connecting:
      if (tls_)
        return "connected, but no TLS handshake " + limit + " (does the server speak TLS on this port?)";
      return "no connection " + limit;
    case State::handshaking:
      return "connected, but no answer to AUTH/SELECT/SCRIPT LOAD/INFO " + limit;
    case State::backing_off:
    case State::ready:
      break;
  }
  return "not ready " + limit;
}

std::string Master::trouble() const {
  if (!cause_.empty()) return cause_;
  if (voting()) return {};
  switch (state_) {
    case State::backing_off:
    case State::resolving:
    case State::connecting:
    case State::handshaking:
      return "not connected yet";
    case State::ready:
      break;
  }
  if (!is_master_) return "its role is not master: it does not vote";
  return "in restart quarantine";
}

MasterStats Master::stats() const {
  MasterStats s;
  s.endpoint = config_.endpoint.to_string();
  s.cause = trouble();
  if (voting()) {
    s.state = MasterState::up;
  } else if (state_ == State::ready && is_master_) {
    s.state = MasterState::quarantined;
  } else if (state_ == State::ready || !cause_.empty()) {
    s.state = MasterState::down;  // not a master, or something failed
  }
  s.role = role_;
  s.votes_granted = counters_.granted;
  s.votes_refused = counters_.refused;
  s.votes_failed = counters_.failed;
  s.timeouts = counters_.timeouts;
  s.reconnects = connections_ > 0 ? connections_ - 1 : 0;
  s.rtt = counters_.rtt;
  return s;
}

std::string Master::parse_info(const std::string& info) {
  auto field = [&info](std::string_view name) -> std::string {
    std::string key = "\n" + std::string(name) + ":";
    auto at = ("\n" + info).find(key);
    if (at == std::string::npos) return {};
    auto begin = at + key.size() - 1;
    auto end = info.find_first_of("\r\n", begin);
    return info.substr(begin, end - begin);
  };
  std::string run_id = field("run_id");
  restarted_ = !run_id_.empty() && run_id != run_id_;
  run_id_ = std::move(run_id);
  std::string uptime = field("uptime_in_seconds");
  long long seconds = 0;
  auto [end, ec] = std::from_chars(uptime.data(), uptime.data() + uptime.size(), seconds);
  if (ec != std::errc{} || end != uptime.data() + uptime.size() || seconds < 0 ||
      seconds > max_uptime_seconds) {
    // Unreadable counts as just started: the quarantine errs on the safe side.
    if (config_.restart_quarantine.count() > 0) warn("uptime_in_seconds '" + uptime + "' is not an uptime");
    seconds = 0;
  }
  uptime_at_connect_ = std::chrono::seconds{seconds};

  std::string role = field("role");
  role_ = role;
  is_master_ = role == "master";
  if (!is_master_)
    warn("its role is " + (role.empty() ? "unknown" : role) + ", not master: it does not vote");
  std::string policy = field("maxmemory_policy");
  if (!policy.empty() && policy != "noeviction") {
    warn("maxmemory-policy is " + policy + ", not noeviction: an evicted lock key is a lost vote");
  }
  auto quarantine = config_.restart_quarantine;
  if (quarantine.count() > 0 && uptime_at_connect_ < quarantine + std::chrono::seconds{1}) {
    warn("up for " + std::to_string(seconds) + " s: in restart quarantine, no vote until it has been up " +
         std::to_string(quarantine.count()) + " ms (+1 s)");
  }
  // The scripts call TIME before they write, which Redis refuses before 5.0
  // (from 5.0 on, scripts replicate their effects, not themselves).
  std::string version = field("redis_version");
  int major = 0;
  auto [major_end, major_ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  if (major_ec == std::errc{} && major_end != version.data() && major < oldest_redis_major) {
    return "redis_version is " + version +
           ", older than 5.0, the oldest this library supports (its scripts call TIME before writing): it "
           "does not vote";
  }
  return {};
}

void Master::warn(const std::string& message) const {
  // Endpoint::to_string() leaves the password out.
  if (!config_.diagnostics) return;
  config_.diagnostics(config_.endpoint.to_string() +
                      (config_.subscriber ? " (subscriber connection): " : ": ") + message);
}

void Master::on_command_reply(const Reply& reply) {
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  counters_.round_trip(std::chrono::microseconds((uv_hrtime() - p.written_ns) / 1000));
  if (reply.is_error() && reply.error_code() == "NOSCRIPT" && p.command->script()) {
    if (on_noscript(p)) return;
  } else if (!reply.is_error() && !p.command->expects(reply)) {
    // A yes in the wrong shape is not a yes: the master is broken or hostile.
    pending_.push_front(std::move(p));
    protocol_error("answered '" + (reply.str.empty() ? std::to_string(reply.integer) : reply.str) +
                   "', which that command never gets");
    return;
  } else if (!reply.is_error()) {
    backoff_.reset();  // a good reply: this connection has proved itself
    recovered();
  } else {
    // A subscriber's commands are no votes: a refused SUBSCRIBE (an ACL user
    // without the &__keyspace@*__:* channels) means no messages on those channels.
    report(std::string(config_.subscriber
                           ? "refused on the subscriber connection, its messages are not heard there: "
                           : "answered an error reply, a failed vote: ") +
               reply.str.substr(0, max_error_said),
           false);
  }
  arm_timer();
  deliver(p, &reply, Failure::disconnected);
}

// The master lost its scripts (SCRIPT FLUSH, or a restart behind a proxy).
// Nothing may run out of the order it was issued on one connection: the
// commands written after this one have run already, so re-running it after
// them could, say, delete the key a retry's SET just took. It runs again with
// EVAL only when nothing was written after it, at most once; otherwise its
// vote fails (a release not run leaves the key to its ttl, which is safe) and
// SCRIPT LOAD restores the cache for the commands that follow. True when
// `p` was re-sent.
bool Master::on_noscript(Pending& p) {
  if (!p.rerun && pending_.empty() && out_.empty()) {
    p.rerun = true;
    p.stage = Stage::buffered;
    out_ += p.command->encoded_as_eval();
    pending_.push_back(std::move(p));
    flush();
    return true;
  }
  if (p.rerun) warn("answered NOSCRIPT to EVAL: a failed vote");
  const Script& script = *p.command->script();
  send(Command::plain({"SCRIPT", "LOAD", script.body}), {});
  arm_timer();
  deliver(p, nullptr, Failure::unusable);
  return true;
}

void Master::deliver(Pending& p, const Reply* reply, Failure why) {
  if (p.answered) return;
  p.answered = true;
  if (!reply && why == Failure::timeout) ++counters_.timeouts;
  count_vote(p, reply);
  std::shared_ptr<ReplyHandler> handler = p.handler.lock();
  if (!handler) return;
  if (reply) {
    handler->on_reply(*this, *reply);
  } else {
    handler->on_failure(*this, why);
  }
}

// Every vote asked of this master counts, also one that arrives after its
// round decided. A renewal batch holds one vote per lock.
void Master::count_vote(const Pending& p, const Reply* reply) {
  if (!p.vote) return;
  std::uint64_t votes = std::max<std::size_t>(1, p.command->batch());
  if (!reply || !voting()) {
    counters_.failed += votes;
    return;
  }
  if (p.command->batch() > 0 && reply->type == Reply::Type::string) {
    for (char c : reply->str) ++(c == '1' ? counters_.granted : counters_.refused);
    return;
  }
  switch (classify(*reply)) {
    case Vote::yes:
      counters_.granted += votes;
      break;
    case Vote::no:
      counters_.refused += votes;
      break;
    case Vote::failed:
      counters_.failed += votes;
      break;
  }
}

void Master::drop(Failure why) {
  bool was_ready = state_ == State::ready;
  socket_.reset();
  reader_.reset();
  tls_.reset();
  ++generation_;
  handshake_.clear();
  out_.clear();
  uv_prepare_stop(flusher_.get());
  state_ = State::backing_off;
  // A connection that stayed up a while proved itself even without a reply.
  if (was_ready && std::chrono::steady_clock::now() - connected_at_ >= config_.reconnect_cap)
    backoff_.reset();
  schedule_reconnect();
  // Written commands fail (they may still have run). A release with patience
  // left goes again on the next connection: deleting our own value twice is
  // harmless, and a vote it might undo was counted as failed. Commands never
  // written wait for the next connection, in order, until their deadlines.
  std::deque<Pending> failed;
  std::deque<Pending> waiting;
  std::uint64_t now = uv_now(loop_);
  for (Pending& p : pending_) {
    bool written = p.stage == Stage::written;
    p.stage = Stage::queued;
    if (!written) {
      waiting.push_back(std::move(p));
      continue;
    }
    if (p.give_up > now) {
      waiting.push_back(p);
      waiting.back().answered = true;  // its vote fails below
    }
    failed.push_back(std::move(p));
  }
  pending_.swap(waiting);
  arm_timer();
  // The first command timed out; the rest lost their connection with it.
  bool first = true;
  for (Pending& p : failed) {
    if (p.answered) continue;
    deliver(p, nullptr, first ? why : Failure::disconnected);
    first = false;
  }
  if (config_.on_dropped) config_.on_dropped(*this);
}

void Master::schedule_reconnect() {
  auto delay = backoff_.next();
  uv_timer_start(
      reconnect_timer_.get(), [](uv_timer_t* t) { owner_of<Master>(t)->connect(); },
      static_cast<std::uint64_t>(delay.count()), 0);
}

void Master::arm_timer() {
  std::uint64_t next = no_deadline;
  if (state_ != State::ready && state_ != State::backing_off) next = connect_deadline_;
  if (connected()) {
    // Written commands' deadlines grow along the FIFO; entries answered
    // during the handshake come first and wait for no deadline.
    for (const Pending& p : pending_) {
      if (p.stage != Stage::written) break;
      if (p.answered) continue;
      next = std::min(next, p.reply_deadline);
      break;
    }
  } else {
    for (const Pending& p : pending_) next = std::min(next, p.answered ? p.give_up : p.vote_deadline);
  }
  // Deadlines only grow along the FIFO, so a timer already due no later than
  // `next` may stay: when it fires early, on_timer() finds nothing and
  // re-arms. That spares a timer restart per reply.
  if (next == no_deadline || (timer_due_ != 0 && timer_due_ <= next)) return;
  std::uint64_t now = uv_now(loop_);
  timer_due_ = std::max(next, now);
  uv_timer_start(
      deadline_timer_.get(), [](uv_timer_t* t) { owner_of<Master>(t)->on_timer(); }, timer_due_ - now, 0);
}

void Master::fail_expired_in_handshake(std::uint64_t now) {
  // Their replies are still due: each entry stays, answered, to keep the FIFO in step.
  std::vector<std::weak_ptr<ReplyHandler>> expired;
  for (Pending& p : pending_) {
    if (p.stage != Stage::written || p.reply_deadline > now) break;
    if (p.answered) continue;
    p.answered = true;
    ++counters_.timeouts;
    count_vote(p, nullptr);
    expired.push_back(p.handler);
  }
  arm_timer();
  for (auto& weak : expired) {
    if (auto handler = weak.lock()) handler->on_failure(*this, Failure::timeout);
  }
}

void Master::on_timer() {
  timer_due_ = 0;
  // Replies that arrived in time but were not read yet (the loop stalled)
  // count before any deadline does.
  read_now();
  std::uint64_t now = uv_now(loop_);
  bool setting_up = state_ != State::ready && state_ != State::backing_off;
  if (setting_up && now >= connect_deadline_) {
    lost(connect_timed_out(), Failure::timeout);
    return;
  }
  if (!connected()) {
    expire_queued(now);
    return;
  }
  auto first = std::find_if(pending_.begin(), pending_.end(),
                            [](const Pending& p) { return p.stage != Stage::written || !p.answered; });
  if (first != pending_.end() && first->stage == Stage::written && first->reply_deadline <= now) {
    // The handshake has its own deadline (connect_timeout): a command that
    // expires meanwhile fails, but the connection stays.
    if (state_ == State::handshaking) {
      fail_expired_in_handshake(now);
      return;
    }
    // A master that missed its deadline may still answer; drop the connection
    // so that late replies can't be matched to the wrong command.
    lost("stopped answering: no reply within command_timeout (" +
             std::to_string(config_.command_timeout.count()) + " ms), reconnecting",
         Failure::timeout);
    return;
  }
  arm_timer();
}

// Without a connection: a command whose vote deadline passed fails its vote
// but keeps its bytes queued until it gives up (releases wait longer); the
// order of what stays is kept.
void Master::expire_queued(std::uint64_t now) {
  std::vector<std::weak_ptr<ReplyHandler>> failed;
  for (Pending& p : pending_) {
    if (p.answered || p.vote_deadline > now) continue;
    p.answered = true;
    ++counters_.timeouts;
    count_vote(p, nullptr);
    failed.push_back(p.handler);
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [now](const Pending& p) { return p.answered && p.give_up <= now; }),
                 pending_.end());
  arm_timer();
  for (auto& weak : failed) {
    if (auto handler = weak.lock()) handler->on_failure(*this, Failure::timeout);
  }
}

}  // namespace redlock
