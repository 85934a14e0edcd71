#include "compass/backends/backend.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace compass::backends {

double relative_error(double max_abs_error, double max_ref_abs) {
  if (!std::isfinite(max_abs_error)) return std::numeric_limits<double>::infinity();
  return max_ref_abs > 0 ? max_abs_error / max_ref_abs : max_abs_error;
}

void CheckResult::add(double abs_error, double ref_abs) {
  // A NaN never compares greater: keep it as an infinite error.
  max_abs_error = std::isfinite(abs_error) ? std::max(max_abs_error, abs_error)
                                           : std::numeric_limits<double>::infinity();
  max_ref_abs = std::max(max_ref_abs, ref_abs);
  max_rel_error = relative_error(max_abs_error, max_ref_abs);
}

void CheckResult::judge(double tol) {
  checked = true;
  tolerance = tol;
  passed = max_rel_error <= tol;
}

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
