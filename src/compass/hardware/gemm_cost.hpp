#pragma once
// GEMM cost, the one home of how long a GEMM takes (used by the model and the simulator): the Profile's calibration table when present (interpolated), else a
// roofline with wave quantisation over SMs, small-shape inefficiency and launch overhead.
// Formulas, defaults and their sources: docs/model.md, section "GEMM".

#include <cstdint>

#include "compass/core/dtype.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// Output tile one SM computes at a time in the roofline model (cuBLAS/CUTLASS-typical).
inline constexpr std::int64_t kTileRows = 128;
inline constexpr std::int64_t kTileCols = 128;
/// Per-tile prologue/epilogue cost, expressed as extra K elements of the main loop (assumed).
inline constexpr std::int64_t kTileKOverhead = 64;
/// Fraction of dense peak a large GEMM reaches when the Profile has no calibration:
/// RTX A6000 measured ~123 of 154.8 TFLOP/s BF16 (docs/presets.md).
inline constexpr double kDefaultGemmEfficiency = 123.0 / 154.8;

/// Predicted time of one GEMM [m, k] x [k, n] on GPU `gpu` of the profile, launch included.
double gemm_time_s(const hardware::Profile& p, std::int64_t m, std::int64_t n, std::int64_t k,
                   DType dtype, int gpu = 0);

/// The same GEMM without the kernel launch (the work of one GEMM inside a fused kernel).
double gemm_compute_s(const hardware::Profile& p, std::int64_t m, std::int64_t n, std::int64_t k,
                      DType dtype, int gpu = 0);

/// How the roofline arrived at its time (for reports and tests).
struct GemmRoofline {
  std::int64_t tiles = 0;
  std::int64_t waves = 0;
  double wave_efficiency = 0;  ///< tiles / (waves * sm_count)
  double k_efficiency = 0;     ///< k / (k + kTileKOverhead)
  double compute_s = 0;        ///< waves * per-tile time
  double memory_s = 0;         ///< operand + result bytes / memory bandwidth
  double time_s = 0;           ///< max(compute_s, memory_s), launch excluded
};

/// The roofline part of the model, ignoring any calibration table.
GemmRoofline gemm_roofline(const hardware::Profile& p, std::int64_t m, std::int64_t n,
                           std::int64_t k, DType dtype, int gpu = 0);

/// Large-GEMM fraction of peak used by the roofline: Calibration::gemm_efficiency or the default.
double large_gemm_efficiency(const hardware::Profile& p);

/// Peak FLOP/s of GPU `gpu` for `dtype`; the device must list it (hardware::check_peak_flops).
double peak_flops(const hardware::Profile& p, DType dtype, int gpu = 0);

}  // namespace compass::hardware
