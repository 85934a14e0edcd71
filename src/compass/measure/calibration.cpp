#include "compass/measure/calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

namespace compass::measure {

hardware::Profile apply_calibration(const hardware::Profile& base, const CpuCalibration& c) {
  hardware::Profile p = base;
  // The table is "launch included" (hardware::gemm_compute_s subtracts the launch): add the
  // executor's per-task cost to the bare BLAS times.
  p.calibration.gemm = c.gemm;
  for (auto& g : p.calibration.gemm) g.time_s += c.task_overhead_s;
  p.calibration.copy_bandwidth_bytes_per_s = c.copy_bandwidth_bytes_per_s;
  p.calibration.gemm_efficiency = 1.0;
  p.calibration.source =
      fmt::format("compass calibrate --backend cpu: {} GEMMs at once (FP32, {}), {} cores",
                  c.concurrency, c.blas, std::thread::hardware_concurrency());
  for (auto& d : p.devices) {
    d.peak_flops[DType::fp32] = c.best_flops_per_s;
    // A copy reads and writes every byte: the memory system moves twice the copy rate.
    d.memory_bandwidth_bytes_per_s = 2.0 * c.copy_bandwidth_bytes_per_s;
  }
  // The measured GEMM times include one task's overhead already (the table is "launch
  // included"); transfers pay a task plus the lateness of the paced wait.
  p.overheads.kernel_launch_s = c.task_overhead_s;
  p.overheads.copy_launch_s = c.task_overhead_s + c.wake_lag_s;
  p.overheads.flag_wait_s = c.task_overhead_s;
  p.overheads.collective_launch_s = 0;
  p.interference.gemm_slowdown_copy_engine = 1.0;
  p.interference.gemm_slowdown_sm_copy = 1.0;
  p.interference.comm_slowdown_beside_gemm = 1.0;
  p.notes.push_back(fmt::format(
      "CPU calibration: GEMM table of {} shapes, best {:.1f} GFLOP/s per GEMM with {} at once; "
      "memcpy {:.2f} GB/s; task overhead {:.1f} us; timed-wait lag {:.1f} us",
      c.gemm.size(), c.best_flops_per_s / 1e9, c.concurrency, c.copy_bandwidth_bytes_per_s / 1e9,
      c.task_overhead_s * 1e6, c.wake_lag_s * 1e6));
  return p;
}

hardware::Profile apply_calibration(hardware::Profile base, const GpuCalibration& c) {
  hardware::Calibration& cal = base.calibration;
  cal.gemm = c.gemm;
  cal.copy_bandwidth_bytes_per_s = c.copy_bandwidth_bytes_per_s;
  cal.gemm_efficiency.reset();
  if (!base.devices.empty() && c.best_bf16_flops > 0) {
    auto it = base.devices.front().peak_flops.find(DType::bf16);
    if (it != base.devices.front().peak_flops.end() && it->second > 0) {
      cal.gemm_efficiency = std::min(1.0, c.best_bf16_flops / it->second);
    }
  }
  cal.source = fmt::format("compass calibrate --backend cuda on {} ({}, {} SMs, {} visible GPU{})",
                           c.device, c.arch, c.sm_count, c.device_count,
                           c.device_count == 1 ? "" : "s");
  base.overheads.kernel_launch_s = c.kernel_launch_s;
  base.overheads.copy_launch_s = c.copy_launch_s;
  if (c.collective_launch_s) base.overheads.collective_launch_s = *c.collective_launch_s;
  // Slowdowns below 1 are measurement noise; the model treats factors as >= 1.
  base.interference.gemm_slowdown_copy_engine = std::max(1.0, c.gemm_slowdown_copy_engine);
  base.interference.gemm_slowdown_sm_copy = std::max(1.0, c.gemm_slowdown_sm_copy);
  base.interference.comm_slowdown_beside_gemm = std::max(1.0, c.comm_slowdown_beside_gemm);
  cal.fused_gemm_overhead = c.fused_gemm_overhead;
  cal.fused_slowdown_copy_engine.reset();
  if (c.fused_slowdown_copy_engine)
    cal.fused_slowdown_copy_engine = std::max(1.0, *c.fused_slowdown_copy_engine);
  base.notes.push_back(fmt::format("calibrated: {}; best BF16 GEMM {:.1f} TFLOP/s; device copy "
                                   "{:.1f} GB/s",
                                   c.device, c.best_bf16_flops / 1e12,
                                   c.copy_bandwidth_bytes_per_s / 1e9));
  if (c.peer_bandwidth_bytes_per_s) {
    base.notes.push_back(fmt::format("calibrated: peer copy GPU0->GPU1 {:.1f} GB/s",
                                     *c.peer_bandwidth_bytes_per_s / 1e9));
  }
  if (!c.collective_launch_s) {
    base.notes.push_back(
        "calibrated: collective launch overhead not measured (one GPU); default kept");
  }
  for (const std::string& note : c.notes) base.notes.push_back("calibrated: " + note);
  return base;
}

}  // namespace compass::measure
