#pragma once
// GEMM time model: the Profile's calibration table when present (interpolated), else a
// roofline with wave quantisation over SMs, small-shape inefficiency and launch overhead.

#include <cstdint>

#include "compass/core/dtype.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::model {

/// Predicted time of one GEMM [m, k] x [k, n] on GPU `gpu` of the profile, launch included.
double gemm_time_s(const hardware::Profile& p, std::int64_t m, std::int64_t n, std::int64_t k,
                   DType dtype, int gpu = 0);

}  // namespace compass::model
