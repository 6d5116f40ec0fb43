#include "floor.hpp"

#include <hiredis/hiredis.h>

#include <utility>

namespace bench {

struct Floor::Connection {
  uv_tcp_t tcp{};
  uv_connect_t connect{};
  uv_prepare_t flusher{};
  Floor* floor = nullptr;
  redisReader* reader = redisReaderCreate();
  std::deque<std::uint64_t> ops;  // op ids in the order their replies will come
  std::string out;
  char buffer[64 * 1024];
  int open_handles = 2;

  ~Connection() { redisReaderFree(reader); }
};

namespace {

struct Write {
  uv_write_t request{};
  std::string bytes;
};

void flush(Floor::Connection& c) {
  uv_prepare_stop(&c.flusher);
  if (c.out.empty()) return;
  uv_buf_t buf = uv_buf_init(c.out.data(), static_cast<unsigned>(c.out.size()));
  int n = uv_try_write(reinterpret_cast<uv_stream_t*>(&c.tcp), &buf, 1);
  if (n == UV_EAGAIN) n = 0;
  if (n >= 0 && static_cast<std::size_t>(n) == c.out.size()) {
    c.out.clear();
    return;
  }
  auto w = std::make_unique<Write>();
  w->bytes = c.out.substr(n > 0 ? static_cast<std::size_t>(n) : 0);
  c.out.clear();
  w->request.data = w.get();
  buf = uv_buf_init(w->bytes.data(), static_cast<unsigned>(w->bytes.size()));
  if (uv_write(&w->request, reinterpret_cast<uv_stream_t*>(&c.tcp), &buf, 1,
               [](uv_write_t* r, int) { std::unique_ptr<Write> done(static_cast<Write*>(r->data)); }) == 0) {
    w.release();
  }
}

}  // namespace

Floor::Floor(uv_loop_t* loop, const std::vector<int>& ports) : loop_(loop) {
  for (int port : ports) {
    auto c = std::make_unique<Connection>();
    c->floor = this;
    uv_tcp_init(loop, &c->tcp);
    uv_prepare_init(loop, &c->flusher);
    c->tcp.data = c.get();
    c->flusher.data = c.get();
    uv_tcp_nodelay(&c->tcp, 1);
    sockaddr_in address{};
    uv_ip4_addr("127.0.0.1", port, &address);
    c->connect.data = c.get();
    uv_tcp_connect(&c->connect, &c->tcp, reinterpret_cast<const sockaddr*>(&address),
                   [](uv_connect_t* r, int status) {
                     auto* conn = static_cast<Connection*>(r->data);
                     if (status != 0) {
                       ++conn->floor->failed_connects_;
                       return;
                     }
                     ++conn->floor->connects_;
                     uv_read_start(
                         reinterpret_cast<uv_stream_t*>(&conn->tcp),
                         [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
                           auto* c = static_cast<Connection*>(h->data);
                           *buf = uv_buf_init(c->buffer, sizeof c->buffer);
                         },
                         [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
                           auto* c = static_cast<Connection*>(s->data);
                           if (n <= 0) return;
                           redisReaderFeed(c->reader, buf->base, static_cast<std::size_t>(n));
                           void* raw = nullptr;
                           while (redisReaderGetReply(c->reader, &raw) == REDIS_OK && raw) {
                             auto* reply = static_cast<redisReply*>(raw);
                             if (c->ops.empty()) {
                               c->floor->on_unasked(reply);
                               freeReplyObject(raw);
                               continue;
                             }
                             bool yes = (reply->type == REDIS_REPLY_STATUS && reply->len == 2) ||
                                        (reply->type == REDIS_REPLY_INTEGER && reply->integer > 0);
                             freeReplyObject(raw);
                             c->floor->on_reply(*c, yes);
                           }
                         });
                   });
    connections_.push_back(c.release());
  }
}

Floor::~Floor() {
  close();
}

bool Floor::connected() {
  int n = static_cast<int>(connections_.size());
  for (int i = 0; i < 100000 && connects_ + failed_connects_ < n; ++i) uv_run(loop_, UV_RUN_ONCE);
  return connects_ == n;
}

void Floor::fan_out(const std::string& command, std::function<void(bool)> done) {
  std::uint64_t id = next_op_++;
  ops_[id].done = std::move(done);
  for (Connection* c : connections_) {
    c->out += command;
    c->ops.push_back(id);
    uv_prepare_start(&c->flusher, [](uv_prepare_t* p) { flush(*static_cast<Connection*>(p->data)); });
  }
}

void Floor::on_reply(Connection& c, bool yes) {
  std::uint64_t id = c.ops.front();
  c.ops.pop_front();
  auto it = ops_.find(id);
  Op& op = it->second;
  op.yes += yes ? 1 : 0;
  ++op.replies;
  int n = static_cast<int>(connections_.size());
  int majority = n / 2 + 1;
  std::function<void(bool)> done;
  bool outcome = false;
  if (!op.decided && (op.yes >= majority || op.replies - op.yes > n - majority)) {
    op.decided = true;
    outcome = op.yes >= majority;
    done = std::move(op.done);
  }
  if (op.replies == n) ops_.erase(it);
  if (done) done(outcome);
}

// A pub/sub message is ["message", channel, payload].
void Floor::on_unasked(const void* raw) {
  const auto* reply = static_cast<const redisReply*>(raw);
  if (!on_message_ || reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) return;
  const redisReply* kind = reply->element[0];
  const redisReply* payload = reply->element[2];
  if (kind->type != REDIS_REPLY_STRING || std::string(kind->str, kind->len) != "message") return;
  if (payload->type != REDIS_REPLY_STRING) return;
  on_message_(std::string(payload->str, payload->len));
}

void Floor::close() {
  for (Connection* c : connections_) {
    auto on_closed = [](uv_handle_t* h) {
      auto* conn = static_cast<Connection*>(h->data);
      if (--conn->open_handles == 0) std::unique_ptr<Connection> free_now(conn);
    };
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_closed);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->flusher), on_closed);
  }
  connections_.clear();
}

}  // namespace bench
