#pragma once
// Transfer and collective time: latency + bytes / bandwidth per route, with concurrent flows
// sharing links max-min fairly (hardware::run_flows). Formulas: docs/model.md, "Communication".

#include <string>
#include <vector>

#include "compass/hardware/flows.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/model/caches.hpp"

namespace compass::model {

/// One point-to-point transfer alone on its route: route latency + bytes / bottleneck bandwidth
/// (0 when src == dst or bytes <= 0).
double transfer_time_s(const hardware::Profile& p, int src_gpu, int dst_gpu, double bytes);

/// A set of flows that start together and the time until the last one lands.
struct StepTime {
  double time_s = 0;        ///< makespan, route latency included
  std::string bottleneck;   ///< busiest link direction ("" when nothing moves)
  std::vector<hardware::HopLoad> loads;  ///< heaviest first
};

/// Runs `flows` together (max-min sharing, re-shared as flows finish).
StepTime concurrent_flows_time(const hardware::Profile& p, const std::vector<hardware::Flow>& flows);

/// One ring step: every member of `ring_gpus` sends `bytes` to its successor at once.
StepTime ring_step_time(const hardware::Profile& p, const std::vector<int>& ring_gpus, double bytes);

/// One double-ring step: both rings send `bytes_each` to their successors at once.
StepTime double_ring_step_time(const hardware::Profile& p, const std::vector<int>& ring1_gpus,
                               const std::vector<int>& ring2_gpus, double bytes_each);

/// ring_step_time (ring2 == nullptr) or double_ring_step_time through `caches`. Equal flows
/// that start together scale exactly with their size (every max-min rate is fixed by the
/// pattern, latency is added once), so one run per pattern serves every size; the key is the
/// flows' hops with their bandwidths and latencies. `loads` is left empty.
StepTime cached_ring_step_time(const hardware::Profile& p, const std::vector<int>& ring_gpus,
                               const std::vector<int>* ring2_gpus, double bytes_each,
                               Caches& caches);

/// Any number of rings stepping at once (each member sends `bytes_each` to its successor),
/// through `caches` as cached_ring_step_time, which is this with one or two rings.
StepTime cached_rings_step_time(const hardware::Profile& p,
                                const std::vector<std::vector<int>>& rings, double bytes_each,
                                Caches& caches);

/// A flow that becomes ready at `release_s` (e.g. when the GEMM producing it ends) and, when
/// `after` >= 0, not before flow `after` has finished plus `gap_s` (a serial copy engine).
struct TimedFlow {
  int src = 0;
  int dst = 0;
  double bytes = 0;
  double release_s = 0;
  int after = -1;     ///< index of an earlier flow that must finish first, or -1
  double gap_s = 0;   ///< issue cost between `after` (and `also_after`) finishing and the start
  int also_after = -1;  ///< a second earlier flow that must finish first (its data), or -1
};

/// Finish time (route latency included) of each flow when flows join the max-min sharing at
/// their release times; rates are re-shared at every release and every finish. A flow starts at
/// its release, and not before `after` and `also_after` finished plus `gap_s`; both must point
/// to earlier indices. `caches` lends the event loop its buffers.
std::vector<double> run_released_flows(const hardware::Profile& p,
                                       const std::vector<TimedFlow>& flows, Caches& caches);

/// Finish times of flows that all start at 0, each waiting out its route latency before its
/// bytes join the sharing and finishing with its last byte (the simulator's order): the
/// transfers of one ring step of sequential and decompose. Flows must have no `after`,
/// `also_after`, gap or release. Where every flow's route has the same latency this is the
/// latency-after run shifted (one scaled run per pattern serves every size); otherwise it is
/// run per byte count, through `caches`.
std::vector<double> latency_first_flows(const hardware::Profile& p,
                                        const std::vector<TimedFlow>& flows, Caches& caches);

/// Whether every flow that crosses GPUs has the same route latency.
bool same_latencies(const hardware::Profile& p, const std::vector<TimedFlow>& flows);

enum class Collective { all_gather, reduce_scatter, all_reduce };

/// NCCL-style ring collective over `ring_gpus` on a tensor of `total_bytes` (the gathered /
/// reduced size): (p-1) steps (2(p-1) for all-reduce) of concurrent ring flows of total/p bytes
/// each, plus Overheads::collective_launch_s when `with_launch`.
double ring_collective_time_s(const hardware::Profile& p, const std::vector<int>& ring_gpus,
                              double total_bytes, Collective kind, bool with_launch = true);

/// Number of ring steps of a collective over p ranks.
int collective_steps(Collective kind, int p);

}  // namespace compass::model
