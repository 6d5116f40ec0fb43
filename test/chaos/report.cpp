#include "report.hpp"

#include <redlock/error.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <sstream>
#include <tuple>

namespace redlock::chaos {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr std::size_t max_examples = 5;

// Every errc by name, so that the JSON always has the same keys.
constexpr std::pair<errc, const char*> errc_names[] = {
    {errc::not_acquired, "not_acquired"},
    {errc::unavailable, "unavailable"},
    {errc::timeout, "timeout"},
    {errc::not_held, "not_held"},
    {errc::invalid_argument, "invalid_argument"},
    {errc::closed, "closed"},
    {errc::expired, "expired"},
    {errc::canceled, "canceled"},
};

std::string error_name(int code) {
  for (const auto& [e, text] : errc_names) {
    if (static_cast<int>(e) == code) return text;
  }
  return "other";
}

std::map<std::string, std::size_t> zeroed_errors() {
  std::map<std::string, std::size_t> m;
  for (const auto& [e, text] : errc_names) m[text] = 0;
  m["other"] = 0;
  return m;
}

microseconds percentile(const std::vector<microseconds>& sorted, double p) {
  // Nearest rank.
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double seconds_since(Clock::time_point start, Clock::time_point t) {
  return std::chrono::duration<double>(t - start).count();
}

std::string describe(const Record& r, Clock::time_point start) {
  char text[160];
  std::snprintf(text, sizeof text, "p%d/t%d in +%.3f s, out +%.3f s, valid until +%.3f s", r.process,
                r.thread, seconds_since(start, r.returned), seconds_since(start, r.left),
                seconds_since(start, r.valid_until));
  return text;
}

std::string targets_text(const std::vector<int>& targets) {
  std::string text = "{";
  for (std::size_t i = 0; i < targets.size(); ++i) text += (i != 0 ? "," : "") + std::to_string(targets[i]);
  return text + "}";
}

std::string fault_text(const FaultEvent& e, Clock::time_point start) {
  char text[160];
  std::snprintf(text, sizeof text, "%s%s +%.3f..+%.3f s", name(e.kind), targets_text(e.targets).c_str(),
                seconds_since(start, e.begin), seconds_since(start, e.end));
  std::string s = text;
  if (e.kind == FaultKind::latency || e.kind == FaultKind::slow_link || e.kind == FaultKind::clock_jump)
    s += " (" + std::to_string(e.delay.count()) + " ms)";
  if (!e.clients.empty()) s += " from clients " + targets_text(e.clients);
  return s;
}

std::string map_text(const std::map<std::string, std::size_t>& m) {
  std::string text;
  for (const auto& [key, count] : m) {
    if (count == 0) continue;
    text += (text.empty() ? "" : ", ") + key + " " + std::to_string(count);
  }
  return text.empty() ? "none" : text;
}

std::string map_json(const std::map<std::string, std::size_t>& m) {
  std::string text = "{";
  bool first = true;
  for (const auto& [key, count] : m) {
    text += (first ? "\"" : ",\"") + key + "\":" + std::to_string(count);
    first = false;
  }
  return text + "}";
}

// What one holder at a time may hold: a resource's lock, or one permit of it.
using Slot = std::pair<int, int>;  // resource, permit (-1: the resource's lock)

// With --permits: no more holders of a resource at once than permits. Each
// grant that finds `permits` others inside their validity is one too many.
void check_permits(const std::vector<Record>& records, int permits, Summary& s) {
  std::map<int, std::vector<std::pair<Clock::time_point, int>>> events;  // by resource: (time, +1/-1)
  for (const Record& r : records) {
    if (!r.acquired() || r.valid_end() <= r.returned) continue;
    events[r.resource].emplace_back(r.returned, +1);
    events[r.resource].emplace_back(r.valid_end(), -1);
  }
  for (auto& [resource, list] : events) {
    std::sort(list.begin(), list.end());  // at one instant, a leave (-1) before an entry
    int inside = 0;
    for (const auto& [when, step] : list) {
      inside += step;
      s.most_holders = std::max(s.most_holders, inside);
      if (step > 0 && inside > permits) ++s.over_admissions;
    }
  }
}

// The register's checks (Summary's write counters), from the history alone.
void check_writes(const std::vector<Record>& records, const std::vector<Write>& writes, Summary& s) {
  // Each holder's grant and validity, by who it was, where, with which token.
  using Holder = std::tuple<int, int, int, int, std::uint64_t>;  // process, thread, resource, permit, token
  std::map<Holder, const Record*> holders;
  // Per resource, grants in the order lock() returned, with the highest token so far.
  std::map<Slot, std::vector<std::pair<Clock::time_point, std::uint64_t>>> grants;
  for (const Record& r : records) {
    if (!r.acquired()) continue;
    holders[{r.process, r.thread, r.resource, r.permit, r.fencing_token}] = &r;
    grants[{r.resource, r.permit}].emplace_back(r.returned, r.fencing_token);
  }
  for (auto& [resource, list] : grants) {
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i)
      list[i].second = std::max(list[i].second, list[i - 1].second);
  }
  auto holder_of = [&](const Write& w) -> const Record* {
    auto h = holders.find({w.process, w.thread, w.resource, w.permit, w.token});
    return h == holders.end() ? nullptr : h->second;
  };

  std::vector<const Write*> in_register_order;
  for (const Write& w : writes) {
    ++s.writes;
    if (w.accepted < 0) {
      ++s.writes_unanswered;
      continue;
    }
    in_register_order.push_back(&w);
    (w.accepted == 1 ? s.writes_accepted : s.writes_refused) += 1;
    const Record* holder = holder_of(w);
    if (holder != nullptr && w.invoked > holder->valid_until) ++s.writes_after_validity;
    const auto& list = grants[{w.resource, w.permit}];
    auto later = std::lower_bound(list.begin(), list.end(), std::make_pair(w.invoked, std::uint64_t{0}));
    if (later != list.begin() && std::prev(later)->second > w.token) {
      ++s.superseded_writes;
      s.superseded_refused += w.accepted == 0 ? 1 : 0;
    }
  }
  // Replays the register in its own order. A write is stale if the register
  // had already taken a higher token, or the same token from another holder,
  // or a write from a holder granted after this writer's validity ended
  // (which catches tokens that did not grow with real time: the register's
  // own test alone could never fail).
  std::sort(in_register_order.begin(), in_register_order.end(),
            [](const Write* a, const Write* b) { return a->seq < b->seq; });
  struct Taken {
    std::uint64_t token = 0;
    std::pair<int, int> holder{-1, -1};
    Clock::time_point latest_grant{};
  };
  std::map<Slot, Taken> taken;
  for (const Write* w : in_register_order) {
    if (w->accepted != 1) continue;
    Taken& t = taken[{w->resource, w->permit}];
    const std::pair<int, int> who{w->process, w->thread};
    const Record* holder = holder_of(*w);
    const bool below = w->token < t.token || (w->token == t.token && who != t.holder && t.holder.first >= 0);
    const bool superseded = holder != nullptr && t.latest_grant > holder->valid_until;
    if (below || superseded) ++s.stale_accepted;
    if (w->token >= t.token) {
      t.token = w->token;
      t.holder = who;
    }
    if (holder != nullptr) t.latest_grant = std::max(t.latest_grant, holder->returned);
  }
}

}  // namespace

namespace {

using Span = std::pair<Clock::time_point, Clock::time_point>;

// The parts of `spans` that lie within some span of `free` (both sorted, the
// latter disjoint).
std::vector<Span> within(const std::vector<Span>& spans, const std::vector<Span>& free) {
  std::vector<Span> out;
  for (const auto& [from, to] : spans) {
    for (const auto& [free_from, free_to] : free) {
      const auto start = std::max(from, free_from);
      const auto end = std::min(to, free_to);
      if (start < end) out.emplace_back(start, end);
    }
  }
  return out;
}

}  // namespace

// The liveness check (Summary::stalls): per resource, the spans no recorded
// hold covers, against the calls that waited through them. A call for
// several resources at once (--all) can take none of them while another is
// held: it stalls only where all of its resources were free together.
void check_stalls(const std::vector<Record>& records, const FaultSchedule& schedule,
                  Clock::duration stall_after, Summary& s) {
  std::map<int, std::vector<Span>> holds;
  std::map<int, std::vector<const Record*>> waits;
  // A call's resources: its records share the process, thread and call time.
  std::map<std::tuple<int, int, Clock::time_point>, std::vector<int>> call_resources;
  for (const Record& r : records) {
    waits[r.resource].push_back(&r);
    call_resources[{r.process, r.thread, r.called}].push_back(r.resource);
    if (r.acquired()) holds[r.resource].emplace_back(r.returned, std::max(r.left, r.returned));
  }
  // The free spans of each resource: between the end of what was held so far
  // and the next grant.
  std::map<int, std::vector<Span>> free;
  for (auto& [resource, held] : holds) {
    std::sort(held.begin(), held.end());
    Clock::time_point covered{};
    for (const auto& [from, to] : held) {
      if (covered != Clock::time_point{} && from > covered) free[resource].emplace_back(covered, from);
      covered = std::max(covered, to);
    }
  }
  for (auto& [resource, list] : waits) {
    for (const auto& [from, to] : free[resource]) {
      for (const Record* w : list) {
        std::vector<Span> stalled{{std::max(from, w->called), std::min(to, w->returned)}};
        for (int other : call_resources[{w->process, w->thread, w->called}]) {
          if (other != resource) stalled = within(stalled, free[other]);
        }
        bool found = false;
        for (const auto& [start, end] : stalled) {
          if (end - start <= stall_after || !schedule.majority_healthy(start, end)) continue;
          ++s.stalls;
          s.longest_stall = std::max(s.longest_stall, end - start);
          s.stall_spans.push_back({resource, start, end});
          found = true;
          break;
        }
        if (found) break;  // one stall per free span
      }
    }
  }
}

// --election's observers: per observer and election, in the order reported,
// a leader's term never below an earlier leader's.
void check_observers(const std::vector<Record>& observations, Summary& s) {
  std::map<std::pair<int, int>, std::vector<const Record*>> by_observer;  // (process, election)
  for (const Record& o : observations) by_observer[{o.process, o.resource}].push_back(&o);
  for (auto& [observer, seen] : by_observer) {
    std::stable_sort(seen.begin(), seen.end(),
                     [](const Record* a, const Record* b) { return a->returned < b->returned; });
    std::uint64_t highest = 0;
    for (const Record* o : seen) {
      ++s.observations;
      if (o->permit == 0) continue;  // no leader
      if (o->fencing_token < highest) ++s.observer_regressions;
      highest = std::max(highest, o->fencing_token);
    }
  }
}

// --election's observers: each report of a leader stands until the
// observer's next report (or its process's last record). It must not stand
// more than `report_within` past the end of that leader's tenure (the
// earlier of its resign and its validity), unless a majority of masters was
// unhealthy meanwhile (nobody can read a majority then).
void check_observer_lag(const std::vector<Record>& observations, const std::vector<Record>& records,
                        const FaultSchedule& schedule, Clock::duration report_within, Summary& s) {
  std::map<std::pair<int, std::uint64_t>, Clock::time_point> tenure_end;  // (election, term)
  std::map<int, Clock::time_point> process_end;                           // its last record
  for (const Record& r : records) {
    process_end[r.process] = std::max({process_end[r.process], r.returned, r.unlocked});
    if (!r.acquired() || r.fencing_token == 0) continue;
    // A resign that failed leaves the key to its ttl: the tenure ends then.
    tenure_end[{r.resource, r.fencing_token}] =
        r.unlock_error == 0 ? std::min(r.unlocked, r.valid_until) : r.valid_until;
  }
  std::map<std::pair<int, int>, std::vector<const Record*>> by_observer;  // (process, election)
  for (const Record& o : observations) {
    process_end[o.process] = std::max(process_end[o.process], o.returned);
    by_observer[{o.process, o.resource}].push_back(&o);
  }
  for (auto& [observer, seen] : by_observer) {
    std::stable_sort(seen.begin(), seen.end(),
                     [](const Record* a, const Record* b) { return a->returned < b->returned; });
    for (std::size_t i = 0; i < seen.size(); ++i) {
      const Record& report = *seen[i];
      if (report.permit == 0) continue;  // "no leader" stands as long as it likes
      auto end = tenure_end.find({report.resource, report.fencing_token});
      if (end == tenure_end.end()) continue;  // a term no record names (a misreport)
      const Clock::time_point replaced =
          i + 1 < seen.size() ? seen[i + 1]->returned : process_end[observer.first];
      const Clock::time_point due = end->second + report_within;
      if (replaced <= due || !schedule.majority_healthy(end->second, due)) continue;
      ++s.late_reports;
      s.longest_late = std::max(s.longest_late, replaced - end->second);
    }
  }
}

Summary summarize(const std::vector<Record>& all, const std::vector<Write>& writes,
                  const FaultSchedule& schedule, int permits, Clock::duration stall_after,
                  Clock::duration report_within) {
  std::vector<Record> records;  // the lock calls
  std::vector<Record> observations;
  for (const Record& r : all) (r.is_observation() ? observations : records).push_back(r);
  Summary s;
  check_observers(observations, s);
  check_observer_lag(observations, records, schedule, report_within, s);
  s.errors = zeroed_errors();
  s.unlock_errors = zeroed_errors();
  std::vector<microseconds> latencies;
  std::vector<microseconds> unlock_latencies;
  std::map<Slot, std::vector<const Record*>> held;  // one holder at a time each
  const Clock::time_point healed = schedule.healed();

  for (const Record& r : records) {
    ++s.calls;
    const bool healthy = schedule.majority_healthy(r.called, r.returned);
    s.healthy_calls += healthy ? 1 : 0;
    if (!r.acquired()) {
      ++s.errors[error_name(r.error)];
      continue;
    }
    ++s.acquisitions;
    s.healthy_acquisitions += healthy ? 1 : 0;
    latencies.push_back(duration_cast<microseconds>(r.returned - r.called));
    unlock_latencies.push_back(duration_cast<microseconds>(r.unlocked - r.left));
    if (r.unlock_error != 0) ++s.unlock_errors[error_name(r.unlock_error)];
    if (r.overran()) ++s.overruns;
    if (r.returned >= r.valid_until) ++s.expired_on_return;
    // A semaphore's holders without a permit of their own (the counter
    // control) are held to the permit count alone.
    if (permits == 0 || r.permit >= 0) held[{r.resource, r.permit}].push_back(&r);
    if (r.returned >= healed) {
      const auto after = duration_cast<milliseconds>(r.returned - healed);
      if (!s.first_success_after_faults || after < *s.first_success_after_faults)
        s.first_success_after_faults = after;
    }
  }

  if (!latencies.empty()) {
    std::sort(latencies.begin(), latencies.end());
    s.p50_acquire = percentile(latencies, 0.50);
    s.p99_acquire = percentile(latencies, 0.99);
    std::sort(unlock_latencies.begin(), unlock_latencies.end());
    s.p50_unlock = percentile(unlock_latencies, 0.50);
    s.p99_unlock = percentile(unlock_latencies, 0.99);
    s.max_unlock = unlock_latencies.back();
  }

  // Only the part of each critical section inside its validity counts: past
  // valid_until the algorithm promises nothing (that is an overrun).
  for (auto& [resource, sections] : held) {
    std::sort(sections.begin(), sections.end(),
              [](const Record* a, const Record* b) { return a->returned < b->returned; });
    // A worker paused between the grant and reading the clock records its
    // grant late (returned past valid_until): its place in grant order is unknown.
    // A shared holder's token is checked against the last exclusive grant
    // only (shared holders overlapping one another take theirs in any
    // order); an exclusive grant's against that one and every shared grant since.
    std::optional<std::uint64_t> last_exclusive;
    std::optional<std::uint64_t> ceiling;
    for (const Record* r : sections) {
      if (r->returned >= r->valid_until) continue;
      const std::optional<std::uint64_t>& above = r->shared != 0 ? last_exclusive : ceiling;
      if (above) {
        ++s.tokens_checked;
        if (r->fencing_token <= *above) ++s.token_inversions;
      }
      if (r->shared != 0) {
        ceiling = std::max(ceiling.value_or(0), r->fencing_token);
      } else {
        last_exclusive = r->fencing_token;
        ceiling = r->fencing_token;
      }
    }
    for (std::size_t i = 0; i < sections.size(); ++i) {
      const Record& a = *sections[i];
      for (std::size_t j = i + 1; j < sections.size() && sections[j]->returned < a.valid_end(); ++j) {
        const Record& b = *sections[j];
        if (a.shared != 0 && b.shared != 0) {
          ++s.shared_overlaps;  // allowed: readers beside readers
          continue;
        }
        const auto length = std::min(a.valid_end(), b.valid_end()) - b.returned;
        if (length <= Clock::duration::zero()) continue;
        ++s.overlaps;
        s.longest_overlap = std::max(s.longest_overlap, length);
        if (s.examples.size() < max_examples) s.examples.push_back({a, b, length});
      }
    }
  }
  check_writes(records, writes, s);
  if (permits > 0) check_permits(records, permits, s);
  if (permits == 0) check_stalls(records, schedule, stall_after, s);
  return s;
}

void print_text(std::FILE* out, const RunInfo& run, const Summary& s, const FaultSchedule& schedule,
                bool list_faults) {
  std::fprintf(
      out,
      "redlock-chaos: mode %s, %lld s, %d masters, %d processes x %d threads, %d resources, ttl %lld ms, "
      "quarantine %lld ms, seed %llu\n",
      name(run.mode), static_cast<long long>(run.seconds.count()), run.masters, run.processes, run.threads,
      run.resources, static_cast<long long>(run.ttl.count()), static_cast<long long>(run.quarantine.count()),
      static_cast<unsigned long long>(run.seed));

  std::map<std::string, std::size_t> kinds;
  for (const FaultEvent& e : schedule.events()) ++kinds[name(e.kind)];
  std::fprintf(out, "faults: %zu (%s), all healed at +%.3f s\n", schedule.events().size(),
               map_text(kinds).c_str(), seconds_since(run.start, schedule.healed()));
  if (list_faults) {
    for (const FaultEvent& e : schedule.events())
      std::fprintf(out, "  fault %s\n", fault_text(e, run.start).c_str());
  }
  std::fprintf(out, "lock() calls: %zu, acquisitions: %zu, errors: %s\n", s.calls, s.acquisitions,
               map_text(s.errors).c_str());
  std::fprintf(out, "unlock() errors: %s\n", map_text(s.unlock_errors).c_str());
  if (s.p50_acquire) {
    std::fprintf(out,
                 "acquire latency (successful lock() calls, retries included): p50 %.3f ms, p99 %.3f ms\n",
                 static_cast<double>(s.p50_acquire->count()) / 1000.0,
                 static_cast<double>(s.p99_acquire->count()) / 1000.0);
    std::fprintf(out, "unlock latency (one round, no contention): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
                 static_cast<double>(s.p50_unlock->count()) / 1000.0,
                 static_cast<double>(s.p99_unlock->count()) / 1000.0,
                 static_cast<double>(s.max_unlock->count()) / 1000.0);
  }
  if (s.healthy_calls > 0) {
    std::fprintf(out, "success rate while a majority was healthy: %.1f%% of %zu lock() calls\n",
                 100.0 * static_cast<double>(s.healthy_acquisitions) / static_cast<double>(s.healthy_calls),
                 s.healthy_calls);
  }
  if (s.first_success_after_faults) {
    std::fprintf(out, "first acquisition after the faults stopped: %lld ms\n",
                 static_cast<long long>(s.first_success_after_faults->count()));
  } else {
    std::fprintf(out, "first acquisition after the faults stopped: none\n");
  }
  std::fprintf(out, "overruns (left the critical section after valid_until): %zu\n", s.overruns);
  if (s.expired_on_return > 0) {
    std::fprintf(out, "locks already expired when lock() returned: %zu (DESIGN: never returned)\n",
                 s.expired_on_return);
  }
  std::fprintf(out, "overlapping critical sections (both within validity): %zu", s.overlaps);
  if (s.overlaps > 0) {
    std::fprintf(out, ", longest %.3f ms",
                 std::chrono::duration<double, std::milli>(s.longest_overlap).count());
  }
  std::fprintf(out, "\n");
  std::fprintf(out,
               "stalls (a resource free of recorded holders for over the threshold while a call waited): %zu",
               s.stalls);
  if (s.stalls > 0)
    std::fprintf(out, ", longest %.3f ms",
                 std::chrono::duration<double, std::milli>(s.longest_stall).count());
  std::fprintf(out, "\n");
  if (list_faults) {
    for (const auto& stall : s.stall_spans)
      std::fprintf(out, "  stall resource %d +%.3f..+%.3f s\n", stall.resource,
                   seconds_since(run.start, stall.from), seconds_since(run.start, stall.to));
  }
  if (s.shared_overlaps > 0)
    std::fprintf(out, "shared holders beside one another (allowed): %zu\n", s.shared_overlaps);
  if (s.observations > 0)
    std::fprintf(out,
                 "observer reports: %zu, a lower term after a higher: %zu, a leader reported past its "
                 "tenure's end + ttl + a round trip: %zu\n",
                 s.observations, s.observer_regressions, s.late_reports);
  std::fprintf(out, "fencing tokens checked in grant order: %zu, inversions: %zu\n", s.tokens_checked,
               s.token_inversions);
  if (run.permits > 0) {
    std::fprintf(out, "permits: %d; most holders at once: %d; grants over the permit count: %zu\n",
                 run.permits, s.most_holders, s.over_admissions);
  }
  std::fprintf(
      out, "register writes: %zu, accepted %zu, refused %zu, unanswered %zu; stale writes accepted: %zu\n",
      s.writes, s.writes_accepted, s.writes_refused, s.writes_unanswered, s.stale_accepted);
  std::fprintf(out,
               "writes after the holder's validity: %zu; after a later holder's grant: %zu (refused %zu)\n",
               s.writes_after_validity, s.superseded_writes, s.superseded_refused);
  for (const Overlap& o : s.examples) {
    std::fprintf(out, "  resource-%d, %.3f ms: %s / %s\n", o.first.resource,
                 std::chrono::duration<double, std::milli>(o.length).count(),
                 describe(o.first, run.start).c_str(), describe(o.second, run.start).c_str());
    // The faults that could explain it: those that happened between the first
    // holder's lock() call and the second holder's acquisition.
    for (const FaultEvent& e : schedule.events()) {
      if (e.begin <= o.second.returned && e.end >= o.first.called) {
        std::fprintf(out, "    fault nearby: %s\n", fault_text(e, run.start).c_str());
      }
    }
  }
}

std::string json_line(const RunInfo& run, const Summary& s, const FaultSchedule& schedule) {
  std::ostringstream j;
  auto optional_number = [](const auto& value) {
    return value ? std::to_string(value->count()) : std::string("null");
  };
  j << "{\"mode\":\"" << name(run.mode) << "\",\"seconds\":" << run.seconds.count()
    << ",\"masters\":" << run.masters << ",\"processes\":" << run.processes << ",\"threads\":" << run.threads
    << ",\"resources\":" << run.resources << ",\"ttl_ms\":" << run.ttl.count()
    << ",\"quarantine_ms\":" << run.quarantine.count() << ",\"seed\":" << run.seed
    << ",\"faults\":" << schedule.events().size() << ",\"calls\":" << s.calls
    << ",\"acquisitions\":" << s.acquisitions << ",\"errors\":" << map_json(s.errors)
    << ",\"unlock_errors\":" << map_json(s.unlock_errors) << ",\"overruns\":" << s.overruns
    << ",\"expired_on_return\":" << s.expired_on_return << ",\"overlaps\":" << s.overlaps
    << ",\"shared_overlaps\":" << s.shared_overlaps << ",\"stalls\":" << s.stalls
    << ",\"observations\":" << s.observations << ",\"observer_regressions\":" << s.observer_regressions
    << ",\"late_reports\":" << s.late_reports << ",\"tokens_checked\":" << s.tokens_checked
    << ",\"token_inversions\":" << s.token_inversions
    << ",\"p50_acquire_us\":" << optional_number(s.p50_acquire)
    << ",\"p99_acquire_us\":" << optional_number(s.p99_acquire)
    << ",\"p50_unlock_us\":" << optional_number(s.p50_unlock)
    << ",\"p99_unlock_us\":" << optional_number(s.p99_unlock)
    << ",\"max_unlock_us\":" << optional_number(s.max_unlock) << ",\"success_rate_healthy\":";
  if (s.healthy_calls > 0) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.4f",
                  static_cast<double>(s.healthy_acquisitions) / static_cast<double>(s.healthy_calls));
    j << rate;
  } else {
    j << "null";
  }
  j << ",\"first_success_after_faults_ms\":" << optional_number(s.first_success_after_faults)
    << ",\"workers_failed\":" << run.workers_failed << ",\"writes\":" << s.writes
    << ",\"writes_accepted\":" << s.writes_accepted << ",\"writes_refused\":" << s.writes_refused
    << ",\"writes_unanswered\":" << s.writes_unanswered << ",\"stale_accepted\":" << s.stale_accepted
    << ",\"writes_after_validity\":" << s.writes_after_validity
    << ",\"superseded_writes\":" << s.superseded_writes << ",\"superseded_refused\":" << s.superseded_refused
    << ",\"permits\":" << run.permits << ",\"most_holders\":" << s.most_holders
    << ",\"over_admissions\":" << s.over_admissions << "}";
  return j.str();
}

}  // namespace redlock::chaos
