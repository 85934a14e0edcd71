#include "compass/schedule/prices.hpp"

#include <map>
#include <tuple>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/task_costs.hpp"

namespace compass::schedule {

Status check_on_machine(const hardware::Profile& p, const Schedule& s) {
  COMPASS_TRY(validate(s));
  COMPASS_TRY(hardware::check_peak_flops(p, s.op.dtype));
  for (int r = 0; r < s.ranks(); ++r) {
    const int g = s.gpus[static_cast<std::size_t>(r)];
    if (g < 0 || g >= p.gpu_count())
      return make_error("schedule puts rank {} on GPU {}, but profile '{}' has {} GPUs", r, g,
                        p.name, p.gpu_count());
  }
  return Status::success();
}

Result<std::vector<TaskPrice>> task_prices(const hardware::Profile& p, const Schedule& s) {
  // A fused kernel computes all of a rank's pieces as one GEMM's tiles: rows per (rank, n, k).
  std::map<std::tuple<int, std::int64_t, std::int64_t>, std::int64_t> fused_rows;
  for (const Task& t : s.tasks)
    if (in_fused_kernel(t)) fused_rows[{t.resource.rank, t.dst.cols, t.src.cols}] += t.dst.rows;
  std::vector<TaskPrice> out(s.tasks.size());
  for (const Task& t : s.tasks) {
    TaskPrice& c = out[static_cast<std::size_t>(t.id)];
    const int gpu = s.gpus[static_cast<std::size_t>(t.resource.rank)];
    c.fixed_s = launch_cost_s(p, t.launch);
    if (t.kind == TaskKind::gemm) {
      const std::int64_t m = t.dst.rows, n = t.dst.cols, k = t.src.cols;
      c.gemm_s = in_fused_kernel(t)
                     ? hardware::fused_chunk_compute_s(p, m, fused_rows[{t.resource.rank, n, k}], n,
                                                       k, s.op.dtype, gpu)
                     : hardware::gemm_compute_s(p, m, n, k, s.op.dtype, gpu);
      continue;
    }
    c.bytes = task_bytes(s, t);
    const int src_gpu = s.gpus[static_cast<std::size_t>(s.owner(t.src))];
    const int dst_gpu = s.gpus[static_cast<std::size_t>(s.owner(t.dst))];
    if (t.kind == TaskKind::transfer && src_gpu != dst_gpu) {
      c.crosses = true;
      continue;
    }
    if (c.bytes == 0) continue;
    const hardware::DeviceSpec& d = p.gpu_device(gpu);
    const bool calibrated_copy = t.kind != TaskKind::add &&
                                 p.calibration.copy_bandwidth_bytes_per_s &&
                                 *p.calibration.copy_bandwidth_bytes_per_s > 0;
    if (!calibrated_copy && !(d.memory_bandwidth_bytes_per_s > 0))
      return make_error("device '{}' has no memory_bandwidth_bytes_per_s; task {} '{}' needs it",
                        d.name, t.id, t.name);
    const double b = static_cast<double>(c.bytes);
    c.local_s = t.kind == TaskKind::add ? hardware::add_s(p, gpu, b) : hardware::copy_s(p, gpu, b);
  }
  return out;
}

}  // namespace compass::schedule
