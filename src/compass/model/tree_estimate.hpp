#pragma once
// Model of the tree-pattern strategies fuse:hier and fuse:synth (docs/patterns.md, "Model"):
// the schedule's program followed in one pass over its events: compute streams in program
// order, transfers released when their data is complete and their copy engine is free, sharing
// the links max-min, re-shared whenever one starts or ends.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/caches.hpp"
#include "compass/model/program.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/operator.hpp"

namespace compass::model::detail {

/// Costs the tree model needs from the strategy estimate (overheads and interference already
/// switched by the estimate's knobs).
struct TreeCosts : FollowCosts {
  bool details = false;  ///< also compute TreeOutcome::comm_s (a second pass)
};

struct TreeOutcome {
  double total_s = 0;
  double compute_s = 0;   ///< GEMM and add work on the slowest rank
  double comm_s = 0;      ///< the transfers alone (no GEMM, adds or overheads); with details
  std::string bottleneck; ///< busiest link direction of the pattern
};

/// A fused strategy's program (a tree pattern's, a ring's, the all-to-all's) for `op`: its
/// structure is kept in memo.skeletons under `structure_key` (sealed; it names everything the
/// structure reads), made by `build` once, routed and prepared for `gpus` and `row_bytes`, and
/// priced for `op` on gpus.front() at each call (reprice_program: the bits a fresh build gives).
std::shared_ptr<const FusedProgram> program_by_structure(
    TreeMemo& memo, const std::vector<std::uint64_t>& structure_key,
    const std::function<schedule::Program()>& build, const hardware::Profile& prof,
    const workload::OperatorSpec& op, const std::vector<int>& gpus, double row_bytes);

/// Predicts `op` along the trees of `tp` (plan.gpus, plan.copy_engines); tp must be valid.
TreeOutcome tree_estimate(const hardware::Profile& p, const workload::OperatorSpec& op,
                          const schedule::TreePlan& tp, const schedule::CommPlan& plan,
                          const TreeCosts& costs, Caches& caches);

}  // namespace compass::model::detail
