#pragma once
// One training iteration of a layout on a cluster, simulated on SimGrid: each pipeline stage's
// forward and backward per micro-batch as executions of the step model's durations, the sends
// between stages and the data-parallel collectives' ring steps as SimGrid flows on a platform
// built from the cluster (the node's links, each GPU's share of the node's NICs, the network's
// oversubscription). What is simulated and what is approximated: docs/job.md, "Held to SimGrid".

#include <cstdint>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/job/cluster.hpp"
#include "compass/job/step.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::backends::sim {

/// How much of the cluster one simulation holds.
enum class JobSimScope {
  /// One pipeline (DP replica 0, TP rank 0 of each stage); each GPU has its share of the node's
  /// NICs and of the oversubscribed uplinks, and the DP ring neighbours on other nodes are
  /// stand-ins. Its cost does not grow with the DP degree.
  replica,
  /// Every GPU of every node: each rank runs its passes, sends and DP ring steps with its real
  /// partners; the node's NICs are links of their own (one per NIC, rail-optimised or shared)
  /// behind one uplink per node of the NICs' rate over the oversubscription. For clusters small
  /// enough to simulate whole: it measures the replica scope's approximation.
  cluster,
};

/// The most GPUs the cluster scope simulates: its time grows faster than its GPUs (every rank
/// an actor, every DP ring step a flow), so a larger cluster takes the replica scope.
inline constexpr std::int64_t kMaxClusterScopeGpus = 1024;

struct JobSimResult {
  double iteration_s = 0;           ///< last stage's end (optimizer included)
  std::vector<double> stage_end_s;  ///< per stage: its pipeline part (last backward) ends
  std::vector<double> done_s;       ///< per stage: reductions and optimizer step done
  long flows = 0;                   ///< SimGrid communications started
};

/// Simulates one iteration of `step.layout` (priced by job::price_step with options `o`, whose
/// PipelineSpec supplies the compute durations), over `scope`. Errors: built without SimGrid, a
/// layout the cluster cannot place, a pipeline spec that does not match the layout, the cluster
/// scope over more than kMaxClusterScopeGpus GPUs. Context parallelism's key/value exchange is
/// in the pass durations as the step model prices it; its ranks join the gradient group.
Result<JobSimResult> simulate_job(const job::Cluster& cluster, const workload::ModelConfig& m,
                                  const job::StepResult& step, const job::StepOptions& o = {},
                                  JobSimScope scope = JobSimScope::replica);

/// "replica" or "cluster".
const char* to_string(JobSimScope scope);

}  // namespace compass::backends::sim
