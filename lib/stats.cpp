#include <redlock/error.hpp>
#include <redlock/stats.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace redlock {

void LatencyHistogram::record(std::chrono::microseconds latency) noexcept {
  auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(latency.count(), 0));
  auto at = std::lower_bound(bounds_us.begin(), bounds_us.end(), us);
  ++counts_[static_cast<std::size_t>(std::distance(bounds_us.begin(), at))];
  ++count_;
  sum_us_ += us;
}

std::chrono::microseconds LatencyHistogram::quantile(double q) const noexcept {
  if (count_ == 0) return std::chrono::microseconds{0};
  if (!(q >= 0.0)) q = 0.0;  // NaN too
  double wanted = std::ceil(std::min(q, 1.0) * static_cast<double>(count_));
  auto rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(wanted));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bounds_us.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::chrono::microseconds(bounds_us[i]);
  }
  return std::chrono::microseconds(bounds_us.back());
}

void Outcomes::count(std::error_code error) noexcept {
  if (!error) {
    ++ok;
    return;
  }
  if (error.category() != category()) return;
  switch (static_cast<errc>(error.value())) {
    case errc::not_acquired:
      ++not_acquired;
      break;
    case errc::unavailable:
      ++unavailable;
      break;
    case errc::timeout:
      ++timeout;
      break;
    case errc::not_held:
      ++not_held;
      break;
    case errc::invalid_argument:
      ++invalid_argument;
      break;
    case errc::closed:
      ++closed;
      break;
    case errc::expired:
      ++expired;
      break;
    case errc::canceled:
      ++canceled;
      break;
  }
}

std::uint64_t Outcomes::total() const noexcept {
  return ok + not_acquired + unavailable + timeout + not_held + invalid_argument + closed + expired +
         canceled;
}

const char* to_string(MasterState state) noexcept {
  switch (state) {
    case MasterState::connecting:
      return "connecting";
    case MasterState::up:
      return "up";
    case MasterState::quarantined:
      return "quarantined";
    case MasterState::down:
      return "down";
  }
  return "unknown";
}

namespace {

// How many bytes the UTF-8 sequence at the start of `text` takes; 0 when it
// is not one (a stray byte, overlong, a surrogate, past U+10FFFF, cut short).
std::size_t utf8_sequence(std::string_view text) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char first = byte(0);
  if (first < 0x80) return 1;
  std::size_t length = first >= 0xC2 && first <= 0xDF   ? 2
                       : first >= 0xE0 && first <= 0xEF ? 3
                       : first >= 0xF0 && first <= 0xF4 ? 4
                                                        : 0;
  if (length == 0 || text.size() < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  unsigned char second = byte(1);
  if ((first == 0xE0 && second < 0xA0) || (first == 0xED && second > 0x9F) ||
      (first == 0xF0 && second < 0x90) || (first == 0xF4 && second > 0x8F))
    return 0;
  return length;
}

// A label value: valid UTF-8 (the format's rule; a byte that is not becomes
// U+FFFD), with backslash, double quote and line feed escaped.
std::string label(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    std::size_t length = utf8_sequence(text);
    if (length == 0) {
      out += "\xEF\xBF\xBD";
      length = 1;
    } else if (text[0] == '\\' || text[0] == '"') {
      out += '\\';
      out += text[0];
    } else if (text[0] == '\n') {
      out += "\\n";
    } else {
      out.append(text.substr(0, length));
    }
    text.remove_prefix(length);
  }
  return out;
}

// A metric name prefix: what a metric name may not hold becomes '_'.
std::string metric_prefix(std::string_view prefix) {
  std::string out(prefix);
  for (std::size_t i = 0; i < out.size(); ++i) {
    char c = out[i];
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) out[i] = '_';
  }
  return out;
}

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", s);
  return text;
}

std::string seconds(std::chrono::microseconds us) {
  return seconds(static_cast<double>(us.count()) / 1e6);
}

class Exposition {
 public:
  explicit Exposition(std::string_view prefix) : prefix_(metric_prefix(prefix)) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP " + prefix_ + "_" + std::string(name) + " " + std::string(help) + "\n";
    out_ += "# TYPE " + prefix_ + "_" + std::string(name) + " " + std::string(type) + "\n";
  }

  void sample(std::string_view name, std::string_view labels, const std::string& value) {
    out_ += prefix_ + "_" + std::string(name);
    if (!labels.empty()) out_ += "{" + std::string(labels) + "}";
    out_ += " " + value + "\n";
  }

  void sample(std::string_view name, std::string_view labels, std::uint64_t value) {
    sample(name, labels, std::to_string(value));
  }

  void outcomes(std::string_view call, const Outcomes& o) {
    const std::pair<const char*, std::uint64_t> all[] = {
        {"ok", o.ok},           {"not_acquired", o.not_acquired}, {"unavailable", o.unavailable},
        {"timeout", o.timeout}, {"not_held", o.not_held},         {"invalid_argument", o.invalid_argument},
        {"closed", o.closed},   {"expired", o.expired},           {"canceled", o.canceled},
    };
    for (const auto& [outcome, n] : all) {
      sample("calls_total", "call=\"" + std::string(call) + "\",outcome=\"" + outcome + "\"", n);
    }
  }

  void histogram(std::string_view name, std::string_view help, const LatencyHistogram& h) {
    family(name, "histogram", help);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < LatencyHistogram::bounds_us.size(); ++i) {
      cumulative += h.bucket(i);
      double bound = static_cast<double>(LatencyHistogram::bounds_us[i]) / 1e6;
      sample(std::string(name) + "_bucket", "le=\"" + seconds(bound) + "\"", cumulative);
    }
    sample(std::string(name) + "_bucket", "le=\"+Inf\"", h.count());
    sample(std::string(name) + "_sum", "", seconds(h.sum()));
    sample(std::string(name) + "_count", "", h.count());
  }

  std::string take() { return std::move(out_); }

 private:
  std::string prefix_;
  std::string out_;
};

}  // namespace

std::string to_prometheus(const Stats& stats, std::string_view prefix) {
  Exposition e(prefix);
  auto master = [](const MasterStats& m) { return "master=\"" + label(m.endpoint) + "\""; };

  e.family("master_up", "gauge", "1 when the master votes, 0 otherwise.");
  for (const auto& m : stats.masters) e.sample("master_up", master(m), m.state == MasterState::up ? 1 : 0);
  e.family("master_state", "gauge", "1 for the state the master's connection is in (and its role).");
  for (const auto& m : stats.masters) {
    for (MasterState s :
         {MasterState::connecting, MasterState::up, MasterState::quarantined, MasterState::down}) {
      e.sample("master_state", master(m) + ",state=\"" + to_string(s) + "\",role=\"" + label(m.role) + "\"",
               m.state == s ? 1 : 0);
    }
  }
  e.family("master_votes_total", "counter", "Votes by answer: granted, refused, failed.");
  for (const auto& m : stats.masters) {
    e.sample("master_votes_total", master(m) + ",vote=\"granted\"", m.votes_granted);
    e.sample("master_votes_total", master(m) + ",vote=\"refused\"", m.votes_refused);
    e.sample("master_votes_total", master(m) + ",vote=\"failed\"", m.votes_failed);
  }
  e.family("master_timeouts_total", "counter", "Commands with no reply within command_timeout.");
  for (const auto& m : stats.masters) e.sample("master_timeouts_total", master(m), m.timeouts);
  e.family("master_reconnects_total", "counter", "Connections made again after the first.");
  for (const auto& m : stats.masters) e.sample("master_reconnects_total", master(m), m.reconnects);
  e.family("master_rtt_seconds", "gauge", "Smoothed round-trip time of recent replies.");
  for (const auto& m : stats.masters) e.sample("master_rtt_seconds", master(m), seconds(m.rtt));

  e.family("calls_total", "counter", "Calls by kind and outcome.");
  e.outcomes("acquire", stats.acquire);
  e.outcomes("extend", stats.extend);
  e.outcomes("continue_lock", stats.continue_lock);
  e.outcomes("unlock", stats.unlock);
  e.family("lost_total", "counter", "Kept locks lost, by the error on_lost got.");
  const std::pair<const char*, std::uint64_t> lost[] = {
      {"not_held", stats.lost.not_held}, {"unavailable", stats.lost.unavailable},
      {"expired", stats.lost.expired},   {"timeout", stats.lost.timeout},
      {"closed", stats.lost.closed},
  };
  for (const auto& [why, n] : lost) e.sample("lost_total", std::string("error=\"") + why + "\"", n);
  e.family("renewals_total", "counter", "Kept locks renewed.");
  e.sample("renewals_total", "", stats.renewals);
  e.family("kept_locks", "gauge", "Locks kept alive now.");
  e.sample("kept_locks", "", stats.kept);
  e.histogram("acquire_seconds", "lock and try_lock, from the call to the answer.", stats.acquire_latency);
  e.histogram("unlock_seconds", "unlock, from the call to the answer.", stats.unlock_latency);
  return e.take();
}

}  // namespace redlock
