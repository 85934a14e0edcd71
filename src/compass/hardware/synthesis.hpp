#pragma once
// Communication patterns synthesised from the topology (docs/patterns.md): every shard of an
// all-gather travels from its owner down one or more broadcast trees over the group's GPUs,
// each tree edge a transfer along the profile's route, forwarded at GPUs. A reduce-scatter
// runs the same trees backwards (partial sums flow to the owner and are added on the way).
//
// Two builders:
// - hierarchical_pattern: GPUs are grouped by route hop count (NVLink pairs, switches, sockets,
//   ...); a shard enters every group once (gather within a group, exchange across groups,
//   distribute inside), so every cut between groups is crossed only as often as the data needs.
// - synthesize_pattern: a load-balanced packing of broadcast trees over the whole group
//   (multiplicative weights on link directions and copy engines, trees grown greedily at the
//   current prices), for any profile.

#include <string>
#include <utility>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/hardware/rings.hpp"

namespace compass::hardware {

/// One broadcast tree: carries `share` of the root's shard. `edges` are (from, to) GPU
/// ordinals; every `from` is the root or the `to` of an earlier edge, and the edges reach every
/// other GPU of the group exactly once.
struct BroadcastTree {
  int root = 0;
  double share = 1;
  std::vector<std::pair<int, int>> edges;
  bool operator==(const BroadcastTree&) const = default;
};

/// A pattern: for every GPU of the group, trees rooted at it whose shares sum to 1.
struct TreePattern {
  std::string name;                  ///< "hier" or "synth"
  std::vector<int> gpus;             ///< the group
  std::vector<BroadcastTree> trees;  ///< grouped by root, in group order
  bool operator==(const TreePattern&) const = default;
};

/// Largest group the builders below search; beyond it both return, for every root, the path
/// through the group in group order (a pipelined ring broadcast), which costs O(n^2) to build.
inline constexpr int kMaxTreeGpus = 32;

/// The hierarchical pattern of a group (errors name a bad group).
Result<TreePattern> hierarchical_pattern(const Profile& p, const std::vector<int>& gpus);

/// The synthesised tree packing of a group (errors name a bad group).
Result<TreePattern> synthesize_pattern(const Profile& p, const std::vector<int>& gpus);
/// The same, given `ring` = find_ring(p, gpus).
Result<TreePattern> synthesize_pattern(const Profile& p, const std::vector<int>& gpus,
                                       const Ring& ring);

/// Checks that `t` is a pattern over `gpus`: every tree spans the group from its root, shares
/// are positive and sum to 1 per root. The error names the first fault.
Status validate_pattern(const TreePattern& t, const std::vector<int>& gpus);

/// Loads of an all-gather of `total_bytes` (each GPU owns total/n) under the pattern: every
/// tree edge moves share x total/n bytes over its route. time_s is the busiest direction's busy
/// time, which perfect pipelining reaches (no latency, no serial copy engines); the simulator
/// gives the time of the chunked schedule.
PatternTime allgather_load_pattern(const Profile& p, const TreePattern& t, double total_bytes);

/// Largest depth (edges from the root) of any tree of the pattern.
int pattern_depth(const TreePattern& t);

}  // namespace compass::hardware
