#pragma once

#include <cstdint>

namespace bench {

/// Heap allocations made by this process so far (operator new, all forms).
/// The count lives in alloc_counter.cpp, which replaces the global operator
/// new of the benchmark binary only.
std::uint64_t allocations();

}  // namespace bench
