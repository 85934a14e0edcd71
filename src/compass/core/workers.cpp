#include "compass/core/workers.hpp"

#include <algorithm>
#include <thread>

namespace compass {

std::size_t worker_count(int threads, std::size_t tasks) {
  const std::size_t asked = threads > 0 ? static_cast<std::size_t>(threads)
                                        : std::max(1u, std::thread::hardware_concurrency());
  return std::min(asked, tasks);
}

}  // namespace compass
