#include "status_command.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "session.hpp"

namespace redlock::cli {
namespace {

using std::chrono::milliseconds;

std::size_t majority(std::size_t n) {
  return n / 2 + 1;
}

// In Client::stats()'s words (MasterStats::state): a one-shot inspection
// is never still connecting.
MasterState state_of(const MasterReport& m) {
  if (!m.reachable || m.role != "master") return MasterState::down;
  return m.quarantined ? MasterState::quarantined : MasterState::up;
}

std::size_t voting(const Inspection& inspection) {
  std::size_t count = 0;
  for (const MasterReport& m : inspection.masters) {
    if (state_of(m) == MasterState::up) ++count;
  }
  return count;
}

std::string seconds_text(milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(d.count()) / 1000.0);
  return text;
}

std::string uptime_text(std::chrono::seconds s) {
  long long t = s.count();
  if (t < 120) return std::to_string(t) + "s";
  if (t < 2LL * 3600) return std::to_string(t / 60) + "m";
  if (t < 2LL * 86400) return std::to_string(t / 3600) + "h";
  return std::to_string(t / 86400) + "d";
}

std::string ttl_text(milliseconds ttl) {
  return ttl.count() < 0 ? "no expiry" : seconds_text(ttl) + " left";
}

bool since_known(const ResourceReport& r) {
  return r.since.time_since_epoch().count() > 0;
}

// How long the holder has had it, by our clock against its own (clamped at 0).
milliseconds held_for(const ResourceReport& r) {
  auto held = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now() - r.since);
  return std::max(held, milliseconds{0});
}

long long unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

// "web-1:4312 (exclusive) for 12.3s, 17.7s left": who, how and how long.
std::string holder_text(const ResourceReport& r) {
  // "3 shared holders, 8.1s left": they have no one owner or start.
  if (r.mode == "shared") return holder_name(r) + ", " + ttl_text(r.ttl);
  std::string out = holder_name(r) + " (" + r.mode + ")";
  if (since_known(r)) out += " for " + seconds_text(held_for(r));
  return out + ", " + ttl_text(r.ttl);
}

}  // namespace

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string printable(std::string text) {
  for (char& c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return text;
}

std::string holder_name(const ResourceReport& r) {
  if (r.mode == "shared") return std::to_string(r.shared_holders) + " shared holders";
  return printable(r.owner.empty() ? r.value : r.owner);
}

std::string status_text(const Inspection& inspection) {
  std::size_t n = inspection.masters.size();
  std::string out = "masters: " + std::to_string(voting(inspection)) + " of " + std::to_string(n) +
                    " voting, a quorum is " + std::to_string(majority(n)) + "\n";
  for (const MasterReport& m : inspection.masters) {
    out += "  " + m.endpoint + "  ";
    if (!m.reachable) {
      out += "unreachable: " + printable(m.error) + "\n";
      continue;
    }
    char rtt[32];
    std::snprintf(rtt, sizeof rtt, "%.2fms", static_cast<double>(m.round_trip.count()) / 1000.0);
    out += m.role + ", up " + uptime_text(m.uptime) + ", rtt " + rtt + ", maxmemory-policy " +
           m.maxmemory_policy;
    if (m.maxmemory_policy != "noeviction") out += " (may evict locks)";
    if (m.quarantined) out += ", in restart quarantine for " + seconds_text(m.quarantine_left);
    if (m.role != "master") out += " (does not vote)";
    out += "\n";
  }
  for (std::size_t k = 0; k < inspection.resources.size(); ++k) {
    const ResourceReport& r = inspection.resources[k];
    out += "resource " + printable(r.resource) + ": ";
    if (r.holders == 0) {
      out += "free\n";
      continue;
    }
    out += (r.quorum ? "held by " : "no quorum; most masters have ") + holder_text(r) + ", on " +
           std::to_string(r.holders) + " of " + std::to_string(n) + " masters";
    if (r.fencing_token > 0) out += ", last fencing token " + std::to_string(r.fencing_token);
    out += ", " + std::to_string(r.waiting) + " waiting\n";
    for (const MasterReport& m : inspection.masters) {
      if (k >= m.keys.size()) continue;
      const KeyReport& key = m.keys[k];
      out += "  " + m.endpoint + "  " +
             (key.present ? printable(key.value) + ", " + ttl_text(key.ttl) : "-") + "\n";
    }
  }
  return out;
}

std::string status_json(const Inspection& inspection) {
  std::size_t n = inspection.masters.size();
  std::string out = "{\"quorum\":" + std::to_string(majority(n)) +
                    ",\"voting\":" + std::to_string(voting(inspection)) + ",\"masters\":[";
  for (std::size_t i = 0; i < n; ++i) {
    const MasterReport& m = inspection.masters[i];
    if (i > 0) out += ",";
    out += "{\"endpoint\":" + json_string(m.endpoint) + ",\"state\":" + json_string(to_string(state_of(m))) +
           ",\"reachable\":" + (m.reachable ? "true" : "false");
    if (!m.reachable) {
      out += ",\"error\":" + json_string(m.error) + "}";
      continue;
    }
    out += ",\"role\":" + json_string(m.role) + ",\"uptime_s\":" + std::to_string(m.uptime.count()) +
           ",\"quarantined\":" + (m.quarantined ? "true" : "false") +
           ",\"quarantine_left_ms\":" + std::to_string(m.quarantine_left.count()) +
           ",\"maxmemory_policy\":" + json_string(m.maxmemory_policy) +
           ",\"rtt_us\":" + std::to_string(m.round_trip.count()) + "}";
  }
  out += "],\"resources\":[";
  for (std::size_t k = 0; k < inspection.resources.size(); ++k) {
    const ResourceReport& r = inspection.resources[k];
    if (k > 0) out += ",";
    out += "{\"resource\":" + json_string(r.resource) +
           ",\"value\":" + (r.holders > 0 ? json_string(r.value) : "null") +
           ",\"holders\":" + std::to_string(r.holders) + ",\"held\":" + (r.quorum ? "true" : "false") +
           ",\"ttl_ms\":" + std::to_string(r.ttl.count()) +
           ",\"owner\":" + (r.owner.empty() ? "null" : json_string(r.owner)) +
           ",\"mode\":" + (r.mode.empty() ? "null" : json_string(r.mode)) +
           ",\"shared_holders\":" + std::to_string(r.shared_holders) +
           ",\"since_unix_ms\":" + (since_known(r) ? std::to_string(unix_ms(r.since)) : "null") +
           ",\"held_ms\":" + (since_known(r) ? std::to_string(held_for(r).count()) : "null") +
           ",\"fencing_token\":" + std::to_string(r.fencing_token) +
           ",\"waiting\":" + std::to_string(r.waiting) + ",\"masters\":[";
    for (std::size_t i = 0; i < n; ++i) {
      const MasterReport& m = inspection.masters[i];
      if (i > 0) out += ",";
      bool present = k < m.keys.size() && m.keys[k].present;
      out += "{\"endpoint\":" + json_string(m.endpoint) +
             ",\"value\":" + (present ? json_string(m.keys[k].value) : "null") +
             ",\"ttl_ms\":" + (present ? std::to_string(m.keys[k].ttl.count()) : "null") + "}";
    }
    out += "]}";
  }
  return out + "]}\n";
}

int status_command(const Invocation& inv) {
  Loop loop;
  Inspector inspector(loop.get(), with_diagnostics(inv.options));
  std::error_code error = make_error_code(errc::closed);
  Inspection result;
  inspector.inspect(inv.resources, [&](std::error_code ec, Inspection inspection) {
    error = ec;
    result = std::move(inspection);
    inspector.close(nullptr);
  });
  loop.run();
  if (error) {
    complain("status: " + error.message());
    return status_for(error, exit_status::conflict);
  }
  std::fputs((inv.json ? status_json(result) : status_text(result)).c_str(), stdout);
  std::size_t votes = voting(result);
  if (votes == result.masters.size()) return 0;
  return votes >= majority(result.masters.size()) ? exit_status::degraded : exit_status::unavailable;
}

}  // namespace redlock::cli
