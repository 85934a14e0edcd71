#pragma once
// Measured calibrations and how each becomes part of a profile. The CPU backend and the CUDA
// backend measure (`compass calibrate --backend cpu|cuda`: backends/cpu/calibrate.hpp,
// backends/cuda/cuda_backend.hpp); what a measurement means for the model (its GEMM table,
// overheads, interference factors) is written here, beside the other ways of describing a
// machine from measurements: topology discovery (topo_matrix.hpp, live_topology.hpp) and the
// link fits to nccl-tests logs (nccl_fit.hpp).

#include <optional>
#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::measure {

/// What `compass calibrate --backend cpu` measures.
struct CpuCalibration {
  std::vector<hardware::GemmSample> gemm;  ///< FP32, median time of one GEMM under `concurrency`
  double best_flops_per_s = 0;             ///< best per-GEMM rate in the table
  double copy_bandwidth_bytes_per_s = 0;   ///< one memcpy stream, bytes copied per second
  double task_overhead_s = 0;              ///< executor cost of one task beyond its work
  double wake_lag_s = 0;                   ///< mean lateness of a timed wait (paced transfers)
  int concurrency = 2;
  double elapsed_s = 0;
  std::string blas;
};

/// `base` with the measurement applied: calibration (GEMM table in FP32, copy bandwidth,
/// efficiency 1 against the measured peak), every device's FP32 peak and memory bandwidth,
/// overheads (launch, copy issue, flag wait = per-task costs; collective launch 0) and
/// interference factors of 1 (ranks already share cores in the measured GEMM times).
hardware::Profile apply_calibration(const hardware::Profile& base, const CpuCalibration& c);

/// Everything a calibration measured; optional fields are absent when not measurable here.
struct GpuCalibration {
  std::string device;                   ///< GPU name
  std::string arch;                     ///< "sm_90"
  int sm_count = 0;
  int device_count = 0;                 ///< visible GPUs
  std::vector<hardware::GemmSample> gemm;  ///< BF16 times
  double best_bf16_flops = 0;           ///< fastest GEMM of the table, FLOP/s
  double copy_bandwidth_bytes_per_s = 0;   ///< device-to-device cudaMemcpyAsync
  std::optional<double> peer_bandwidth_bytes_per_s;  ///< GPU 0 -> GPU 1, when > 1 GPU
  double kernel_launch_s = 0;           ///< issue cost of one small kernel, back to back
  double copy_launch_s = 0;             ///< issue cost of one small cudaMemcpyAsync
  std::optional<double> collective_launch_s;  ///< NCCL 4-byte all-reduce, when > 1 GPU
  double gemm_slowdown_copy_engine = 1; ///< GEMM time beside copy-engine copies / alone
  double gemm_slowdown_sm_copy = 1;     ///< GEMM time beside an SM copy kernel / alone
  double comm_slowdown_beside_gemm = 1; ///< copy time beside a GEMM / alone
  /// The fused AG-GEMM kernel (every flag preset) against cuBLASLt on the same square GEMM:
  /// fused time / cuBLASLt time, and fused time beside copy-engine copies / alone. Absent when
  /// the fused kernels are not built or cannot run on the device (a note says why).
  std::optional<double> fused_gemm_overhead;
  std::optional<double> fused_slowdown_copy_engine;
  std::string fused_kernel;             ///< the fused kernel measured (its label)
  double elapsed_s = 0;                 ///< wall time of the calibration
  std::vector<std::string> notes;       ///< what was skipped and why
};

/// Writes a calibration into a copy of `base`: Calibration (GEMM table, copy bandwidth,
/// efficiency against the base's BF16 peak when known, the fused kernel's overhead and
/// slowdown beside copies when measured, source), Overheads, Interference;
/// the peer bandwidth and anything without a Profile field go into notes.
hardware::Profile apply_calibration(hardware::Profile base, const GpuCalibration& c);

}  // namespace compass::measure
