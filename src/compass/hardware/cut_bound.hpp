#pragma once
// Lower bounds on collective times from cuts of the topology (docs/patterns.md).
//
// An all-gather over a group of n GPUs, each owning S = total/n bytes: for every subset A of
// the group, the |A|·S bytes owned inside A must leave A, and the same bytes must enter the
// rest B, so the time is at least |A|·S / F(A -> B), where F is the max-flow capacity from the
// GPUs of A to the GPUs of B through the profile's link directions (every node, GPU or
// switch, may forward). The bound is the largest such ratio over all subsets. A reduce-scatter
// is the all-gather reversed (every link direction swapped): (n-|A|)·S reduced bytes must leave
// A for the owners outside it. With p2p off every GPU-to-GPU byte is staged through host
// memory, so the bytes a set A receives all come from host memory nodes: |A|·(n-1)·S into A
// from the hosts, and the |A|·S owned by A out of A to the hosts.

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// The binding cut of a collective's lower bound.
struct CutBound {
  double time_s = 0;                   ///< the lower bound (0 for a group of one GPU)
  std::vector<int> subset;             ///< GPU ordinals of the binding subset A
  std::string crossing;                ///< which way the bytes cross, e.g. "out of GPUs 2,3 to the rest"
  double bytes = 0;                    ///< bytes that must cross the cut
  double capacity_bytes_per_s = 0;     ///< max-flow capacity across it
  std::vector<std::string> cut_hops;   ///< Profile::hop_name of a minimum cut's link directions
  bool exact = true;                   ///< every subset was enumerated (groups of <= 16 GPUs)
};

/// Largest group for which every subset is enumerated; beyond it the bound is taken over
/// singletons, their complements and the two sides of every link whose removal splits the
/// group (still a valid lower bound, possibly below the exact one).
inline constexpr int kCutBoundExactGpus = 16;

/// Lower bound on the time of an all-gather of `total_bytes` (each GPU owns total/n) over
/// `gpus`; errors name a bad group. Latencies and overheads are not included.
Result<CutBound> allgather_cut_bound(const Profile& p, const std::vector<int>& gpus,
                                     double total_bytes);
/// Lower bound on a reduce-scatter of `total_bytes` of partials per GPU (each GPU ends with
/// total/n reduced bytes): the all-gather bound on the reversed link directions.
Result<CutBound> reduce_scatter_cut_bound(const Profile& p, const std::vector<int>& gpus,
                                          double total_bytes);

/// Max-flow capacity (bytes/s) from the GPUs `from` to the GPUs `to` (disjoint ordinals) over
/// the profile's link directions; `reversed` swaps every link's two directions.
double max_flow_bytes_per_s(const Profile& p, const std::vector<int>& from,
                            const std::vector<int>& to, bool reversed = false);

}  // namespace compass::hardware
