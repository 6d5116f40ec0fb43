#include "resource_summary.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <utility>

#include "lock_value.hpp"
#include "quorum.hpp"
#include "scripts.hpp"

namespace redlock {

std::uint64_t fencing_counter_of(const std::string& text) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) return 0;
  return value;
}

ResourceReport summarize_resource(std::string resource, const std::vector<const KeyReport*>& keys,
                                  int masters) {
  ResourceReport r;
  r.resource = std::move(resource);
  std::map<std::string, std::size_t> counts;
  for (const KeyReport* key : keys) {
    if (key->present) ++counts[key->value];
  }
  for (const auto& [value, count] : counts) {
    if (count > r.holders) {
      r.value = value;
      r.holders = count;
    }
  }
  r.quorum = static_cast<int>(r.holders) >= quorum::majority(masters);
  if (r.holders > 0) r.mode = r.value == scripts::shared_mark ? "shared" : "exclusive";
  if (auto label = read_lock_value(r.value)) {
    r.owner = std::move(label->owner);
    r.since = label->since;
  }
  bool first = true;
  for (const KeyReport* key : keys) {
    r.fencing_token = std::max(r.fencing_token, key->fencing_counter);
    r.waiting = std::max(r.waiting, key->waiting);
    if (r.mode == "shared") r.shared_holders = std::max(r.shared_holders, key->shared_holders);
    if (!key->present || key->value != r.value) continue;
    if (first || key->ttl < r.ttl) r.ttl = key->ttl;
    first = false;
  }
  return r;
}

}  // namespace redlock
