#pragma once
// A TP operator: a GEMM glued to a collective, with its global and per-rank shapes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compass/core/dtype.hpp"
#include "compass/core/result.hpp"

namespace compass::workload {

/// ag_gemm: AllGather(X) -> GEMM; gemm_rs: GEMM -> ReduceScatter; gemm_ar: GEMM -> AllReduce.
enum class OpKind { ag_gemm, gemm_rs, gemm_ar };

std::string_view to_string(OpKind k);
std::optional<OpKind> parse_op_kind(std::string_view s);

/// Global shapes: M tokens, K input features, N output features (docs/workload.md).
struct OperatorSpec {
  OpKind kind = OpKind::ag_gemm;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  int tp = 1;
  DType dtype = DType::bf16;
  std::string role;  ///< "qkv_fprop", "fc2_dgrad", ... (empty for ad-hoc operators)
  bool operator==(const OperatorSpec&) const = default;
};

/// The shape of one GEMM: [m, k] x [k, n] -> [m, n].
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  bool operator==(const GemmShape&) const = default;
  auto operator<=>(const GemmShape&) const = default;
};

/// A block of a global matrix: rows [row, row + rows) x cols [col, col + cols).
struct Block {
  std::int64_t row = 0, rows = 0, col = 0, cols = 0;
  bool operator==(const Block&) const = default;
};

/// Rows [off, off + len) of a matrix.
struct RowRange {
  std::int64_t off = 0;
  std::int64_t len = 0;
  bool operator==(const RowRange&) const = default;
};

/// Rank `rank`'s share of the M rows split over the tp ranks into near-equal consecutive
/// blocks: rows [M rank / tp, M (rank + 1) / tp). With tp | M every share has shard_rows(op)
/// rows; gemm_ar's rings reduce the shares as their chunks, also when tp does not divide M.
RowRange row_share(const OperatorSpec& op, int rank);
/// Rows of the largest share: ceil(M / tp).
std::int64_t max_row_share(const OperatorSpec& op);
/// Rows of every share when tp | M (always for ag_gemm and gemm_rs): M / tp.
std::int64_t shard_rows(const OperatorSpec& op);
/// Rows of M each rank owns (op must be valid): its shard (M / tp) for ag_gemm and gemm_rs,
/// all M for gemm_ar. decompose:d splits these rows into d parts.
std::int64_t rows_per_rank(const OperatorSpec& op);

/// Where rank r's input, weight and output live in the global X [M, K], W [K, N] and Y [M, N]
/// (op must be valid). ag_gemm: x is row block r of X, w column block r of W, y column block r
/// of Y. gemm_rs: x is column block r of X, w row block r of W, y row block r of Y. gemm_ar: as
/// gemm_rs, but y is all of Y.
Block input_block(const OperatorSpec& op, int rank);
Block weight_block(const OperatorSpec& op, int rank);
Block output_block(const OperatorSpec& op, int rank);

/// Per-rank shapes of one operator.
struct RankShapes {
  std::int64_t x_rows = 0, x_cols = 0;  ///< local input X_r
  std::int64_t w_rows = 0, w_cols = 0;  ///< local weight W_r
  std::int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;  ///< the local GEMM (whole, unchunked)
  std::int64_t y_rows = 0, y_cols = 0;  ///< local output Y_r
  std::int64_t comm_bytes = 0;          ///< bytes of the tensor the collective works on (global)
};

/// Positive sizes, tp >= 1, and divisibility: ag_gemm needs p | M and p | N; gemm_rs needs
/// p | M and p | K; gemm_ar needs p | K. The error names the value.
Status validate(const OperatorSpec& op);
/// Shapes per rank (op must be valid).
RankShapes rank_shapes(const OperatorSpec& op);
/// The local GEMM of one rank, whole and unchunked (op must be valid): ag_gemm multiplies the
/// gathered X [M, K] by W_r [K, N/p]; gemm_rs and gemm_ar multiply X_r [M, K/p] by W_r [K/p, N].
GemmShape local_gemm(const OperatorSpec& op);
/// FLOPs of the whole operator across all ranks: 2 M N K.
double total_flops(const OperatorSpec& op);
/// "ag_gemm M=.. N=.. K=.. tp=.. bf16".
std::string describe(const OperatorSpec& op);

}  // namespace compass::workload
