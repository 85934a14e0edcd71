#pragma once
// Topology-aware rings over a TP group, the double ring, and the all-gather time of each
// communication pattern (ring, double ring, all-to-all) under max-min link sharing.

#include <string>
#include <vector>

#include "compass/hardware/flows.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// A cyclic order of GPU ordinals; data moves order[i] -> order[(i+1) % n].
struct Ring {
  std::vector<int> order;
  bool operator==(const Ring&) const = default;
};

/// The ring in the opposite direction.
Ring reversed(const Ring& r);

/// Two rings, each carrying half of every chunk.
struct DoubleRing {
  Ring first;
  Ring second;
  bool operator==(const DoubleRing&) const = default;
};

/// How long one communication pattern takes to all-gather `total_bytes` over a group.
struct PatternTime {
  std::string pattern;            ///< "ring", "double-ring", "all2all"
  double time_s = 0;
  std::string bottleneck;         ///< the link direction that bounds the time
  std::vector<HopLoad> loads;     ///< per link direction, heaviest first
  std::vector<std::string> congested;  ///< link directions whose load exceeds the best ring's
};

/// Validates a TP group (distinct, in range, non-empty); the error names the bad ordinal.
Status validate_group(const Profile& p, const std::vector<int>& gpus);

/// The ring with the highest bottleneck bandwidth, then fewest shared-segment crossings,
/// then lowest all-gather time. Exact search for groups of up to 10 GPUs; a greedy
/// nearest-neighbour heuristic plus 2-opt beyond (documented in docs/rings.md).
Result<Ring> find_ring(const Profile& p, const std::vector<int>& gpus);

/// The pair of rings whose all-gather finishes soonest; the reverse of the best ring is the
/// first candidate.
Result<DoubleRing> find_double_ring(const Profile& p, const std::vector<int>& gpus);
/// The same, given `best` = find_ring(p, gpus) of its group.
Result<DoubleRing> find_double_ring(const Profile& p, const Ring& best);

/// All-gather of `total_bytes` (each rank owns total/n) along one ring, step by step.
PatternTime allgather_time_ring(const Profile& p, const Ring& ring, double total_bytes);
/// All-gather with half of every chunk on each ring of the double ring.
PatternTime allgather_time_double_ring(const Profile& p, const DoubleRing& rings, double total_bytes);
/// All-gather where every rank sends its shard to every peer at once.
PatternTime allgather_time_all2all(const Profile& p, const std::vector<int>& gpus, double total_bytes);

}  // namespace compass::hardware
