#pragma once
// The communication a layout adds beyond the TP operators: data-parallel collectives
// (hierarchical: a ring inside the node on the node's links, then a ring across nodes over the
// NICs) and pipeline sends between stages, costed with the model's link model (latency +
// bytes / bandwidth under max-min sharing, model/comm_model.hpp).

#include <memory>

#include "compass/hardware/profile.hpp"
#include "compass/job/cluster.hpp"
#include "compass/job/layout.hpp"
#include "compass/model/caches.hpp"
#include "compass/model/comm_model.hpp"

namespace compass::job {

/// Prices collectives and transfers on one cluster; remembers ring-step patterns, so one
/// object serves a whole search (not thread-safe).
class JobComm {
 public:
  explicit JobComm(const Cluster& cluster);

  /// Ring collective over `members` GPUs of one node spaced `stride` apart (GPUs 0, stride,
  /// ...), on `total_bytes` (the gathered / reduced size), launch included; 0 for one member.
  /// With `rings` > 1, that many such rings (starting at GPUs 0, 1, ..., rings - 1; at most
  /// `stride`) step at the same time and share the node's links: the DP rings of a stage's TP
  /// ranks.
  double intra_node_s(int members, int stride, double total_bytes, model::Collective kind,
                      int rings = 1);
  /// Ring collective with one rank on each of `nodes` nodes, every GPU of a node running its own
  /// at the same time (each gets its share of the node's NICs); 0 for one node.
  double inter_node_s(int nodes, double total_bytes, model::Collective kind);
  /// A DP group's collective on `total_bytes` placed by `pl`: inside the node first, then
  /// across nodes on the 1/dp_per_node share each rank keeps (all-gather: the reverse order,
  /// same time; all-reduce: reduce-scatter then all-gather).
  double dp_collective_s(const Placement& pl, int tp, double total_bytes, model::Collective kind);
  /// One activation send between adjacent pipeline stages (NVLink/PCIe inside a node, the NIC
  /// share across nodes).
  double p2p_s(const Placement& pl, double bytes) const;
  /// One send from global rank `from` to rank `to` (consecutive ranks fill a node): the node's
  /// route when both sit on one node, the NIC share across nodes; 0 for the same GPU.
  double p2p_ranks_s(std::int64_t from, std::int64_t to, double bytes) const;

  /// One step of a stage's context-parallel rings: each of the stage's `replicas` x tp x cp ranks
  /// (tp-cp-dp order, consecutive ranks filling a node) passes `bytes` to the next rank of its
  /// CP ring (cp ranks tp apart) at the same time, every TP rank's ring and every DP replica's.
  /// The hops inside a node share its links (max-min, model::concurrent_flows_time); a hop
  /// across nodes takes its NIC share. The slowest hop; 0 for cp 1.
  double cp_ring_step_s(int tp, int cp, std::int64_t replicas, double bytes) const;
  /// The two-GPU profile that stands for one rail between nodes: GPU - NIC share - network -
  /// NIC share - GPU (for reports and tests).
  const hardware::Profile& rail() const { return rail_; }

 private:
  const Cluster* cluster_;
  hardware::Profile rail_;
  std::unique_ptr<model::Caches> caches_;
};

}  // namespace compass::job
