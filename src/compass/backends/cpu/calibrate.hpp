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
#include "compass/measure/calibration.hpp"
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

/// What calibrate() measures (its meaning for the model: measure/calibration.hpp).
using CpuCalibration = measure::CpuCalibration;

/// Measures. Errors: no shapes, a non-positive shape or concurrency, a BLAS failure.
Result<CpuCalibration> calibrate(const CpuCalibrateOptions& options);

/// `base` with the measurement applied (measure/calibration.hpp).
using measure::apply_calibration;

/// The distinct GEMM shapes of the gemm tasks of a schedule.
std::vector<GemmShape> gemm_shapes(const schedule::Schedule& s);

}  // namespace compass::backends::cpu
