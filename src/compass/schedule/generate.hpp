#pragma once
// One generator per strategy, for each operator kind.

#include <utility>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::schedule {

/// A broadcast tree in rank numbers: carries `share` of the root's shard/chunk; every edge's
/// `from` is the root or the `to` of an earlier edge, and the edges reach every other rank once.
struct RankTree {
  int root = 0;
  double share = 1;
  std::vector<std::pair<int, int>> edges;
  bool operator==(const RankTree&) const = default;
};

/// What a transfer from one rank to another costs, as the tree schedules estimate it to order
/// each copy engine's sends by expected data arrival (patterns.hpp, tree_allgather_program):
/// a fixed time (the copy issue and the route's latency) and the route's link directions
/// (hardware::Hop link * 2 + reverse) with their bandwidths.
struct RouteCost {
  double fixed_s = 0;
  std::vector<std::pair<int, double>> links;  ///< (link direction, bytes per second)
  bool operator==(const RouteCost&) const = default;
};

/// A tree pattern (docs/patterns.md): trees per root whose shares sum to 1. Each tree's rows
/// are cut into `chunks` pipeline chunks (0: chosen from the shard size, see patterns.hpp).
/// `routes` (from * p + to, or empty: every transfer takes its bytes' time on a path of its
/// own) is what the schedule's send order estimates arrivals from.
struct TreePlan {
  std::vector<RankTree> trees;
  int chunks = 0;
  std::vector<RouteCost> routes;
  bool operator==(const TreePlan&) const = default;
};

/// The communication orders a schedule follows, in *rank* numbers (0..p-1).
struct CommPlan {
  std::vector<int> gpus;   ///< GPU ordinal of each rank
  std::vector<int> ring;   ///< one-way ring: data flows ring[i] -> ring[i+1]
  std::vector<int> ring2;  ///< second ring of the double ring (half of every chunk)
  int copy_engines = 2;    ///< copy engines per rank available to transfers
  TreePlan hier;           ///< fuse:hier's trees (hardware::hierarchical_pattern)
  TreePlan synth;          ///< fuse:synth's trees (hardware::synthesize_pattern)
};

/// Ranks 0..p-1 on GPUs 0..p-1, ring in rank order, second ring its reverse; both tree
/// patterns are direct (every root sends its whole shard to every other rank).
CommPlan default_comm_plan(int p);
/// The topology-aware plan for a TP group on a Profile (uses hardware::find_ring,
/// find_double_ring, hierarchical_pattern and synthesize_pattern); the error names the bad GPU
/// or group.
Result<CommPlan> comm_plan_for(const hardware::Profile& profile, const std::vector<int>& gpus);

/// What the tree reduce-scatter's program estimates a rank's compute items to cost (its order,
/// patterns.hpp tree_reduce_scatter_program): per row of a GEMM piece (a fused kernel's share of
/// the local GEMM, slowed beside the copy engines) and of an add, and per item (the flag wait
/// before it). Machine costs, passed explicitly (schedule::tree_rs_costs computes them).
struct TreeRsCosts {
  double gemm_row_s = 0;
  double add_row_s = 0;
  double item_s = 0;
  bool operator==(const TreeRsCosts&) const = default;
};

/// Choices of the generators beyond strategy and plan.
struct GenerateOptions {
  /// Emit fused GEMM groups (Task::fused) where the backend runs one fused kernel per rank:
  /// the fusions fuse:all2all, fuse:ring and fuse:double-ring of every operator.
  /// AG-GEMM: each rank first copies its own chunk into the gathered input (a copy on its
  /// compute resource), so all its GEMMs read one operand, then its chunk GEMMs form group 0.
  /// GEMM-RS / GEMM-AR: the fused GEMM-RS kernel's form. Each rank computes the partial of
  /// every chunk into "part" (group 0) in the strategy's order (all-to-all rotation, ring or
  /// both rings' halves, its own chunk last), each peer chunk's partial is stored into the
  /// owner's "recv" slot for the sender (slot = sender rank), and the owner sums the p
  /// partials in rank order 0, 1, ..., p-1 (a copy, then adds, on its compute resource), so
  /// the sum does not depend on arrival order; gemm_ar then all-gathers in the strategy's
  /// style. Other strategies (sequential, decompose, the tree patterns) are unchanged, as is
  /// p = 1.
  bool fused_gemm = false;
  /// What a rank's compute items cost where the tree patterns (fuse:hier, fuse:synth) order a
  /// reduce-scatter (gemm_rs, gemm_ar) by estimated time: schedule::tree_rs_costs of the
  /// machine the schedule is for. All zero (the default): ordered round by round instead.
  TreeRsCosts tree_rs_costs;
};

/// Whether decompose:`parts` can be generated for `op`: 1 <= parts <= kMaxDecomposeParts, and
/// for parts > 1 tp divides M and parts divide the M/tp rows each rank owns. The error says
/// which. The model offers only degrees that pass (model/odp.cpp).
Status check_decompose(const workload::OperatorSpec& op, int parts);

/// Builds the task graph of `op` under `strategy`. Errors: invalid op, decompose parts that do
/// not divide the rows each rank owns, a plan whose size differs from op.tp, a schedule of
/// more than about kMaxTasks tasks (limits.hpp). Building costs O(n log n) in the n tasks.
Result<Schedule> generate(const workload::OperatorSpec& op, const Strategy& strategy,
                          const CommPlan& plan, const GenerateOptions& options = {});
/// generate() for `machine`: options.tree_rs_costs = tree_rs_costs(machine, plan, op), the
/// schedule the model estimates on that machine. Same errors.
Result<Schedule> generate_for(const hardware::Profile& machine, const workload::OperatorSpec& op,
                              const Strategy& strategy, const CommPlan& plan,
                              GenerateOptions options = {});

/// A bare ring all-gather (no GEMM) of `shard_rows` x `cols` BF16 shards over ranks 0..p-1 on
/// GPUs 0..p-1, one copy engine per rank: rank r forwards chunk (r - step) mod p to r + 1 at
/// each of the p - 1 steps, after its left neighbour's previous transfer. The transfer pattern
/// of the sequential baseline's collective at any scale (simulator tests and benchmarks).
/// Requires p >= 2, shard_rows >= 1, cols >= 1.
Schedule ring_allgather(int p, std::int64_t shard_rows, std::int64_t cols);

}  // namespace compass::schedule
