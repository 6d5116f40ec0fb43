// An operator's view of the masters: Client::stats() served in the Prometheus
// text format on a local port, next to a little lock traffic to watch.
//
//   stats-exporter --port 9464 redis://127.0.0.1:7001 redis://127.0.0.1:7002 redis://127.0.0.1:7003
//   curl http://127.0.0.1:9464/metrics
//
// Takes and releases the lock exporter:demo every 100 ms, and answers every
// GET /metrics with to_prometheus(client.stats()). Listens on 127.0.0.1 only.
// Prints "serving http://127.0.0.1:PORT/metrics" once listening (--port 0
// picks a free port). Runs until SIGINT or SIGTERM, or --seconds S.
// Exit status: 0 stopped, 1 could not listen, 64 bad arguments.

#include <netinet/in.h>
#include <uv.h>

#include <redlock/redlock.hpp>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "args.hpp"

using namespace std::chrono_literals;

namespace {

const char* const usage_text =
    "usage: stats-exporter [--port N] [--seconds S] MASTER_URI...\n"
    "  Serves Client::stats() in the Prometheus text format at\n"
    "  http://127.0.0.1:N/metrics (N = 9464 by default, 0 = any free port) while it\n"
    "  takes and releases exporter:demo every 100 ms on the masters\n"
    "  (redis://[user:pass@]host[:port][/db] or unix:///path).\n"
    "  Runs until SIGINT or SIGTERM, or for S seconds.\n"
    "  Exit status: 0 stopped, 1 could not listen, 64 bad arguments.\n";

constexpr std::size_t max_request = 8192;

std::string http_response(std::string_view request, const redlock::Client& client) {
  bool metrics = request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET /metrics?", 0) == 0;
  std::string status = metrics ? "200 OK" : "404 Not Found";
  std::string body = metrics ? redlock::to_prometheus(client.stats()) : "try /metrics\n";
  return "HTTP/1.1 " + status +
         "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

struct Exporter;

// One HTTP connection: reads one request, answers it, closes. Owned by its
// handle from accept to the close callback, which frees it.
struct Connection {
  uv_tcp_t socket{};
  uv_write_t write{};
  Exporter* exporter;
  std::string request;
  std::string response;
  char buffer[2048];

  explicit Connection(Exporter* e) : exporter(e) {}

  void close();
};

struct Exporter {
  redlock::Client locks;
  uv_tcp_t server{};
  uv_timer_t traffic{};
  uv_timer_t stop_after{};
  uv_signal_t interrupt{};
  uv_signal_t terminate{};
  bool busy = false;           // a lock/unlock cycle is in flight
  std::set<Connection*> open;  // closed by stop(), so that the loop can end

  Exporter(uv_loop_t* loop, redlock::Options options) : locks(loop, std::move(options)) {
    uv_tcp_init(loop, &server);
    uv_timer_init(loop, &traffic);
    uv_timer_init(loop, &stop_after);
    uv_signal_init(loop, &interrupt);
    uv_signal_init(loop, &terminate);
    for (uv_handle_t* h : handles()) h->data = this;
  }

  std::array<uv_handle_t*, 5> handles() {
    return {reinterpret_cast<uv_handle_t*>(&server), reinterpret_cast<uv_handle_t*>(&traffic),
            reinterpret_cast<uv_handle_t*>(&stop_after), reinterpret_cast<uv_handle_t*>(&interrupt),
            reinterpret_cast<uv_handle_t*>(&terminate)};
  }

  int listen(int port) {
    sockaddr_in address{};
    uv_ip4_addr("127.0.0.1", port, &address);
    int error = uv_tcp_bind(&server, reinterpret_cast<const sockaddr*>(&address), 0);
    if (error == 0) {
      error = uv_listen(reinterpret_cast<uv_stream_t*>(&server), 16, [](uv_stream_t* s, int status) {
        if (status == 0) static_cast<Exporter*>(s->data)->accept();
      });
    }
    if (error != 0) return error;
    sockaddr_in bound{};
    int size = sizeof bound;
    uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&bound), &size);
    std::printf("serving http://127.0.0.1:%d/metrics\n", ntohs(bound.sin_port));
    std::fflush(stdout);
    return 0;
  }

  void start(std::chrono::seconds run_for) {
    uv_timer_start(
        &traffic, [](uv_timer_t* t) { static_cast<Exporter*>(t->data)->cycle(); }, 0, 100);
    if (run_for.count() > 0) {
      uv_timer_start(
          &stop_after, [](uv_timer_t* t) { static_cast<Exporter*>(t->data)->stop(); },
          static_cast<std::uint64_t>(run_for.count()) * 1000, 0);
    }
    for (uv_signal_t* s : {&interrupt, &terminate}) {
      uv_signal_start_oneshot(
          s, [](uv_signal_t* h, int) { static_cast<Exporter*>(h->data)->stop(); },
          s == &interrupt ? SIGINT : SIGTERM);
    }
  }

  void cycle() {
    if (busy) return;
    busy = true;
    locks.try_lock("exporter:demo", 1000ms, [this](std::error_code error, redlock::Lock lock) {
      if (error) {
        busy = false;
        return;
      }
      locks.unlock(lock, [this](std::error_code) { busy = false; });
    });
  }

  void accept() {
    auto connection = std::make_unique<Connection>(this);
    uv_tcp_init(server.loop, &connection->socket);
    connection->socket.data = connection.get();
    Connection* c = connection.release();  // owned by its handle until the close callback
    open.insert(c);
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&server), reinterpret_cast<uv_stream_t*>(&c->socket)) != 0) {
      c->close();
      return;
    }
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&c->socket),
        [](uv_handle_t* h, std::size_t, uv_buf_t* buf) {
          auto* conn = static_cast<Connection*>(h->data);
          *buf = uv_buf_init(conn->buffer, sizeof conn->buffer);
        },
        [](uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
          static_cast<Connection*>(s->data)->exporter->on_read(*static_cast<Connection*>(s->data), n, buf);
        });
  }

  void on_read(Connection& c, ssize_t n, const uv_buf_t* buf) {
    if (n < 0 || c.request.size() + static_cast<std::size_t>(n) > max_request) {
      c.close();
      return;
    }
    c.request.append(buf->base, static_cast<std::size_t>(n));
    if (c.request.find("\r\n\r\n") == std::string::npos) return;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&c.socket));
    c.response = http_response(c.request, locks);
    uv_buf_t out = uv_buf_init(c.response.data(), static_cast<unsigned>(c.response.size()));
    c.write.data = &c;
    uv_write(&c.write, reinterpret_cast<uv_stream_t*>(&c.socket), &out, 1,
             [](uv_write_t* w, int) { static_cast<Connection*>(w->data)->close(); });
  }

  void stop() {
    for (uv_handle_t* h : handles()) {
      if (!uv_is_closing(h)) uv_close(h, nullptr);
    }
    for (Connection* c : std::set<Connection*>(open)) c->close();
    locks.close(nullptr);
  }
};

void Connection::close() {
  if (uv_is_closing(reinterpret_cast<uv_handle_t*>(&socket))) return;
  uv_close(reinterpret_cast<uv_handle_t*>(&socket), [](uv_handle_t* h) {
    std::unique_ptr<Connection> gone(static_cast<Connection*>(h->data));
    gone->exporter->open.erase(gone.get());
  });
}

}  // namespace

int main(int argc, char** argv) {
  int port = 9464;
  long seconds = 0;
  int first = 1;
  for (; first + 1 < argc; first += 2) {
    std::string_view flag = argv[first];
    if (flag != "--port" && flag != "--seconds") break;
    char* end = nullptr;
    long value = std::strtol(argv[first + 1], &end, 10);
    bool bad = *end != '\0' || value < 0 || (flag == "--port" && value > 65535) || value > 86400 * 365;
    if (bad) {
      std::fprintf(stderr, "bad %s '%s'\n", argv[first], argv[first + 1]);
      example::usage(usage_text, example::usage_error);
    }
    if (flag == "--port") {
      port = static_cast<int>(value);
    } else {
      seconds = value;
    }
  }
  redlock::Options options = example::masters_from(argc, argv, first, usage_text);
  uv_loop_t loop;
  uv_loop_init(&loop);
  int status = 0;
  {
    Exporter exporter(&loop, std::move(options));
    int error = exporter.listen(port);
    if (error != 0) {
      std::fprintf(stderr, "cannot listen on 127.0.0.1:%d: %s\n", port, uv_strerror(error));
      exporter.stop();
      status = 1;
    } else {
      exporter.start(std::chrono::seconds(seconds));
    }
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  uv_loop_close(&loop);
  return status;
}
