#pragma once
// ODP-InterDecom: the optimal decomposition degree. T(d) = A*d + B + C/d with A, B, C built from
// the component models (docs/model.md, "Decomposition model"), d* = sqrt(C/A) rounded to the
// best feasible degree, and the exact argmin of the step-by-step estimate for comparison.

#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/model/caches.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/operator.hpp"

namespace compass::model {

/// Fewest rows a part may have (one 64-row GEMM tile; smaller parts waste most of a tile).
inline constexpr std::int64_t kMinRowsPerPart = 64;
/// Largest decomposition degree considered.
inline constexpr int kMaxParts = 64;

/// Coefficients of T(d) = A*d + B + C/d, in seconds.
struct OdpCoefficients {
  double a_s = 0;  ///< cost each extra part adds (per-part fixed cost of the longer stream)
  double b_s = 0;  ///< the longer stream's bandwidth/compute time, inflated by interference
  double c_s = 0;  ///< fill + drain: the shorter stream's time, which shrinks as 1/d
  bool comm_bound = false;  ///< the collective stream is the longer one
};

/// T(d) of the coefficients.
double odp_time_s(const OdpCoefficients& c, double d);

/// Degrees d that divide `rows` with rows/d >= min_rows, up to max_parts (always contains 1).
std::vector<int> feasible_degrees(std::int64_t rows, std::int64_t min_rows = kMinRowsPerPart,
                                  int max_parts = kMaxParts);

/// sqrt(C/A) rounded to the feasible neighbour (below or above) with the lower T(d), ties to the
/// smaller degree; A <= 0 (parts cost nothing) gives the largest feasible degree.
int closed_form_degree(const OdpCoefficients& c, const std::vector<int>& feasible);

/// Everything the decomposition predictor knows about one operator.
struct OdpResult {
  OdpCoefficients coef;
  double d_continuous = 0;        ///< sqrt(C/A)
  int d_closed = 1;               ///< closed form rounded to a feasible degree
  int d_argmin = 1;               ///< exact argmin of the step-by-step estimate
  std::vector<int> feasible;      ///< feasible degrees, ascending
  std::vector<double> exact_s;    ///< step-by-step estimate per feasible degree
  std::vector<double> formula_s;  ///< T(d) per feasible degree
  double t_closed_s = 0;          ///< step-by-step estimate at d_closed
  double t_argmin_s = 0;          ///< step-by-step estimate at d_argmin
  /// t_closed / t_argmin - 1 (0 when the closed form finds the argmin).
  double gap() const { return t_argmin_s > 0 ? t_closed_s / t_argmin_s - 1.0 : 0.0; }
  /// The step-by-step estimate at degree d, or a negative value when d is not feasible.
  double exact_at(int d) const;
};

/// Builds A, B, C from the per-part times at d = 1 and at the largest feasible degree (the
/// secant of d*t(d), so per-part GEMM efficiency loss lands in A), then d* and the argmin.
/// Errors: invalid op or plan (as model::estimate).
Result<OdpResult> optimise_decomposition(const hardware::Profile& p,
                                         const workload::OperatorSpec& op,
                                         const schedule::CommPlan& plan, Caches& caches);

}  // namespace compass::model
