#include "worker.hpp"

#include <redlock/redlock.hpp>

#include <hiredis/hiredis.h>

#include "counter_semaphore.hpp"

#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace redlock::chaos {
namespace {

// A bound besides the deadline, so that a lock() that fails at once (a bad
// option, a closed client) cannot spin a thread for the whole run.
constexpr int max_iterations_per_thread = 200'000;

int code_of(std::error_code ec) {
  if (!ec) return 0;
  if (ec.category() == redlock::category()) return ec.value();
  return -1;
}

/// The worker's record file, shared by its threads.
class RecordFile {
 public:
  explicit RecordFile(const std::string& path) : file_(std::fopen(path.c_str(), "w")) {}
  ~RecordFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  bool is_open() const { return file_ != nullptr; }

  // Flushed per record: a worker killed past its deadline still leaves behind
  // everything it finished, so the parent can check it.
  template <class Line>
  void write(const Line& r) {
    const std::string line = format(r);
    std::lock_guard<std::mutex> lock(mutex_);
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
  }

 private:
  std::mutex mutex_;
  std::FILE* file_;
};

// The register's one script: a write with a token below the last one taken,
// or equal to it from another holder (ARGV[3]), is refused when fenced
// (ARGV[2] == "1"); every write gets the next number of one counter, the
// register's order. Tokens stay below 2^53 (microseconds), exact as Lua
// numbers; the stored token is the client's own decimal string.
constexpr const char* register_script =
    "local seq = redis.call('incr', KEYS[2])\n"
    "local last = redis.call('hmget', KEYS[1], 'token', 'holder')\n"
    "if ARGV[2] == '1' and last[1] then\n"
    "  local stored, mine = tonumber(last[1]), tonumber(ARGV[1])\n"
    "  if stored > mine or (stored == mine and last[2] ~= ARGV[3]) then return {0, seq} end\n"
    "end\n"
    "redis.call('hset', KEYS[1], 'token', ARGV[1], 'holder', ARGV[3])\n"
    "return {1, seq}\n";

/// One thread's connection to the register (a redis-server no fault touches);
/// reopened at the next write after an error.
class Register {
 public:
  Register(const WorkerConfig& config, RecordFile& out) : config_(config), out_(out) {}
  ~Register() { disconnect(); }
  Register(const Register&) = delete;
  Register& operator=(const Register&) = delete;

  void write(const Record& holder) {
    // Shared holders read: their tokens need not grow among themselves.
    if (config_.register_port == 0 || holder.shared) return;
    Write w;
    w.process = holder.process;
    w.thread = holder.thread;
    w.resource = holder.resource;
    w.permit = holder.permit;
    w.token = holder.fencing_token;
    w.invoked = Clock::now();
    // One value per resource, or per permit: each permit is fenced by its own tokens.
    const std::string key = config_.key_prefix + "register:{" + std::to_string(holder.resource) +
                            "}:" + std::to_string(holder.permit);
    const std::string seq_key = config_.key_prefix + "register:seq";
    const std::string token = std::to_string(w.token);
    const std::string holder_id = std::to_string(w.process) + "/" + std::to_string(w.thread);
    const char* argv[] = {"EVAL",
                          register_script,
                          "2",
                          key.c_str(),
                          seq_key.c_str(),
                          token.c_str(),
                          config_.register_fenced ? "1" : "0",
                          holder_id.c_str()};
    auto* reply =
        connected() ? static_cast<redisReply*>(redisCommandArgv(context_, 8, argv, nullptr)) : nullptr;
    w.completed = Clock::now();
    if (reply != nullptr && reply->type == REDIS_REPLY_ARRAY && reply->elements == 2) {
      w.accepted = static_cast<int>(reply->element[0]->integer);
      w.seq = reply->element[1]->integer;
    }
    if (reply != nullptr) freeReplyObject(reply);
    if (reply == nullptr) disconnect();  // an I/O error or a timeout: a new connection next time
    out_.write(w);
  }

 private:
  bool connected() {
    if (context_ != nullptr) return true;
    timeval timeout{2, 0};
    context_ = redisConnectWithTimeout("127.0.0.1", config_.register_port, timeout);
    if (context_ != nullptr && context_->err == 0 && redisSetTimeout(context_, timeout) == REDIS_OK)
      return true;
    disconnect();
    return false;
  }
  void disconnect() {
    if (context_ != nullptr) redisFree(context_);
    context_ = nullptr;
  }

  const WorkerConfig& config_;
  RecordFile& out_;
  redisContext* context_ = nullptr;
};

// --holds kept: the lock is kept by a LockGuard for 0.5-4 TTLs. The work is
// 1 ms steps, each done only after checking that the guard is neither lost
// nor past its valid_until; a step's time becomes r.left and the validity it
// checked r.valid_until. So a step never follows on_lost (lost() reads what
// on_lost wrote, under the guard's mutex), and the checker's overlaps test
// whether the validity that renewals reported was real. Now and then a step
// also extends the kept lock, racing its renewals; a refused extension ends
// the hold.
void hold_kept(Redlock& redlock, Lock lock, const WorkerConfig& config, std::mt19937_64& rng, Record& r,
               Register& resource) {
  std::uniform_real_distribution<double> ttls(0.5, 4.0);
  std::uniform_int_distribution<int> extend_now(0, 199);  // about every 200 steps
  const auto end = r.returned + std::chrono::duration_cast<Clock::duration>(config.ttl * ttls(rng));
  r.valid_until = lock.valid_until;
  r.left = r.returned;
  LockGuard guard(redlock, std::move(lock), KeepOptions{});
  for (int step = 0; step < 1'000'000; ++step) {
    const auto now = Clock::now();
    const auto valid_until = guard.valid_until();
    if (guard.lost() || now >= valid_until || now >= end) break;
    r.left = now;
    r.valid_until = valid_until;
    if (extend_now(rng) == 0 && guard.extend(config.ttl)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The leave write, even after a loss: a holder that acts on a lock it may
  // have lost, as the register must refuse. It is inside the section only if
  // the hold was still whole once it was done (on a loss the keeper released
  // the lock at once: another may hold it already).
  resource.write(r);
  const auto written = Clock::now();
  if (!guard.lost() && written < guard.valid_until()) {
    r.left = written;
    r.valid_until = guard.valid_until();
  }
  r.unlock_error = code_of(guard.unlock());
  r.unlocked = Clock::now();
}

/// --cancel: each thread's Cancellation while it waits, for the canceller.
class Waits {
 public:
  explicit Waits(int threads) : current_(static_cast<std::size_t>(threads)) {}
  void waiting(int thread, std::shared_ptr<Cancellation> cancel) {
    std::lock_guard<std::mutex> lock(mutex_);
    current_[static_cast<std::size_t>(thread)] = std::move(cancel);
  }
  void cancel(int thread) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto& c = current_[static_cast<std::size_t>(thread)]) c->cancel();
  }

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<Cancellation>> current_;
};

// The resource's lock, a permit of it (--permits), or the control's counter;
// with --cancel through a Cancellation the canceller may use.
Result<Lock> acquire(Redlock& redlock, CounterSemaphore* counter, const WorkerConfig& config,
                     const std::string& name, int thread, Waits& waits) {
  if (counter != nullptr) return counter->lock(name);
  // About as long as lock()'s retries wait.
  const auto wait = 2 * config.retry_count * config.retry_delay;
  if (config.cancel) {
    auto cancel = std::make_shared<Cancellation>();
    waits.waiting(thread, cancel);
    Result<Lock> lock = config.permits == 0
                            ? redlock.lock(name, config.ttl, wait, *cancel)
                            : redlock.lock_permit(name, config.permits, config.ttl, wait, *cancel);
    waits.waiting(thread, nullptr);
    return lock;
  }
  if (config.permits == 0) return redlock.lock(name, config.ttl);
  return redlock.lock_permit(name, config.permits, config.ttl, wait);
}

// --all: lock_all of `names` (two resources, in a random order), or lock of
// one. The control takes only the first of the two, as if it held both.
Result<Lock> acquire_all_or_one(Redlock& redlock, const WorkerConfig& config,
                                const std::vector<std::string>& names) {
  const auto wait = 2 * config.retry_count * config.retry_delay;
  if (names.size() == 1 || config.all_first_only) return redlock.lock(names.front(), config.ttl, wait);
  return redlock.lock_all(names, config.ttl, wait);
}

// --shared: two calls in three read (lock_shared), one writes (lock with a
// wait). The control's readers lock another name: they never meet a writer.
Result<Lock> acquire_shared_or_not(Redlock& redlock, const WorkerConfig& config, const std::string& name,
                                   bool read) {
  const auto wait = 2 * config.retry_count * config.retry_delay;
  if (!read) return redlock.lock(name, config.ttl, wait);
  return redlock.lock_shared(config.shared_apart ? name + ":apart" : name, config.ttl, wait);
}

// --cancel: every 0.25-1 ttl, cancels the wait of a thread picked at random.
void cancel_now_and_then(const WorkerConfig& config, Waits& waits) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(0, config.threads - 1);
  std::uniform_int_distribution<long long> pause_ms(config.ttl.count() / 4, config.ttl.count());
  for (int i = 0; i < 1'000'000 && Clock::now() < config.until; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds{pause_ms(rng)});
    waits.cancel(pick(rng));
  }
}

// --election: campaigns for election `r.resource` (its term the record's
// token), leads in 1 ms steps while the leadership is neither lost nor past
// its validity, for 0.5-4 ttls, and resigns. The control acts on for a ttl
// after resigning, as if still leading: the checker must see it beside the
// next leader.
void lead(Redlock& redlock, const WorkerConfig& config, std::mt19937_64& rng, Record& r, Register& resource) {
  Leadership candidate(redlock, "election-" + std::to_string(r.resource), "p" + std::to_string(r.process),
                       config.ttl);
  std::uniform_real_distribution<double> ttls(0.5, 4.0);
  r.called = Clock::now();
  Result<Leader> won = candidate.campaign("worker", 2 * config.retry_count * config.retry_delay);
  r.returned = Clock::now();
  r.error = code_of(won.error());
  if (!won) return;
  r.fencing_token = won->term;
  resource.write(r);
  const auto end = r.returned + std::chrono::duration_cast<Clock::duration>(config.ttl * ttls(rng));
  r.left = r.returned;
  r.valid_until = candidate.valid_until();
  for (int step = 0; step < 1'000'000; ++step) {
    const auto now = Clock::now();
    const auto valid_until = candidate.valid_until();
    if (candidate.lost() || now >= valid_until || now >= end) break;
    r.left = now;
    r.valid_until = valid_until;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  resource.write(r);
  r.unlock_error = code_of(candidate.resign());
  r.unlocked = Clock::now();
  if (config.election_acts_after_resign) {
    std::this_thread::sleep_for(config.ttl);
    r.left = Clock::now();
    r.valid_until = r.left + config.ttl;
  }
}

void contend(Redlock& redlock, const WorkerConfig& config, int thread, RecordFile& out, RecordFile& writes,
             Waits& waits) {
  Register resource(config, writes);
  std::optional<CounterSemaphore> counter;
  if (config.counter_semaphore) counter.emplace(config);
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick_resource(0, config.resources - 1);
  std::uniform_int_distribution<int> pick_reader(0, 2);
  std::uniform_int_distribution<int> coin(0, 1);
  std::uniform_int_distribution<int> strand(0, 3);
  // Holders keep the lock for a good part of its validity: that is when a
  // broken lock lets a second holder in while the first is still inside.
  std::uniform_real_distribution<double> hold_fraction(0.3, 0.7);
  // A pause after unlock, so the thread that just left does not win every race.
  std::uniform_int_distribution<long long> think_us(
      0, 1000 * static_cast<long long>(config.retry_delay.count()));

  for (int i = 0; i < max_iterations_per_thread && Clock::now() < config.until; ++i) {
    Record r;
    r.process = config.process;
    r.thread = thread;
    r.resource = pick_resource(rng);
    if (config.election) {
      lead(redlock, config, rng, r, resource);
      out.write(r);
      std::this_thread::sleep_for(std::chrono::microseconds{think_us(rng)});
      continue;
    }
    r.shared = config.shared && pick_reader(rng) != 0;
    const std::string name = "resource-" + std::to_string(r.resource);
    // --all: half the calls take a second resource too, named first or second.
    std::optional<int> second;
    std::vector<std::string> names = {name};
    if (config.all && config.resources > 1 && coin(rng) == 1) {
      second = (r.resource + 1 + pick_resource(rng) % (config.resources - 1)) % config.resources;
      names.push_back("resource-" + std::to_string(*second));
      if (coin(rng) == 1) std::swap(names[0], names[1]);
    }
    r.called = Clock::now();
    Result<Lock> lock = config.all ? acquire_all_or_one(redlock, config, names)
                        : config.shared
                            ? acquire_shared_or_not(redlock, config, name, r.shared)
                            : acquire(redlock, counter ? &*counter : nullptr, config, name, thread, waits);
    // What it held besides r.resource, recorded as a section of its own.
    auto also = [&](Record copy) {
      copy.resource = *second;
      return copy;
    };
    r.returned = Clock::now();
    r.error = code_of(lock.error());
    if (lock && config.strand && strand(rng) == 0) {
      // Won on the masters, told otherwise, as a cancel that did not release.
      r.error = code_of(make_error_code(errc::canceled));
      out.write(r);
      continue;
    }
    if (lock) {
      r.fencing_token = lock->fencing_token;
      r.permit = lock->permit;
      resource.write(r);
      if (second) resource.write(also(r));
    }
    if (lock && config.keep_holds) {
      hold_kept(redlock, std::move(*lock), config, rng, r, resource);
    } else if (lock) {
      r.valid_until = lock->valid_until;
      const auto validity = lock->valid_until - r.returned;
      if (validity > Clock::duration::zero()) {
        std::this_thread::sleep_for(
            std::chrono::duration_cast<Clock::duration>(validity * hold_fraction(rng)));
      }
      // The leave write is work done under the lock: the section ends after it.
      resource.write(r);
      if (second) resource.write(also(r));
      r.left = Clock::now();
      r.unlock_error = code_of(counter ? counter->unlock(*lock) : redlock.unlock(*lock));
      r.unlocked = Clock::now();
    }
    out.write(r);
    if (second) out.write(also(r));
    if (lock.error() == errc::invalid_argument || lock.error() == errc::closed) return;  // would fail forever
    std::this_thread::sleep_for(std::chrono::microseconds{think_us(rng)});
  }
}

}  // namespace

Options worker_options(const WorkerConfig& config) {
  Options options;
  options.masters = config.masters;
  options.retry_count = config.retry_count;
  options.retry_delay = config.retry_delay;
  options.retry_jitter = config.retry_delay;
  options.key_prefix = config.key_prefix;
  options.restart_quarantine = config.quarantine;
  options.fencing = true;  // the report checks the tokens too
  return options;
}

// --steal-markers: deletes the listening marker (<key>:listening, see
// docs/waiting.md) of every resource on every master every 2 ms until the
// run ends, as if each were lost as soon as written.
void steal_markers(const WorkerConfig& config) {
  using Connection = std::unique_ptr<redisContext, decltype(&redisFree)>;
  std::vector<Connection> masters;
  const timeval timeout{1, 0};
  for (const Endpoint& m : config.masters)
    masters.emplace_back(redisConnectWithTimeout(m.host.c_str(), m.port, timeout), &redisFree);
  std::vector<std::string> markers;
  for (int r = 0; r < config.resources; ++r)
    markers.push_back(config.key_prefix + "{resource-" + std::to_string(r) + "}:listening");
  for (int i = 0; i < 1000000 && Clock::now() < config.until; ++i) {
    for (Connection& c : masters) {
      if (!c || c->err != 0) continue;  // a master down or killed: its markers are gone anyway
      for (const std::string& marker : markers) {
        auto* reply = static_cast<redisReply*>(redisCommand(c.get(), "DEL %s", marker.c_str()));
        if (reply != nullptr) freeReplyObject(reply);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int run_worker(const WorkerConfig& config) {
  RecordFile out(config.out_path);
  RecordFile writes(config.writes_path.empty() ? "/dev/null" : config.writes_path);
  if (!out.is_open() || !writes.is_open()) {
    std::perror(("redlock-chaos worker: " + config.out_path).c_str());
    return 2;
  }
  try {
    // One Redlock per process, shared by its threads, as a daemon would use it.
    Redlock redlock(worker_options(config));
    Waits waits(config.threads);
    // --election: an observer of each election, recording every report.
    std::vector<std::unique_ptr<Leadership>> observers;
    for (int e = 0; config.election && e < config.resources; ++e) {
      observers.push_back(std::make_unique<Leadership>(redlock, "election-" + std::to_string(e),
                                                       "observer-" + std::to_string(config.process),
                                                       config.ttl));
      auto count = std::make_shared<int>(0);
      observers.back()->observe([&out, &config, e, count](const Leader& leader) {
        // The other control: nothing is recorded after the first leader, as
        // if the observer stopped hearing changes.
        if (config.observer_freezes && *count > 0) return;
        Record o;
        o.process = config.process;
        o.thread = Record::observer_thread;
        o.resource = e;
        o.returned = Clock::now();
        o.fencing_token = leader.term;
        o.permit = leader.present ? 1 : 0;
        // The control: every third report of a leader says term 1, below every real one.
        if (leader.present) ++*count;
        if (config.observer_misreports && leader.present && *count % 3 == 0) o.fencing_token = 1;
        out.write(o);
      });
    }
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(config.threads) + 2);
    for (int t = 0; t < config.threads; ++t) {
      threads.emplace_back(
          [&redlock, &config, &out, &writes, &waits, t] { contend(redlock, config, t, out, writes, waits); });
    }
    if (config.cancel) threads.emplace_back([&config, &waits] { cancel_now_and_then(config, waits); });
    if (config.steal_markers) threads.emplace_back([&config] { steal_markers(config); });
    for (auto& t : threads) t.join();
    observers.clear();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "redlock-chaos worker %d: %s\n", config.process, e.what());
    return 2;
  }
  return 0;
}

}  // namespace redlock::chaos
