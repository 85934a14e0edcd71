#pragma once
// The ways to run a TP operator.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compass/core/result.hpp"

namespace compass::schedule {

enum class StrategyKind {
  sequential,
  decompose,
  fuse_all2all,
  fuse_ring,
  fuse_double_ring,
  fuse_hier,   ///< hierarchical broadcast trees (docs/patterns.md)
  fuse_synth,  ///< synthesised tree packing (docs/patterns.md)
};

/// A strategy; `parts` is the decomposition degree d of `decompose:d` (0 otherwise).
struct Strategy {
  StrategyKind kind = StrategyKind::sequential;
  int parts = 0;
  bool operator==(const Strategy&) const = default;
};

/// "sequential", "decompose:4", "fuse:all2all", "fuse:ring", "fuse:double-ring", "fuse:hier",
/// "fuse:synth".
std::string to_string(const Strategy& s);
/// Parses the names above; the error names the bad text and lists the accepted forms. The
/// degree of decompose:D must be in 1..kMaxDecomposeParts (limits.hpp).
Result<Strategy> parse_strategy(std::string_view s);
/// The fused strategies (GEMM chunks in one kernel on arrival flags, copy-engine transfers).
bool is_fused(StrategyKind k);
/// Simplicity rank used to break ties (sequential simplest).
int simplicity_rank(StrategyKind k);
/// The strategies `--strategy all` runs: sequential, decompose:`parts`, and the five fusions.
std::vector<Strategy> all_strategies(int decompose_parts);

}  // namespace compass::schedule
