#pragma once
// Schedules of the tree patterns (docs/patterns.md): fuse:hier and fuse:synth, and a bare
// all-gather along a tree pattern for measuring a pattern alone.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "compass/hardware/synthesis.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::schedule {

/// Chunks per tree for a shard of `shard_bytes`: plan.chunks when set, else one when the plan's
/// rounds are balanced (nothing to pipeline), else about one chunk per 4 MiB of shard, between
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

/// The shape of one tree over p ranks, indexed by rank: its depth (edges from the root; -1 for
/// a rank the tree does not reach), its parent (-1 for the root and unreached ranks) and its
/// children in edge order; height is the largest depth.
struct TreeShape {
  std::vector<int> depth, parent;
  std::vector<std::vector<int>> children;
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

/// A hardware pattern (GPU ordinals) in rank numbers (rank i runs on gpus[i]); the error names
/// a GPU outside the group or a malformed tree.
Result<TreePlan> tree_plan_from(const hardware::TreePattern& t, const std::vector<int>& gpus);

/// Every root sends its whole shard straight to every other rank (the pattern of a plan with
/// no topology).
TreePlan direct_tree_plan(int p);

/// Checks a tree plan against p ranks (roots, spanning trees, shares summing to 1 per root).
Status validate_tree_plan(const TreePlan& plan, int p);

/// A bare all-gather (no GEMM) of `shard_rows` x `cols` BF16 shards along `plan` over ranks on
/// `gpus`, with the same transfers, chunks, engines and order as fuse:hier/fuse:synth's
/// all-gather. Errors: p < 2, empty shards, an invalid plan.
Result<Schedule> tree_allgather(const TreePlan& plan, const std::vector<int>& gpus,
                                int copy_engines, std::int64_t shard_rows, std::int64_t cols);

}  // namespace compass::schedule
