#pragma once
// How many worker threads a parallel loop runs on, one rule for every layer.
#include <cstddef>

namespace compass {

/// The workers `threads` asks for (0: one per hardware thread, at least one), at most `tasks`
/// of them (so none when there is nothing to do).
std::size_t worker_count(int threads, std::size_t tasks);

}  // namespace compass
