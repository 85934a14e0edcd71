#include "compass/hardware/task_costs.hpp"

#include <algorithm>

#include "compass/hardware/gemm_cost.hpp"

namespace compass::hardware {

double copy_s(const Profile& p, int gpu, double bytes) {
  if (bytes <= 0) return 0.0;
  const auto& cal = p.calibration.copy_bandwidth_bytes_per_s;
  if (cal && *cal > 0) return bytes / *cal;
  const double bw = p.gpu_device(gpu).memory_bandwidth_bytes_per_s;
  return bw > 0 ? 2.0 * bytes / bw : 0.0;
}

double add_s(const Profile& p, int gpu, double bytes) {
  if (bytes <= 0) return 0.0;
  const double bw = p.gpu_device(gpu).memory_bandwidth_bytes_per_s;
  return bw > 0 ? 3.0 * bytes / bw : 0.0;
}

double copy_issue_s(const Profile& p) { return p.overheads.copy_launch_s; }

double transfer_issue_s(const Profile& p, bool fused, int step) {
  if (fused) return p.overheads.copy_launch_s;
  return step <= 0 ? p.overheads.collective_launch_s : 0.0;
}

double gemm_slowdown(const Profile& p, bool fused, int ranks) {
  if (ranks <= 1) return 1.0;
  if (!fused) return std::max(1.0, p.interference.gemm_slowdown_sm_copy);
  return std::max(1.0, p.calibration.fused_slowdown_copy_engine.value_or(
                           p.interference.gemm_slowdown_copy_engine));
}

double slowed_end(double start, double work, std::span<const Window> busy, double factor) {
  double t = start;
  if (factor == 1.0) return t + work;
  for (const Window& w : busy) {
    if (w.until <= t) continue;
    if (w.from > t) {  // full speed until the window opens
      if (t + work <= w.from) return t + work;
      work -= w.from - t;
      t = w.from;
    }
    const double slow_capacity = (w.until - t) / factor;  // work done inside the window
    if (work <= slow_capacity) return t + work * factor;
    work -= slow_capacity;
    t = w.until;
  }
  return t + work;
}

double fused_chunk_compute_s(const Profile& p, std::int64_t rows, std::int64_t total_rows,
                             std::int64_t n, std::int64_t k, DType dtype, int gpu) {
  if (rows <= 0 || total_rows <= 0) return 0.0;
  return gemm_compute_s(p, total_rows, n, k, dtype, gpu) *
         p.calibration.fused_gemm_overhead.value_or(1.0) * static_cast<double>(rows) /
         static_cast<double>(total_rows);
}

}  // namespace compass::hardware
