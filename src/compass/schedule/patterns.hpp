#pragma once
// Schedules of the tree patterns (docs/patterns.md): fuse:hier and fuse:synth, and a bare
// all-gather along a tree pattern for measuring a pattern alone.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "compass/core/index_lists.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::schedule {

/// Chunks per tree for a shard of `shard_bytes`: plan.chunks when set, else one when the plan's
/// rounds are balanced (nothing to pipeline), else one chunk per started MiB of shard, between
/// 1 and 32, which tree_pieces divides among a root's trees by share (docs/patterns.md).
int tree_chunks(const TreePlan& plan, double shard_bytes);

/// One piece of a root's rows: rows [off, off + len) of its shard/chunk, carried by tree
/// `tree` (index into TreePlan::trees) as pipeline chunk `chunk`.
struct TreePiece {
  int tree = 0;
  int chunk = 0;
  std::int64_t off = 0;
  std::int64_t len = 0;
};

/// The non-empty pieces of `root`'s `rows` rows: split among its trees by share (cumulative
/// rounding), each tree's rows cut into near-equal pipeline chunks: `chunks` of them when
/// plan.chunks is set, else round(share x chunks), at least 1 (pieces of about equal size).
std::vector<TreePiece> tree_pieces(const TreePlan& plan, int root, std::int64_t rows, int chunks);

/// Copy engine of every (sender, receiver) edge of the plan: a sender's distinct receivers take
/// its `engines` engines in turn, in the order they first appear; `up` reverses every edge
/// (reduce-scatter sends go child -> parent).
std::map<std::pair<int, int>, int> tree_engines(const TreePlan& plan, int engines, bool up);
/// The same as a p x p table, sender * p + receiver -> engine (-1: not an edge of the plan).
std::vector<int> tree_engine_table(const TreePlan& plan, int p, int engines, bool up);

/// The shape of one tree over p ranks, indexed by rank: its depth (edges from the root; -1 for
/// a rank the tree does not reach), its parent (-1 for the root and unreached ranks) and its
/// children in edge order (children.of(v)); height is the largest depth.
struct TreeShape {
  std::vector<int> depth, parent;
  IndexLists children;
  int height = 0;
};

/// The shape of tree `t` over p ranks.
TreeShape tree_shape(const RankTree& t, int p);

/// tree_shape of every tree of `plan` over p ranks, in plan order.
std::vector<TreeShape> tree_shapes(const TreePlan& plan, int p);

/// The order in which rank `from` takes one round's steps of a tree pattern (smaller first): a
/// send to `to` of owner `owner`'s piece, by destination rotated to start after the sender,
/// then by owner rotated likewise; an owner's final adds of its own piece (from == to == owner,
/// nothing to send) after every send. Without the rotation every sender would walk the ranks
/// in the same order, so at each step all copy engines would feed one receiver while the other
/// receive links idle. The generator emits, and the model follows, each round in this order.
std::pair<int, int> tree_step_order(int p, int from, int to, int owner);

/// One step of a tree all-gather's program (tree_allgather_program): a send of piece `piece`
/// (index into tree_pieces(plan, owner, ...)) from `from` to `to` on `from`'s copy engine
/// `engine`, or the piece's arrival at `to` (where a consumer of it goes in program order).
/// `round` is the piece's pipeline round on that edge (chunk + depth of `to` - 1), a label.
struct TreeAgStep {
  bool arrival = false;
  int from = 0, to = 0, owner = 0, piece = 0, engine = 0, round = 0;
};

/// The program order of an all-gather along `plan`'s trees over p ranks (shapes:
/// tree_shapes(plan, p); pieces[owner]: tree_pieces of that owner; rows of `row_bytes` bytes;
/// engines per tree_engines(plan, engines, false)): every send and every piece's arrival at
/// its receiver. Each copy engine issues its sends in this order, and the order follows
/// expected data arrival: a list schedule in which an engine, when it comes free, takes among
/// its sends whose piece has arrived the one of the earliest pipeline round (then
/// tree_step_order), or else waits for the first piece to arrive. Arrivals are estimated from
/// plan.routes: a send ends its route's fixed cost (copy issue, latency) after its bytes have
/// crossed every link direction of the route, each direction carrying one send at a time in
/// the order the sends start (without routes: its bytes at one byte per second, links
/// unshared); a root's pieces are ready at the start. Steps are in the order of their
/// estimated times (a send's start, an arrival's end), so every send follows the arrival of
/// what it forwards. Deterministic: ties go to the earlier round, then step order. The
/// generator emits, and the model follows, the all-gathers in this order.
std::vector<TreeAgStep> tree_allgather_program(const TreePlan& plan,
                                               const std::vector<TreeShape>& shapes,
                                               const std::vector<std::vector<TreePiece>>& pieces,
                                               double row_bytes, int engines);

/// One step of a tree reduce-scatter's program (tree_reduce_scatter_program): rank `rank`'s GEMM
/// of owner `owner`'s piece `piece` (index into tree_pieces(plan, owner, ...)), its add of the
/// partial sum that child `peer` sent it, or its send of its sum to its parent `peer`. `round`
/// is the round in which the rank completes its sum of the piece (chunk + tree height - its
/// depth), a label.
struct TreeRsStep {
  enum class Kind { gemm, add, send };
  Kind kind = Kind::gemm;
  int rank = 0, owner = 0, piece = 0, round = 0;
  int peer = -1;
  bool operator==(const TreeRsStep&) const = default;
};

/// The costs of `op` on `machine`'s first GPU of the plan's group (generate.hpp, TreeRsCosts):
/// all zero for an empty group, a first GPU the machine lacks, or no peak for op.dtype.
TreeRsCosts tree_rs_costs(const hardware::Profile& machine, const CommPlan& plan,
                          const workload::OperatorSpec& op);

/// The program order of a reduce-scatter up `plan`'s trees over p ranks (shapes:
/// tree_shapes(plan, p); pieces[owner]: tree_pieces of that owner's rows; rows of `row_bytes`
/// bytes; send engines per tree_engines(plan, engines, true)): every rank computes a GEMM piece
/// for every piece, adds the partial sum each child sends it and sends its sum to its parent
/// (the owner keeps its sum). A list schedule orders them by estimated time: a compute stream,
/// when it comes free, takes the add (of a partial that has arrived) or GEMM piece of the
/// earliest round (chunk + tree height - the rank's depth; adds first), so it computes ahead
/// rather than wait for a partial; a copy engine, when it comes free, takes the complete sum of
/// the earliest round (then tree_step_order), else waits for the first sum to complete. GEMM
/// pieces and adds cost `costs` per row, sends as in tree_allgather_program. Steps are in the
/// order they are decided, which is each stream's and each engine's order and puts every step
/// after what it needs. Deterministic. The generator emits, and the model follows, the
/// reduce-scatters in this order.
std::vector<TreeRsStep> tree_reduce_scatter_program(
    const TreePlan& plan, const std::vector<TreeShape>& shapes,
    const std::vector<std::vector<TreePiece>>& pieces, double row_bytes, const TreeRsCosts& costs,
    int engines);

/// The cost of every ordered pair of ranks' route on `profile` (TreePlan::routes; rank i runs
/// on gpus[i]).
std::vector<RouteCost> route_costs(const hardware::Profile& profile, const std::vector<int>& gpus);

/// A hardware pattern (GPU ordinals) in rank numbers (rank i runs on gpus[i]), with the routes
/// of `profile` (route_costs); the error names a GPU outside the group or a malformed tree.
Result<TreePlan> tree_plan_from(const hardware::Profile& profile, const hardware::TreePattern& t,
                                const std::vector<int>& gpus);

/// Every root sends its whole shard straight to every other rank (the pattern of a plan with
/// no topology).
TreePlan direct_tree_plan(int p);

/// Checks a tree plan against p ranks (roots, spanning trees, shares summing to 1 per root,
/// routes empty or one per ordered pair).
Status validate_tree_plan(const TreePlan& plan, int p);

/// A bare all-gather (no GEMM) of `shard_rows` x `cols` BF16 shards along `plan` over ranks on
/// `gpus`, with the same transfers, chunks, engines and order as fuse:hier/fuse:synth's
/// all-gather. Errors: p < 2, empty shards, an invalid plan.
Result<Schedule> tree_allgather(const TreePlan& plan, const std::vector<int>& gpus,
                                int copy_engines, std::int64_t shard_rows, std::int64_t cols);

}  // namespace compass::schedule
