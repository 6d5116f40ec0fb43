#pragma once

// What the masters' keys of one resource add up to: who holds it, how, for
// how long, with which token, how many wait. Inspector (one inspection) and
// Client::holder (one read over the Client's own connections) both say it.

#include <redlock/inspect.hpp>

#include <string>
#include <vector>

namespace redlock {

/// `keys`: what each master that answered holds for `resource` (masters
/// that did not answer are left out); `masters`: N, for the quorum.
ResourceReport summarize_resource(std::string resource, const std::vector<const KeyReport*>& keys,
                                  int masters);

}  // namespace redlock
