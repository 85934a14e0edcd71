#pragma once
// One training iteration of a layout on a cluster: each stage's forward and backward per
// micro-batch from the per-layer plan, the pipeline schedule followed event by event, the
// data-parallel collectives in buckets under the backward / forward, and the optimizer step.
// What it counts and leaves out: docs/job.md, "The step".

#include <cstdint>
#include <tuple>
#include <vector>

#include "compass/job/cluster.hpp"
#include "compass/job/comm.hpp"
#include "compass/job/layout.hpp"
#include "compass/job/memory.hpp"
#include "compass/job/pipeline.hpp"
#include "compass/plan/layer_plan.hpp"

namespace compass::job {

/// Context parallelism's exposed time per layer and micro-batch: each of the cp - 1 ring steps
/// sends this rank's keys and values to the next CP rank (the backward their gradients too:
/// twice the bytes) while the attention of the block received before runs; a step's transfer
/// beyond that block's attention (1/cp of the rank's attention) is exposed. A step is every CP
/// ring of the stage passing its block at once (JobComm::cp_ring_step_s).
struct CpExposure {
  double forward_s = 0;
  double backward_s = 0;
};
/// Zero for CP 1.
CpExposure cp_exposure(JobComm& comm, const workload::ModelConfig& m, const Layout& l,
                       const plan::LayerPlan& lp);

/// One layer, one micro-batch, on one GPU, under one TP overlap configuration.
struct LayerTimes {
  double forward_s = 0;
  double backward_s = 0;
  double tp_exposed_forward_s = 0;  ///< TP operators' time beyond their GEMM work
  double tp_exposed_backward_s = 0;
  double attention_forward_s = 0;  ///< the part selective recomputation repeats
};
/// The layer's times from a layer plan (TP operators under `c`, plus OtherWork); with TP 1 every
/// setting is Megatron-LM's and nothing counts as TP exposure.
LayerTimes layer_times(const plan::LayerPlan& lp, plan::Config c);

struct StepOptions {
  /// Parameters per DP bucket: Megatron-LM's default max(40M, 1M x DP).
  double min_bucket_params = 40e6;
  /// Optimizer step bytes moved per local parameter: Adam reads fp32 grad, master weight and
  /// two moments, writes the three and the bf16 weight (30), plus the gradient-norm read (4).
  double optimizer_bytes_per_param = 34;
  MemoryOptions memory;
};

/// Where the iteration's time goes, on the stage that ends last.
struct StepBreakdown {
  double compute_s = 0;     ///< busy time minus TP exposure
  double tp_exposed_s = 0;  ///< TP communication not hidden (and overlap overheads)
  double bubble_s = 0;      ///< idle time in the pipeline schedule (sends included)
  double dp_exposed_s = 0;  ///< DP collectives not hidden
  double optimizer_s = 0;
  /// Context parallelism's key/value exchange not hidden under attention (in compute_s's
  /// passes, counted apart like tp_exposed_s).
  double cp_exposed_s = 0;
};

struct StepResult {
  Layout layout;
  plan::Config overlap = plan::Config::compass;
  double iteration_s = 0;
  double tokens_per_s_per_gpu = 0;
  double model_tflops_per_gpu = 0;     ///< model FLOPs (recomputation excluded) per second
  double hardware_tflops_per_gpu = 0;  ///< with recomputation
  double mfu = 0;                      ///< model FLOP/s over the dense peak of the GEMMs' dtype
  int critical_stage = 0;
  StepBreakdown breakdown;
  MemoryReport memory;
  PipelineSpec pipeline;            ///< the schedule's inputs (replayable)
  std::vector<double> stage_end_s;  ///< per stage, the pipeline part only
};

/// Prices one iteration of `l` with the layer plan `lp` (planned for l.tp, the rank's sequence
/// share l.local_seq() with l.cp, l.micro_batch, SP and dtype) under overlap `c`. The memory report
/// is filled; a layout that does not fit is still priced (the caller decides). Errors: the layout's
/// own checks (layout.hpp), TP larger than a node, more GPUs than the cluster has, a plan for
/// another shape.
Result<StepResult> price_step(const Cluster& cluster, JobComm& comm, const workload::ModelConfig& m,
                              const Layout& l, const plan::LayerPlan& lp, plan::Config c,
                              const StepOptions& o = {});
/// The same, taking the pipeline's task list from `pipelines` (the search keeps one across the
/// layouts it prices: the same result, without building a list of the same shape again).
Result<StepResult> price_step(const Cluster& cluster, JobComm& comm, const workload::ModelConfig& m,
                              const Layout& l, const plan::LayerPlan& lp, plan::Config c,
                              const StepOptions& o, PipelineCache& pipelines);

/// What of a layout decides its layer plan (plan_for): TP, sequence, CP, micro-batch, sequence
/// parallel (with TP > 1) and FP8. Layouts with equal keys share one plan.
using LayerPlanKey = std::tuple<int, std::int64_t, int, int, bool, bool>;
LayerPlanKey layer_plan_key(const Layout& l);

/// The layer plan a layout needs (plans with FP8 when l.fp8): what the step reads, so each
/// operator's megatron and te estimates carry their breakdowns, the chosen one its compute, and
/// the strategies not chosen their totals alone (plan::plan_layer with
/// model::Breakdown::compute).
Result<plan::LayerPlan> plan_for(const Cluster& cluster, const workload::ModelConfig& m,
                                 const Layout& l);
/// The same through `planner` (a planner of cluster.node), which keeps its communication plans
/// and caches for the next layout's plan.
Result<plan::LayerPlan> plan_for(plan::LayerPlanner& planner, const Cluster& cluster,
                                 const workload::ModelConfig& m, const Layout& l);

}  // namespace compass::job
