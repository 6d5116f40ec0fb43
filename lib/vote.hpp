#pragma once

#include "resp.hpp"

namespace redlock {

/// How one master's answer counts.
enum class Vote { yes, no, failed };

/// The fencing scripts answer {result, counter} (the Master checked the
/// shape of a script's reply).
inline bool with_counter(const Reply& reply) {
  return reply.type == Reply::Type::array && reply.elements.size() == 2;
}

/// The answer without a fencing counter.
inline const Reply& result_of(const Reply& reply) {
  return with_counter(reply) ? reply.elements[0] : reply;
}

/// Yes: "OK" or a positive integer (SET NX succeeded, a script acted on our
/// value). No: nil or 0 (another value is there, or none). Failed: an error
/// reply (LOADING, READONLY, OOM, MISCONF, ...) or anything else. A fencing
/// script's {result, counter} counts as its result.
Vote classify(const Reply& reply);

}  // namespace redlock
