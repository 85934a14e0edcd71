#include "compass/backends/backend.hpp"

#include <algorithm>

namespace compass::backends {

void summarise_times(Measurement& m) {
  std::vector<double> t = m.times_s;
  if (t.empty()) return;
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  m.min_s = t.front();
  m.max_s = t.back();
  m.median_s = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

Status check_options(const RunOptions& o) {
  if (o.repeat < 1) return make_error("repeat must be >= 1, got {}", o.repeat);
  if (o.warmup < 0) return make_error("warmup must be >= 0, got {}", o.warmup);
  return Status::success();
}

}  // namespace compass::backends
