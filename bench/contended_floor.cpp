#include "contended_floor.hpp"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <initializer_list>
#include <utility>

namespace bench {

namespace {

constexpr int lock_ttl_ms = 10000;
// A waiter that hears nothing tries again after this (a lost message; the
// count is reported, and the handoffs it delays are in the figures).
constexpr std::uint64_t fallback_ms = 200;
constexpr std::size_t seen_values = 64;

// Deletes our value and tells the waiters, only when the value was ours.
constexpr const char* release_lua =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "redis.call('del', KEYS[1]) return redis.call('publish', KEYS[2], ARGV[1]) - 1 "
    "end return 0";

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string resp(std::initializer_list<std::string> args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  char* raw = nullptr;
  int size = redisFormatCommandArgv(&raw, static_cast<int>(argv.size()), argv.data(), lengths.data());
  std::string out = size > 0 ? std::string(raw, static_cast<std::size_t>(size)) : std::string();
  redisFreeCommand(raw);
  return out;
}

}  // namespace

HandoffFloor::HandoffFloor(uv_loop_t* loop, const std::vector<int>& ports, std::string resource, int work_us)
    : loop_(loop),
      commands_(loop, ports),
      subscriber_(loop, ports),
      key_(std::move(resource)),
      channel_(key_ + ":released"),
      work_us_(work_us),
      fallback_(std::make_unique<uv_timer_t>()) {
  uv_timer_init(loop, fallback_.get());
  fallback_->data = this;
  subscriber_.on_message([this](const std::string& value) { on_message(value); });
}

HandoffFloor::~HandoffFloor() {
  stop();
}

bool HandoffFloor::ready() {
  if (!commands_.connected() || !subscriber_.connected()) return false;
  bool subscribed = false;
  subscriber_.fan_out(resp({"SUBSCRIBE", channel_}), [&](bool) { subscribed = true; });
  for (int i = 0; i < 100000 && !subscribed; ++i) uv_run(loop_, UV_RUN_ONCE);
  return subscribed;
}

void HandoffFloor::run(std::int64_t end, std::function<void(const Cycle&)> record) {
  end_ = end;
  record_ = std::move(record);
  cycle_ = {now_ns(), 0, 0, 0, 0};
  attempt();
  uv_run(loop_, UV_RUN_DEFAULT);
}

void HandoffFloor::attempt() {
  uv_timer_stop(fallback_.get());
  state_ = State::attempting;
  woken_ = false;
  ++cycle_.attempts;
  value_ = std::to_string(::getpid()) + ":" + std::to_string(next_value_++);
  commands_.fan_out(resp({"SET", key_, value_, "NX", "PX", std::to_string(lock_ttl_ms)}),
                    [this](bool granted) { on_attempt(granted); });
}

void HandoffFloor::on_attempt(bool granted) {
  if (state_ != State::attempting) return;
  if (granted) {
    state_ = State::holding;
    cycle_.acquired = now_ns();
    while (now_ns() < cycle_.acquired + std::int64_t{work_us_} * 1000) {
    }
    cycle_.work_end = now_ns();
    return release();
  }
  // The masters that granted it give it back (and wake the others if so).
  remember(value_);
  commands_.send(resp({"EVAL", release_lua, "2", key_, channel_, value_}));
  if (woken_) return attempt();
  wait();
}

void HandoffFloor::release() {
  state_ = State::releasing;
  remember(value_);  // our own message wakes nobody here
  commands_.fan_out(resp({"EVAL", release_lua, "2", key_, channel_, value_}),
                    [this](bool heard) { on_released(heard); });
}

// `heard`: on a majority of masters another worker was subscribed (the
// script's count leaves out our own subscriber).
void HandoffFloor::on_released(bool heard) {
  cycle_.released = now_ns();
  record_(cycle_);
  if (cycle_.released >= end_) return stop();
  cycle_ = {cycle_.released, 0, 0, 0, 0};
  if (heard) return wait();  // strict turns: the waiters go first
  attempt();
}

void HandoffFloor::wait() {
  state_ = State::waiting;
  uv_timer_start(
      fallback_.get(),
      [](uv_timer_t* t) {
        auto* self = static_cast<HandoffFloor*>(t->data);
        ++self->fallbacks_;
        self->attempt();
      },
      fallback_ms, 0);
}

void HandoffFloor::on_message(const std::string& released_value) {
  if (seen(released_value)) return;  // the same release heard from another master
  remember(released_value);
  if (state_ == State::waiting) return attempt();
  if (state_ == State::attempting) woken_ = true;
}

bool HandoffFloor::seen(const std::string& value) const {
  return std::find(seen_.begin(), seen_.end(), value) != seen_.end();
}

void HandoffFloor::remember(const std::string& value) {
  if (seen_.size() == seen_values) seen_.pop_front();
  seen_.push_back(value);
}

void HandoffFloor::stop() {
  if (state_ == State::done) return;
  state_ = State::done;
  commands_.close();
  subscriber_.close();
  uv_timer_stop(fallback_.get());
  uv_close(reinterpret_cast<uv_handle_t*>(fallback_.release()),
           [](uv_handle_t* h) { std::unique_ptr<uv_timer_t> free_now(reinterpret_cast<uv_timer_t*>(h)); });
}

}  // namespace bench
