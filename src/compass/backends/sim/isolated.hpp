#pragma once
// SimGrid keeps its configuration and platforms for the life of a process, so every simulation
// runs in a forked child that hands its outcome back as bytes through a pipe.

#include <functional>
#include <string>
#include <string_view>

#include "compass/core/result.hpp"

namespace compass::backends::sim::detail {

/// Runs `work` in a forked child whose stdout and stderr go to /dev/null (COMPASS_SIM_STDERR=1
/// keeps them, for debugging a crash) and returns the bytes it returned. `work` must not throw;
/// a child that does, crashes or cannot write is an error that starts with `what`.
Result<std::string> run_in_child(std::string_view what, const std::function<std::string()>& work);

}  // namespace compass::backends::sim::detail
