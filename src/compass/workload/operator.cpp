// TP operators: validation and per-rank shapes (docs/workload.md).

#include "compass/workload/operator.hpp"

#include <fmt/format.h>

namespace compass::workload {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::ag_gemm:
      return "ag_gemm";
    case OpKind::gemm_rs:
      return "gemm_rs";
    case OpKind::gemm_ar:
      return "gemm_ar";
  }
  return "unknown";
}

std::optional<OpKind> parse_op_kind(std::string_view s) {
  if (s == "ag_gemm") return OpKind::ag_gemm;
  if (s == "gemm_rs") return OpKind::gemm_rs;
  if (s == "gemm_ar") return OpKind::gemm_ar;
  return std::nullopt;
}

namespace {

// Bounds that keep every derived byte count and product inside int64 (2^31 per dimension,
// 2^40 elements per matrix); no real transformer comes near them.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
constexpr double kMaxElements = 1099511627776.0;  // 2^40

Status check_dim(const char* name, std::int64_t v) {
  if (v <= 0) return make_error("{}={} must be positive", name, v);
  if (v > kMaxDim) return make_error("{}={} is too large (limit {})", name, v, kMaxDim);
  return Status::success();
}

Status check_divisible(const char* name, std::int64_t v, int tp, std::string_view kind) {
  if (v % tp != 0) {
    return make_error("{}={} is not divisible by tp={} (required by {})", name, v, tp, kind);
  }
  return Status::success();
}

}  // namespace

Status validate(const OperatorSpec& op) {
  COMPASS_TRY(check_dim("M", op.m));
  COMPASS_TRY(check_dim("N", op.n));
  COMPASS_TRY(check_dim("K", op.k));
  if (op.tp < 1) return make_error("tp={} must be at least 1", op.tp);
  const double mk = static_cast<double>(op.m) * static_cast<double>(op.k);
  const double mn = static_cast<double>(op.m) * static_cast<double>(op.n);
  const double kn = static_cast<double>(op.k) * static_cast<double>(op.n);
  if (mk > kMaxElements || mn > kMaxElements || kn > kMaxElements) {
    return make_error("operator {} is too large (a matrix exceeds 2^40 elements)", describe(op));
  }
  const std::string_view kind = to_string(op.kind);
  switch (op.kind) {
    case OpKind::ag_gemm:
      COMPASS_TRY(check_divisible("M", op.m, op.tp, kind));
      COMPASS_TRY(check_divisible("N", op.n, op.tp, kind));
      break;
    case OpKind::gemm_rs:
      COMPASS_TRY(check_divisible("M", op.m, op.tp, kind));
      COMPASS_TRY(check_divisible("K", op.k, op.tp, kind));
      break;
    case OpKind::gemm_ar:
      COMPASS_TRY(check_divisible("K", op.k, op.tp, kind));
      break;
  }
  return Status::success();
}

RowRange row_share(const OperatorSpec& op, int rank) {
  const std::int64_t a = op.m * rank / op.tp;
  const std::int64_t b = op.m * (rank + 1) / op.tp;
  return {a, b - a};
}

std::int64_t max_row_share(const OperatorSpec& op) { return (op.m + op.tp - 1) / op.tp; }

std::int64_t shard_rows(const OperatorSpec& op) { return op.m / op.tp; }

std::int64_t rows_per_rank(const OperatorSpec& op) {
  return op.kind == OpKind::gemm_ar ? op.m : shard_rows(op);
}

Block input_block(const OperatorSpec& op, int rank) {
  const std::int64_t p = op.tp;
  if (op.kind == OpKind::ag_gemm) return {rank * shard_rows(op), shard_rows(op), 0, op.k};
  return {0, op.m, rank * (op.k / p), op.k / p};
}

Block weight_block(const OperatorSpec& op, int rank) {
  const std::int64_t p = op.tp;
  if (op.kind == OpKind::ag_gemm) return {0, op.k, rank * (op.n / p), op.n / p};
  return {rank * (op.k / p), op.k / p, 0, op.n};
}

Block output_block(const OperatorSpec& op, int rank) {
  const std::int64_t p = op.tp;
  switch (op.kind) {
    case OpKind::ag_gemm:
      return {0, op.m, rank * (op.n / p), op.n / p};
    case OpKind::gemm_rs:
      return {rank * shard_rows(op), shard_rows(op), 0, op.n};
    case OpKind::gemm_ar:
      return {0, op.m, 0, op.n};
  }
  return {};
}

GemmShape local_gemm(const OperatorSpec& op) {
  if (op.kind == OpKind::ag_gemm) return {op.m, op.n / op.tp, op.k};
  return {op.m, op.n, op.k / op.tp};
}

RankShapes rank_shapes(const OperatorSpec& op) {
  COMPASS_CHECK(validate(op).ok(), "rank_shapes on an invalid operator: {}", describe(op));
  const std::int64_t p = op.tp;
  const std::int64_t dt = dtype_bytes(op.dtype);
  RankShapes s;
  switch (op.kind) {
    case OpKind::ag_gemm:
      // X_r [M/p, K] is gathered to X [M, K]; the local GEMM uses the column block W_r.
      s.x_rows = shard_rows(op);
      s.x_cols = op.k;
      s.w_rows = op.k;
      s.w_cols = op.n / p;
      s.gemm_m = op.m;
      s.gemm_n = op.n / p;
      s.gemm_k = op.k;
      s.y_rows = op.m;
      s.y_cols = op.n / p;
      s.comm_bytes = op.m * op.k * dt;
      break;
    case OpKind::gemm_rs:
    case OpKind::gemm_ar:
      // X_r [M, K/p] times W_r [K/p, N] gives a full-size partial that is then reduced.
      s.x_rows = op.m;
      s.x_cols = op.k / p;
      s.w_rows = op.k / p;
      s.w_cols = op.n;
      s.gemm_m = op.m;
      s.gemm_n = op.n;
      s.gemm_k = op.k / p;
      s.y_rows = rows_per_rank(op);
      s.y_cols = op.n;
      s.comm_bytes = op.m * op.n * dt;
      break;
  }
  return s;
}

double total_flops(const OperatorSpec& op) {
  return 2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) * static_cast<double>(op.k);
}

std::string describe(const OperatorSpec& op) {
  return fmt::format("{} M={} N={} K={} tp={} {}", to_string(op.kind), op.m, op.n, op.k, op.tp,
                     to_string(op.dtype));
}

}  // namespace compass::workload
