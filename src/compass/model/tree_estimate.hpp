#pragma once
// Model of the tree-pattern strategies fuse:hier and fuse:synth (docs/patterns.md, "Model"):
// the schedule's program followed in one pass over its events: compute streams in program
// order, transfers released when their data is complete and their copy engine is free, sharing
// the links max-min, re-shared whenever one starts or ends.

#include <string>

#include "compass/hardware/profile.hpp"
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

/// Predicts `op` along the trees of `tp` (plan.gpus, plan.copy_engines); tp must be valid.
TreeOutcome tree_estimate(const hardware::Profile& p, const workload::OperatorSpec& op,
                          const schedule::TreePlan& tp, const schedule::CommPlan& plan,
                          const TreeCosts& costs, Caches& caches);

}  // namespace compass::model::detail
