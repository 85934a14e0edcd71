#pragma once
// What every task of a schedule costs on a machine before links are shared and before
// compute and communication slow each other: the one pricing rule the model's timeline
// (model/timeline.cpp) and the simulator (backends/sim/simulator.cpp) both read.

#include <cstdint>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::schedule {

/// One task's price.
struct TaskPrice {
  double fixed_s = 0;  ///< starting it: launch_cost_s(p, task.launch)
  /// GEMM: its work at full speed; a piece of its rank's fused kernel (in_fused_kernel) costs
  /// its rows' share of the kernel's GEMM over all the rank's fused rows of the same N and K
  /// (hardware::fused_chunk_compute_s), any other GEMM hardware::gemm_compute_s.
  double gemm_s = 0;
  /// A copy, an add or a transfer within one GPU: hardware::copy_s / add_s of its bytes.
  double local_s = 0;
  std::int64_t bytes = 0;  ///< task_bytes
  bool crosses = false;    ///< a transfer between two GPUs: its bytes cross the route's links
};

/// Whether `s` can run on `p`, the one check the timeline and the simulator make before pricing
/// it: `s` is valid (schedule::validate), `p` has a peak for its dtype
/// (hardware::check_peak_flops), and every rank's GPU is one of `p`'s. Errors name what is wrong.
Status check_on_machine(const hardware::Profile& p, const Schedule& s);

/// The price of every task of `s` on `p` (rank r on GPU s.gpus[r]), indexed by task id. `s`
/// must pass check_on_machine. Error: a copy, add or same-GPU transfer of bytes on a
/// device with no memory bandwidth (and, for copies, no calibrated copy bandwidth).
Result<std::vector<TaskPrice>> task_prices(const hardware::Profile& p, const Schedule& s);

}  // namespace compass::schedule
