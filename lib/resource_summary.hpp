#pragma once

// What the masters' keys of one resource add up to: who holds it, how, for
// how long, with which token, how many wait. Inspector (one inspection) and
// Client::holder (one read over the Client's own connections) both say it.

#include <redlock/inspect.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace redlock {

/// A fencing counter as stored (decimal digits); 0 for anything else.
std::uint64_t fencing_counter_of(const std::string& text);

/// `keys`: what each master that answered holds for `resource` (masters
/// that did not answer are left out); `masters`: N, for the quorum.
ResourceReport summarize_resource(std::string resource, const std::vector<const KeyReport*>& keys,
                                  int masters);

}  // namespace redlock
