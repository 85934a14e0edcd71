#pragma once
// The numbers an operator runs on: global X [M,K] and W [K,N] in FP32 from a seeded,
// platform-independent generator, the FP64 reference Y = X*W, and the error metric that
// compares a rank's output with the slice of the reference it must equal (docs/workload.md):
//   ag_gemm: y_r [M, N/p] = Y[:, cols r]     (x_r = rows block r of X, w_r = cols block r of W)
//   gemm_rs: y_r [M/p, N] = Y[rows r, :]     (x_r = cols block r of X, w_r = rows block r of W)
//   gemm_ar: y_r [M, N]   = Y                (inputs as gemm_rs)

#include <cstdint>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/workload/operator.hpp"

namespace compass::backends::cpu {

/// A row-major matrix held by the host.
template <typename T>
struct HostMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<T> values;  ///< rows * cols, row-major
  T* row(std::int64_t r) { return values.data() + r * cols; }
  const T* row(std::int64_t r) const { return values.data() + r * cols; }
};

/// The operator and its global FP32 operands.
struct OperatorData {
  workload::OperatorSpec op;
  std::uint64_t seed = 1;
  HostMatrix<float> x;  ///< [M, K]
  HostMatrix<float> w;  ///< [K, N]
};

/// Positive sizes, tp >= 1 and the divisibility the blocks above need; errors name the value.
Status check_operator(const workload::OperatorSpec& op);

/// Bytes of X and W in FP32.
std::int64_t operator_data_bytes(const workload::OperatorSpec& op);
/// Bytes of the FP64 reference and its FP64 copies of X and W.
std::int64_t reference_bytes(const workload::OperatorSpec& op);

/// X and W with entries uniform in [-1, 1), a pure function of (seed, matrix, index), so the
/// same seed gives the same operands on every platform. Catches allocation failure.
Result<OperatorData> make_operator_data(const workload::OperatorSpec& op, std::uint64_t seed);

/// Y = X * W [M, N] computed in FP64 (one big GEMM, no decomposition).
Result<HostMatrix<double>> reference_output(const OperatorData& data);

/// How far a computed output is from the reference.
struct ErrorStats {
  double max_abs_error = 0;  ///< max |y - ref| over every output element of every rank
  double max_ref_abs = 0;    ///< max |ref| over the same elements
  /// max_abs_error / max_ref_abs: the error relative to the output's magnitude. Chosen over a
  /// per-element ratio, which explodes where the exact value is close to zero.
  double max_rel_error = 0;
  std::int64_t elements = 0;  ///< elements compared
  bool operator==(const ErrorStats&) const = default;
};

/// The tolerance `compass run --check` applies to ErrorStats::max_rel_error.
inline constexpr double kCheckTolerance = 1e-4;

/// Adds the comparison of one rank's output (values of shape workload::output_block(op, rank), with row
/// stride ld) to `stats`.
void accumulate_error(const workload::OperatorSpec& op, int rank, const float* values,
                      std::int64_t ld, const HostMatrix<double>& reference, ErrorStats& stats);

}  // namespace compass::backends::cpu
