#include "compass/backends/cpu/operator_data.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>

#include "compass/backends/backend.hpp"
#include "compass/backends/cpu/blas.hpp"

namespace compass::backends::cpu {

using workload::OperatorSpec;
using workload::OpKind;

Status check_operator(const OperatorSpec& op) {
  if (op.m <= 0) return make_error("M must be positive, got {}", op.m);
  if (op.n <= 0) return make_error("N must be positive, got {}", op.n);
  if (op.k <= 0) return make_error("K must be positive, got {}", op.k);
  if (op.tp < 1) return make_error("tp must be at least 1, got {}", op.tp);
  // The BLAS takes 32-bit sizes; larger dimensions could not run anyway.
  constexpr std::int64_t kMaxDim = 2147483647;
  if (op.m > kMaxDim || op.n > kMaxDim || op.k > kMaxDim)
    return make_error("M={} N={} K={}: a dimension exceeds {}", op.m, op.n, op.k, kMaxDim);
  switch (op.kind) {
    case OpKind::ag_gemm:
      if (op.m % op.tp != 0)
        return make_error("ag_gemm: M={} is not divisible by tp={}", op.m, op.tp);
      if (op.n % op.tp != 0)
        return make_error("ag_gemm: N={} is not divisible by tp={}", op.n, op.tp);
      break;
    case OpKind::gemm_rs:
      if (op.m % op.tp != 0)
        return make_error("gemm_rs: M={} is not divisible by tp={}", op.m, op.tp);
      if (op.k % op.tp != 0)
        return make_error("gemm_rs: K={} is not divisible by tp={}", op.k, op.tp);
      break;
    case OpKind::gemm_ar:
      if (op.k % op.tp != 0)
        return make_error("gemm_ar: K={} is not divisible by tp={}", op.k, op.tp);
      break;
  }
  return Status::success();
}

namespace {
// Byte counts in double, saturated, so absurd sizes give a clean "too big" instead of overflow.
std::int64_t saturated_bytes(double bytes) {
  constexpr double kMax = 9.0e18;  // below INT64_MAX
  return bytes >= kMax ? static_cast<std::int64_t>(kMax) : static_cast<std::int64_t>(bytes);
}
double dbl(std::int64_t v) {
  return static_cast<double>(v);
}
}  // namespace

std::int64_t operator_data_bytes(const OperatorSpec& op) {
  return saturated_bytes((dbl(op.m) * dbl(op.k) + dbl(op.k) * dbl(op.n)) * sizeof(float));
}

std::int64_t reference_bytes(const OperatorSpec& op) {
  return saturated_bytes((dbl(op.m) * dbl(op.k) + dbl(op.k) * dbl(op.n) + dbl(op.m) * dbl(op.n)) *
                         sizeof(double));
}

namespace {

// SplitMix64: a tiny counter-based generator, so entry i of a matrix depends only on the seed,
// the matrix and i (no std:: distribution, whose output differs between standard libraries).
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void fill_uniform(HostMatrix<float>& m, std::uint64_t stream) {
  const std::uint64_t base = mix(stream);
  const std::int64_t n = m.rows * m.cols;
  for (std::int64_t i = 0; i < n; ++i) {
    // 24 random bits -> exactly representable float in [-1, 1).
    const std::uint64_t bits = mix(base + static_cast<std::uint64_t>(i)) >> 40;
    m.values[static_cast<std::size_t>(i)] = static_cast<float>(bits) * (2.0f / 16777216.0f) - 1.0f;
  }
}

}  // namespace

Result<OperatorData> make_operator_data(const OperatorSpec& op, std::uint64_t seed) {
  COMPASS_TRY(check_operator(op));
  OperatorData d;
  d.op = op;
  d.seed = seed;
  try {
    d.x = {op.m, op.k, std::vector<float>(static_cast<std::size_t>(op.m * op.k))};
    d.w = {op.k, op.n, std::vector<float>(static_cast<std::size_t>(op.k * op.n))};
  } catch (const std::bad_alloc&) {
    return make_error("out of memory allocating X [{}, {}] and W [{}, {}] (FP32)", op.m, op.k, op.k,
                      op.n);
  }
  fill_uniform(d.x, seed * 2);
  fill_uniform(d.w, seed * 2 + 1);
  return d;
}

Result<HostMatrix<double>> reference_output(const OperatorData& data) {
  const OperatorSpec& op = data.op;
  HostMatrix<double> y;
  std::vector<double> x64, w64;
  try {
    x64.assign(data.x.values.begin(), data.x.values.end());
    w64.assign(data.w.values.begin(), data.w.values.end());
    y = {op.m, op.n, std::vector<double>(static_cast<std::size_t>(op.m * op.n))};
  } catch (const std::bad_alloc&) {
    return make_error("out of memory allocating the FP64 reference Y [{}, {}]", op.m, op.n);
  }
  COMPASS_TRY(
      dgemm(op.m, op.n, op.k, x64.data(), op.k, w64.data(), op.n, y.values.data(), op.n, false));
  return y;
}

void accumulate_error(const OperatorSpec& op, int rank, const float* values, std::int64_t ld,
                      const HostMatrix<double>& reference, ErrorStats& stats) {
  const workload::Block b = workload::output_block(op, rank);
  for (std::int64_t i = 0; i < b.rows; ++i) {
    const float* got = values + i * ld;
    const double* want = reference.row(b.row + i) + b.col;
    for (std::int64_t j = 0; j < b.cols; ++j) {
      const double err = std::fabs(static_cast<double>(got[j]) - want[j]);
      // A NaN or infinite output must fail the check: count it as an infinite error.
      const double e = std::isfinite(err) ? err : std::numeric_limits<double>::infinity();
      stats.max_abs_error = std::max(stats.max_abs_error, e);
      stats.max_ref_abs = std::max(stats.max_ref_abs, std::fabs(want[j]));
    }
  }
  stats.elements += b.rows * b.cols;
  stats.max_rel_error = relative_error(stats.max_abs_error, stats.max_ref_abs);
}

}  // namespace compass::backends::cpu
