#pragma once

// Latency samples and the JSON lines every benchmark prints.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, p999 = 0, mean = 0;
};

/// Nearest-rank percentiles.
inline Percentiles summarize(std::vector<double> samples) {
  Percentiles p;
  if (samples.empty()) return p;
  std::sort(samples.begin(), samples.end());
  auto rank = [&](double q) {
    auto i = static_cast<std::size_t>(q * static_cast<double>(samples.size()) + 0.999999);
    return samples[std::min(samples.size(), std::max<std::size_t>(i, 1)) - 1];
  };
  p.p50 = rank(0.50);
  p.p90 = rank(0.90);
  p.p99 = rank(0.99);
  p.p999 = rank(0.999);
  p.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  return p;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// One JSON object on one line, fields in the order given.
class JsonLine {
 public:
  JsonLine& add(const std::string& key, const std::string& value) {
    fields_.emplace_back(key, "\"" + value + "\"");
    return *this;
  }
  JsonLine& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  JsonLine& add(const std::string& key, double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%.2f", value);
    fields_.emplace_back(key, text);
    return *this;
  }
  JsonLine& add(const std::string& key, long long value) {
    fields_.emplace_back(key, std::to_string(value));
    return *this;
  }
  JsonLine& add(const std::string& key, int value) { return add(key, static_cast<long long>(value)); }
  JsonLine& add(const std::string& key, std::size_t value) { return add(key, static_cast<long long>(value)); }

  void print() const {
    std::string line = "{";
    for (std::size_t i = 0; i < fields_.size(); ++i) {
      if (i) line += ",";
      line += "\"" + fields_[i].first + "\":" + fields_[i].second;
    }
    line += "}\n";
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace bench
