#include "compass/job/comm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace compass::job {

namespace {

hardware::Profile make_rail(const Cluster& c) {
  using hardware::Link;
  using hardware::LinkKind;
  using hardware::Node;
  using hardware::NodeKind;
  hardware::Profile p;
  p.name = c.name + "-rail";
  p.description = "one GPU per node on its share of the node's NICs";
  p.devices.push_back(c.node.gpu_device(0));
  const std::string dev = p.devices[0].name;
  p.nodes = {Node{"gpu0", NodeKind::gpu, dev}, Node{"gpu1", NodeKind::gpu, dev},
             Node{"network", NodeKind::network, ""}};
  const double bw = c.nic_bytes_per_s_per_gpu();
  const double half_latency = c.inter_node_latency_s() / 2;
  const std::string src = fmt::format(
      "{} x {} Gb/s per node shared by {} GPUs, {} efficiency, "
      "oversubscription {}",
      c.nic.count, c.nic.gbps, c.gpus_per_node(), c.nic.efficiency, c.network.oversubscription);
  p.links = {Link{"nic0", LinkKind::network, 0, 2, bw, bw, half_latency, true, src},
             Link{"nic1", LinkKind::network, 1, 2, bw, bw, half_latency, true, src}};
  p.overheads = c.node.overheads;
  Status routed = hardware::compute_missing_routes(p);
  COMPASS_CHECK(routed.ok(), "rail profile: {}", routed.error().message);
  return p;
}

}  // namespace

JobComm::JobComm(const Cluster& cluster)
    : cluster_(&cluster), rail_(make_rail(cluster)), caches_(std::make_unique<model::Caches>()) {}

double JobComm::intra_node_s(int members, int stride, double total_bytes, model::Collective kind,
                             int rings) {
  if (members <= 1 || total_bytes <= 0) return 0;
  std::vector<std::vector<int>> all(std::clamp(rings, 1, stride), std::vector<int>(members));
  for (std::size_t r = 0; r < all.size(); ++r)
    for (int i = 0; i < members; ++i) all[r][i] = static_cast<int>(r) + i * stride;
  const int steps = model::collective_steps(kind, members);
  const double step =
      model::cached_rings_step_time(cluster_->node, all, total_bytes / members, *caches_).time_s;
  return steps * step + cluster_->node.overheads.collective_launch_s;
}

double JobComm::inter_node_s(int nodes, double total_bytes, model::Collective kind) {
  if (nodes <= 1 || total_bytes <= 0) return 0;
  // On a rail-optimised, non-blocking fabric every ring step is one transfer at the GPU's NIC
  // share; all steps are alike.
  const double step = model::transfer_time_s(rail_, 0, 1, total_bytes / nodes);
  return model::collective_steps(kind, nodes) * step + rail_.overheads.collective_launch_s;
}

double JobComm::dp_collective_s(const Placement& pl, int tp, double total_bytes,
                                model::Collective kind) {
  if (kind == model::Collective::all_reduce)
    return dp_collective_s(pl, tp, total_bytes, model::Collective::reduce_scatter) +
           dp_collective_s(pl, tp, total_bytes, model::Collective::all_gather);
  // Every TP rank of the stage reduces its own shard at the same time, each on its own ring.
  const double inside = intra_node_s(pl.dp_per_node, tp, total_bytes, kind, tp);
  const double across = inter_node_s(pl.dp_nodes, total_bytes / pl.dp_per_node, kind);
  return inside + across;
}

double JobComm::p2p_s(const Placement& pl, double bytes) const {
  if (bytes <= 0) return 0;
  if (pl.pp_crosses_nodes) return model::transfer_time_s(rail_, 0, 1, bytes);
  if (pl.pp_peer_offset == 0) return 0;
  return model::transfer_time_s(cluster_->node, 0, pl.pp_peer_offset, bytes);
}

double JobComm::p2p_ranks_s(std::int64_t from, std::int64_t to, double bytes) const {
  if (bytes <= 0 || from == to) return 0;
  const int g = cluster_->gpus_per_node();
  if (from / g != to / g) return model::transfer_time_s(rail_, 0, 1, bytes);
  return model::transfer_time_s(cluster_->node, static_cast<int>(from % g),
                                static_cast<int>(to % g), bytes);
}

double JobComm::cp_ring_step_s(int tp, int cp, std::int64_t replicas, double bytes) const {
  if (cp <= 1 || bytes <= 0 || tp < 1 || replicas < 1) return 0;
  const std::int64_t g = cluster_->gpus_per_node();
  const std::int64_t group = std::int64_t{tp} * cp;
  // The hops repeat every lcm(g, group) ranks: the nodes of one period are every kind of node.
  const std::int64_t ranks = std::min(std::lcm(g, group), group * replicas);
  double slowest = 0;
  std::vector<hardware::Flow> inside;
  for (std::int64_t first = 0; first < ranks; first += g) {
    inside.clear();
    for (std::int64_t r = first; r < std::min(first + g, ranks); ++r) {
      const std::int64_t base = r - r % group, c = (r % group) / tp;
      const std::int64_t to = base + r % tp + tp * ((c + 1) % cp);
      if (to / g == r / g)
        inside.push_back({static_cast<int>(r % g), static_cast<int>(to % g), bytes});
      else
        slowest = std::max(slowest, model::transfer_time_s(rail_, 0, 1, bytes));
    }
    if (!inside.empty())
      slowest = std::max(slowest, model::concurrent_flows_time(cluster_->node, inside).time_s);
  }
  return slowest;
}

}  // namespace compass::job
