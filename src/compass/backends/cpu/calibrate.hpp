#pragma once
// CPU calibration: measures this machine the way the CPU executor uses it: GEMM
// times through the executor's BLAS wrapper with as many GEMMs running at once as there are
// ranks (they share the cores), memcpy bandwidth, and the executor's per-task overhead; then
// writes them into a Profile's calibration so the planner predicts CPU runs.
// docs/validation.md explains how the numbers are used.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cpu {

using workload::GemmShape;  ///< one GEMM shape [m, k] x [k, n]

struct CpuCalibrateOptions {
  std::vector<GemmShape> shapes;  ///< GEMM shapes to time (duplicates are measured once)
  int concurrency = 2;            ///< GEMMs running at once (= ranks of the runs to predict)
  bool quick = false;             ///< shorter timing windows
  /// Called with the fraction done (0..1) after each measurement; may be empty.
  std::function<void(double)> progress;
};

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

/// Measures. Errors: no shapes, a non-positive shape or concurrency, a BLAS failure.
Result<CpuCalibration> calibrate(const CpuCalibrateOptions& options);

/// `base` with the measurement applied: calibration (GEMM table in FP32, copy bandwidth,
/// efficiency 1 against the measured peak), every device's FP32 peak and memory bandwidth,
/// overheads (launch, copy issue, flag wait = per-task costs; collective launch 0) and
/// interference factors of 1 (ranks already share cores in the measured GEMM times).
hardware::Profile apply_calibration(const hardware::Profile& base, const CpuCalibration& c);

/// The distinct GEMM shapes of the gemm tasks of a schedule.
std::vector<GemmShape> gemm_shapes(const schedule::Schedule& s);

}  // namespace compass::backends::cpu
