#include <redlock/inspect.hpp>

#include <uv.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <stdexcept>
#include <utility>

#include "deferred.hpp"
#include "keys.hpp"
#include "lock_value.hpp"
#include "master.hpp"
#include "quorum.hpp"
#include "resource_summary.hpp"
#include "scripts.hpp"
#include "tls.hpp"
#include "token.hpp"

namespace redlock {
namespace {

using std::chrono::milliseconds;

// One command's answer, handed to a function; held by the Run that sent it
// (a Master holds handlers weakly).
class Step final : public ReplyHandler {
 public:
  using Fn = std::function<void(const Reply*, Failure)>;
  explicit Step(Fn fn) : fn_(std::move(fn)) {}
  void on_reply(const Master&, const Reply& reply) override { fn_(&reply, Failure::disconnected); }
  void on_failure(const Master&, Failure why) override { fn_(nullptr, why); }

 private:
  Fn fn_;
};

std::string info_field(const std::string& info, std::string_view name) {
  std::string key = "\n" + std::string(name) + ":";
  std::string text = "\n" + info;
  auto at = text.find(key);
  if (at == std::string::npos) return {};
  auto begin = at + key.size();
  auto end = text.find_first_of("\r\n", begin);
  return text.substr(begin, end - begin);
}

long long number(const std::string& text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return 0;
  return value;
}

std::string failure_text(Failure why, milliseconds deadline) {
  switch (why) {
    case Failure::timeout:
      return "no answer within " + std::to_string(deadline.count()) + " ms";
    case Failure::disconnected:
      return "connection lost";
    case Failure::unusable:
      return "command could not run";
  }
  return "unknown failure";
}

}  // namespace

class Inspector::Impl {
 public:
  Impl(uv_loop_t* loop, Options options)
      : loop_(loop), options_(std::move(options)), tls_(TlsContext::for_options(options_)) {
    for (std::size_t i = 0; i < options_.masters.size(); ++i) {
      MasterConfig config;
      config.endpoint = options_.masters[i];
      config.index = i;
      config.connect_timeout = options_.connect_timeout;
      // A status query may open the connection: give it the connect too.
      config.command_timeout = deadline();
      config.restart_quarantine = options_.restart_quarantine;
      config.diagnostics = options_.diagnostics;
      // An inspection waits for no master that could not be reached.
      config.on_dropped = [this, i](const Master&) {
        auto runs = runs_;  // a run that finishes leaves runs_
        for (auto& run : runs) run->dropped(i);
      };
      if (config.endpoint.tls) config.tls = tls_;
      masters_.push_back(std::make_unique<Master>(loop, std::move(config), random_seed()));
    }
  }

  ~Impl() { close(nullptr); }

  void inspect(std::vector<std::string> resources, Callback cb) {
    errc refused{};
    if (closed_) refused = errc::closed;
    if (std::any_of(resources.begin(), resources.end(), [](const std::string& r) { return r.empty(); })) {
      refused = errc::invalid_argument;
    }
    if (refused != errc{}) {
      post([cb = std::move(cb), refused] { cb(make_error_code(refused), Inspection{}); });
      return;
    }
    auto run = std::make_shared<Run>(*this, std::move(resources), std::move(cb));
    runs_.push_back(run);
    run->start();
  }

  void close(std::function<void()> cb) {
    // Answers posted while closing share one Deferred, so they run in order.
    closing_ = true;
    if (!closed_) {
      closed_ = true;
      auto runs = std::move(runs_);
      runs_.clear();
      for (auto& run : runs) run->cancel();
      masters_.clear();
    }
    if (cb) post(std::move(cb));
    deferred_.reset();  // closes its handles once what is queued has run
    closing_ = false;
  }

 private:
  // One inspect() call: a PING per master to open the connection, then a
  // timed PING, INFO and per resource its key's GET and PTTL, its fencing counter and its queue's length,
  // pipelined.
  class Run : public std::enable_shared_from_this<Run> {
   public:
    Run(Impl& owner, std::vector<std::string> resources, Callback cb)
        : owner_(owner),
          resources_(std::move(resources)),
          cb_(std::move(cb)),
          left_(owner.masters_.size()),
          finished_(owner.masters_.size(), false) {
      result_.masters.resize(owner.masters_.size());
      for (std::size_t i = 0; i < owner.masters_.size(); ++i) {
        result_.masters[i].endpoint = owner.masters_[i]->endpoint().to_string();
      }
    }

    void start() {
      for (std::size_t i = 0; i < owner_.masters_.size(); ++i) {
        send(i, {"PING"}, [this, i](const Reply* reply, Failure why) {
          if (!answered(i, reply, why)) return done(i);
          query(i);
        });
      }
    }

    // Master i's connection failed or could not be made: what it said is the
    // answer, at once (its commands wait for a reconnect until their deadline).
    void dropped(std::size_t i) {
      if (finished_[i]) return;
      std::string cause = owner_.masters_[i]->trouble();
      if (cause.empty()) return;
      result_.masters[i].reachable = false;
      result_.masters[i].error = std::move(cause);
      done(i);
    }

    void cancel() {
      steps_.clear();
      if (!cb_) return;
      owner_.post([cb = std::exchange(cb_, nullptr)] { cb(make_error_code(errc::closed), Inspection{}); });
    }

   private:
    void send(std::size_t i, const std::vector<std::string>& argv, Step::Fn fn) {
      auto step = std::make_shared<Step>(std::move(fn));
      steps_.push_back(step);
      owner_.masters_[i]->send(Command::plain(argv), step);
    }

    // False (and the master's report says why) when it did not answer.
    bool answered(std::size_t i, const Reply* reply, Failure why) {
      if (finished_[i]) return false;  // reported already (dropped())
      MasterReport& report = result_.masters[i];
      if (reply == nullptr) {
        // What the connection said (refused, DNS, TLS, WRONGPASS...) says more than the deadline.
        std::string cause = owner_.masters_[i]->trouble();
        report.error = cause.empty() ? failure_text(why, owner_.deadline()) : std::move(cause);
        return false;
      }
      if (reply->is_error()) {
        report.error = reply->str;
        return false;
      }
      return true;
    }

    void query(std::size_t i) {
      MasterReport& report = result_.masters[i];
      report.keys.resize(resources_.size());
      // PING, INFO and five commands per resource; the last answer ends it.
      pending_[i] = 2 + 5 * resources_.size();
      auto sent = uv_hrtime();
      send(i, {"PING"}, [this, i, sent](const Reply* reply, Failure why) {
        MasterReport& r = result_.masters[i];
        r.reachable = answered(i, reply, why);
        if (r.reachable) r.round_trip = std::chrono::microseconds{(uv_hrtime() - sent) / 1000};
        answer(i);
      });
      send(i, {"INFO"}, [this, i](const Reply* reply, Failure why) {
        if (answered(i, reply, why)) read_info(result_.masters[i], reply->str);
        answer(i);
      });
      for (std::size_t k = 0; k < resources_.size(); ++k) {
        std::string key = keys::lock(owner_.options_.key_prefix, resources_[k]);
        send(i, {"GET", key}, [this, i, k](const Reply* reply, Failure why) {
          if (answered(i, reply, why) && reply->type == Reply::Type::string) {
            result_.masters[i].keys[k].value = reply->str;
            result_.masters[i].keys[k].present = true;
          }
          answer(i);
        });
        send(i, {"PTTL", key}, [this, i, k](const Reply* reply, Failure why) {
          if (answered(i, reply, why) && reply->type == Reply::Type::integer && reply->integer != -2) {
            result_.masters[i].keys[k].ttl = milliseconds{reply->integer};
          }
          answer(i);
        });
        send(i, {"GET", keys::fencing(key)}, [this, i, k](const Reply* reply, Failure why) {
          if (answered(i, reply, why) && reply->type == Reply::Type::string) {
            result_.masters[i].keys[k].fencing_counter = fencing_counter_of(reply->str);
          }
          answer(i);
        });
        send(i, {"ZCARD", keys::queue(key)}, [this, i, k](const Reply* reply, Failure why) {
          if (answered(i, reply, why) && reply->type == Reply::Type::integer && reply->integer > 0) {
            result_.masters[i].keys[k].waiting = static_cast<std::size_t>(reply->integer);
          }
          answer(i);
        });
        send(i, {"ZCARD", keys::shared_holders(key)}, [this, i, k](const Reply* reply, Failure why) {
          if (answered(i, reply, why) && reply->type == Reply::Type::integer && reply->integer > 0) {
            result_.masters[i].keys[k].shared_holders = static_cast<std::size_t>(reply->integer);
          }
          answer(i);
        });
      }
    }

    void read_info(MasterReport& report, const std::string& info) {
      report.role = info_field(info, "role");
      report.uptime = std::chrono::seconds{number(info_field(info, "uptime_in_seconds"))};
      report.maxmemory_policy = info_field(info, "maxmemory_policy");
      milliseconds quarantine = owner_.options_.restart_quarantine;
      milliseconds needed = quarantine + std::chrono::seconds{1};
      if (quarantine.count() > 0 && report.uptime < needed) {
        report.quarantined = true;
        report.quarantine_left = needed - report.uptime;
      }
    }

    void answer(std::size_t i) {
      if (--pending_[i] == 0) done(i);
    }

    void done(std::size_t i) {
      if (finished_[i]) return;
      finished_[i] = true;
      if (--left_ > 0) return;
      summarise();
      auto self = shared_from_this();
      owner_.forget(*this);
      owner_.post([self, cb = std::exchange(cb_, nullptr)]() mutable { cb({}, std::move(self->result_)); });
    }

    void summarise() {
      int n = static_cast<int>(result_.masters.size());
      for (std::size_t k = 0; k < resources_.size(); ++k) {
        std::vector<const KeyReport*> keys;
        for (const MasterReport& m : result_.masters) {
          if (k < m.keys.size()) keys.push_back(&m.keys[k]);
        }
        result_.resources.push_back(summarize_resource(resources_[k], keys, n));
      }
    }

    Impl& owner_;
    std::vector<std::string> resources_;
    Callback cb_;
    std::size_t left_;            // masters not done yet
    std::vector<bool> finished_;  // per master: its part of the answer is in
    std::map<std::size_t, std::size_t> pending_;
    Inspection result_;
    std::vector<std::shared_ptr<Step>> steps_;
  };

  milliseconds deadline() const { return options_.connect_timeout + options_.command_timeout; }

  void forget(Run& run) {
    runs_.erase(std::remove_if(runs_.begin(), runs_.end(), [&](const auto& r) { return r.get() == &run; }),
                runs_.end());
  }

  void post(std::function<void()> fn) {
    if (!deferred_) deferred_ = Deferred::open(loop_);
    deferred_->post(std::move(fn));
    // A closed Inspector keeps no handle open once this has run.
    if (closed_ && !closing_) deferred_.reset();
  }

  uv_loop_t* loop_;
  Options options_;
  std::shared_ptr<const TlsContext> tls_;
  Deferred::Ptr deferred_;
  bool closed_ = false;
  bool closing_ = false;  // inside close()
  // runs_ is declared after masters_, so it is destroyed first: a Run reaches
  // the masters, which hold its steps only weakly.
  std::vector<std::unique_ptr<Master>> masters_;
  std::vector<std::shared_ptr<Run>> runs_;
};

Inspector::Inspector(uv_loop_t* loop, Options options) {
  if (!loop) throw std::invalid_argument("redlock::Inspector: loop is null");
  options.validate();
  impl_ = std::make_unique<Impl>(loop, std::move(options));
}

Inspector::~Inspector() = default;

void Inspector::inspect(std::vector<std::string> resources, Callback cb) {
  if (!cb) cb = [](std::error_code, const Inspection&) {};
  impl_->inspect(std::move(resources), std::move(cb));
}

void Inspector::close(std::function<void()> cb) {
  impl_->close(std::move(cb));
}

}  // namespace redlock
