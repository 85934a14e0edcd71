#pragma once
// Internal to the generators: the task graph of a tree pattern (docs/patterns.md).

#include "compass/schedule/builder.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::schedule::detail {

/// Emits `op` (ag_gemm, gemm_rs or gemm_ar) along the trees of `plan` on `engines` copy
/// engines per rank, the reduce-scatter's compute order estimated with `rs_costs`; with
/// `gemms` false only the all-gather's buffers and transfers (ag_gemm). `plan` must be valid
/// for op.tp ranks.
void tree_pattern_graph(Builder& b, const workload::OperatorSpec& op, const TreePlan& plan,
                        int engines, const TreeRsCosts& rs_costs, bool gemms = true);

}  // namespace compass::schedule::detail
