// The demo that scripts/demo.sh drives: contenders taking turns on one
// resource through the async Client, and a probe that shows how quickly a
// lost majority is reported.
//
//   redlock-demo contend MASTER_URI...   several contenders, a few turns each
//   redlock-demo probe MASTER_URI...     one try, reporting the outcome and its time

#include <uv.h>
#include <redlock/redlock.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int contenders = 3;
constexpr int turns_each = 3;
constexpr auto ttl = 2000ms;
constexpr auto hold_for = 80ms;
constexpr auto wait_for = 10s;
const char* const resource = "demo:printer";

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

const char* const usage_text =
    "usage: redlock-demo contend|probe MASTER_URI...\n"
    "  contend  three contenders take turns on one resource; exit 1 if a turn failed\n"
    "           or two held it at once\n"
    "  probe    one lock attempt; exit 0 acquired, 2 unavailable, 1 otherwise\n"
    "  MASTER_URI is redis://[user:pass@]host[:port][/db] or unix:///path; 64 on bad arguments.\n";

redlock::Options options_from(int argc, char** argv) {
  redlock::Options options = example::masters_from(argc, argv, 2, usage_text);
  options.diagnostics = nullptr;  // the demo kills masters on purpose; its output says so
  return options;
}

// What the contenders share: who holds the lock now (to catch two holders at
// once), when the last holder called unlock, and the handoff times.
struct Table {
  int holder = -1;
  bool overlap = false;
  Clock::time_point released{};
  std::vector<double> handoffs_ms;
};

// One contender: its own Client (as if it were its own process), waiting for
// the lock, holding it for a while, releasing it, turns_each times.
struct Contender {
  int id;
  redlock::Client client;
  uv_timer_t hold_timer{};
  redlock::Lock lock;
  int turns = 0;
  Clock::time_point asked{};
  Table* table;
  Clock::time_point start;

  Contender(uv_loop_t* loop, int id_, const redlock::Options& o, Table* t, Clock::time_point s)
      : id(id_), client(loop, o), table(t), start(s) {
    uv_timer_init(loop, &hold_timer);
    hold_timer.data = this;
  }

  void take() {
    asked = Clock::now();
    client.lock(resource, ttl, wait_for, [this](std::error_code error, redlock::Lock l) {
      if (error) {
        std::printf("[%7.1f ms] contender %d: lock failed: %s\n", ms_since(start), id,
                    error.message().c_str());
        return finish();
      }
      lock = std::move(l);
      if (table->holder != -1) table->overlap = true;
      table->holder = id;
      std::string handoff = "first holder";
      if (table->released != Clock::time_point{}) {
        double ms = ms_since(table->released);
        table->handoffs_ms.push_back(ms);
        handoff = "handed over " + std::to_string(ms).substr(0, 5) + " ms after the unlock call";
      }
      std::printf("[%7.1f ms] contender %d HOLDS %s (value %.8s..., waited %.1f ms, %s, valid for %lld ms)\n",
                  ms_since(start), id, resource, lock.value.c_str(), ms_since(asked), handoff.c_str(),
                  static_cast<long long>(lock.validity().count()));
      uv_timer_start(
          &hold_timer, [](uv_timer_t* t) { static_cast<Contender*>(t->data)->release(); },
          static_cast<std::uint64_t>(hold_for.count()), 0);
    });
  }

  void release() {
    table->holder = -1;
    table->released = Clock::now();
    client.unlock(lock, [this](std::error_code error) {
      std::printf("[%7.1f ms] contender %d released%s%s\n", ms_since(start), id, error ? ": " : "",
                  error ? error.message().c_str() : "");
      if (++turns < turns_each) return take();
      finish();
    });
  }

  void finish() {
    client.close(nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&hold_timer), nullptr);
  }
};

int contend(int argc, char** argv) {
  redlock::Options options = options_from(argc, argv);
  std::printf("%d contenders, %d turns each, on %zu masters (majority %zu), ttl %lld ms\n", contenders,
              turns_each, options.masters.size(), options.masters.size() / 2 + 1,
              static_cast<long long>(ttl.count()));
  uv_loop_t loop;
  uv_loop_init(&loop);
  Table table;
  auto start = Clock::now();
  {
    std::vector<std::unique_ptr<Contender>> all;
    for (int i = 1; i <= contenders; ++i) {
      all.push_back(std::make_unique<Contender>(&loop, i, options, &table, start));
    }
    for (auto& c : all) c->take();
    uv_run(&loop, UV_RUN_DEFAULT);
    int turns = 0;
    for (auto& c : all) turns += c->turns;
    std::printf("%d of %d turns completed in %.1f ms; %s\n", turns, contenders * turns_each, ms_since(start),
                table.overlap ? "TWO HOLDERS AT ONCE: mutual exclusion broken" : "never two holders at once");
    auto& h = table.handoffs_ms;
    if (!h.empty()) {
      std::sort(h.begin(), h.end());
      std::printf(
          "handoff from one holder's unlock call to the next holder: median %.2f ms, worst %.2f ms "
          "(woken by the release, not by a retry delay of %lld ms)\n",
          h[h.size() / 2], h.back(), static_cast<long long>(options.retry_delay.count()));
    }
    if (table.overlap || turns != contenders * turns_each) return 1;
  }
  return uv_loop_close(&loop) == 0 ? 0 : 1;
}

int probe(int argc, char** argv) {
  redlock::Options options = options_from(argc, argv);
  options.retry_count = 2;
  options.retry_delay = 50ms;
  options.retry_jitter = 50ms;
  auto bound = (options.retry_count + 1) * options.command_timeout +
               options.retry_count * (options.retry_delay + options.retry_jitter) + options.connect_timeout;
  redlock::Redlock redlock(options);
  auto asked = Clock::now();
  redlock::Result<redlock::Lock> lock = redlock.lock(resource, ttl);
  double took = ms_since(asked);
  if (lock) {
    std::printf("acquired %s in %.2f ms\n", resource, took);
    redlock.unlock(*lock);
    return 0;
  }
  std::printf("lock %s: %s, answered in %.1f ms (bound from the options: %lld ms)\n", resource,
              lock.error().message().c_str(), took, static_cast<long long>(bound.count()));
  if (lock.error() == redlock::errc::unavailable) example::print_master_errors(redlock);
  return lock.error() == redlock::errc::unavailable ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && example::is_help(argv[1])) example::usage(usage_text, 0);
  if (argc < 2 || (std::strcmp(argv[1], "contend") != 0 && std::strcmp(argv[1], "probe") != 0))
    example::usage(usage_text, example::usage_error);
  try {
    return std::strcmp(argv[1], "contend") == 0 ? contend(argc, argv) : probe(argc, argv);
  } catch (const std::invalid_argument& e) {  // the options (a duplicate master)
    std::fprintf(stderr, "error: %s\n", e.what());
    return example::usage_error;
  }
}
