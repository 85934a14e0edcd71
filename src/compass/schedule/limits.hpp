#pragma once
// Bounds on what a schedule may ask for, checked before any work: far above any useful
// schedule, low enough that no command runs for minutes or exhausts memory.

#include <cstdint>

namespace compass::schedule {

/// The largest decomposition degree accepted (the planner itself searches up to 64).
inline constexpr int kMaxDecomposeParts = 4096;

/// The most tasks generate() builds (an estimate is checked before building) and a schedule
/// JSON may hold: two million tasks take about a second to build and a few hundred MB.
inline constexpr std::int64_t kMaxTasks = std::int64_t{1} << 21;

}  // namespace compass::schedule
