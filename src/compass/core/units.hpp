#pragma once
// Units used across the layers, and the tolerance under which two computed times or
// bandwidths count as equal.

#include <algorithm>
#include <cmath>

#include "compass/core/units.hpp"

namespace compass {

inline constexpr double kGB = 1e9;                          ///< bytes per GB (decimal)
inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;    ///< bytes per GiB
inline constexpr double kTFLOPS = 1e12;                     ///< FLOP/s per TFLOP/s

/// Relative tolerance under which two times or bandwidths count as equal (ties).
inline constexpr double kRelTol = 1e-9;

/// a < b by more than the relative tolerance.
inline bool less_tol(double a, double b) {
  return a < b - kRelTol * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace compass
