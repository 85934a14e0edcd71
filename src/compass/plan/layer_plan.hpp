#pragma once
// The layer plan: every TP operator of one transformer layer (forward and backward) with all
// strategy estimates and Compass's choice, and the end-to-end iteration estimate for three
// configurations side by side: Megatron-LM (all sequential), TransformerEngine's defaults and
// Compass's choices. What the estimate covers and leaves out: docs/model.md, "End to end".

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/model/selector.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/layer_ops.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::plan {

/// FlashAttention throughput as a fraction of the large-GEMM rate (assumed; docs/model.md).
inline constexpr double kAttentionEfficiencyRatio = 0.7;
/// FlashAttention backward FLOPs over forward FLOPs (5 matmuls instead of 2).
inline constexpr double kAttentionBackwardRatio = 2.5;

/// The three configurations the end-to-end estimate compares.
enum class Config { megatron, te_default, compass };
std::string_view to_string(Config c);

/// TransformerEngine userbuffers' static default for an operator role:
/// ring exchange (fuse:ring on a rank-order ring) for qkv_fprop, fc1_fprop, proj_dgrad and
/// fc2_dgrad; pipeline with 4 splits for proj_fprop and fc2_fprop (the largest degree <= 4 that
/// divides the rows each rank owns); bulk (sequential) otherwise; sequential for every GEMM +
/// all-reduce (without sequence parallelism Megatron-LM does not turn TE's overlap on).
schedule::Strategy te_default_strategy(const workload::OperatorSpec& op);

/// `topo` with its ring replaced by rank order (TE's one-way ring) and ring2 by its reverse.
schedule::CommPlan rank_order_plan(const schedule::CommPlan& topo);

/// One TP operator of the layer under the three configurations.
struct PlannedOp {
  workload::LayerOp layer_op;
  model::OperatorChoice choice;  ///< every strategy on the topology-aware plan; the Compass pick
  model::Estimate megatron;      ///< sequential
  model::Estimate te;            ///< te_default_strategy on the rank-order plan
  const model::Estimate& compass() const { return choice.choice(); }
};

/// Per-rank time of the layer's work outside the TP operators.
struct OtherWork {
  double attention_fwd_s = 0;   ///< FlashAttention core (causal), forward
  double attention_bwd_s = 0;
  double elementwise_fwd_s = 0; ///< norms, residual adds, activation (memory bound)
  double elementwise_bwd_s = 0;
  double plain_gemm_fwd_s = 0;  ///< layer GEMMs with no TP collective (e.g. no-SP column fprop)
  double plain_gemm_bwd_s = 0;  ///< e.g. proj/fc2 weight gradients
  double total_s() const {
    return attention_fwd_s + attention_bwd_s + elementwise_fwd_s + elementwise_bwd_s +
           plain_gemm_fwd_s + plain_gemm_bwd_s;
  }
};

/// One configuration's iteration estimate.
struct IterationEstimate {
  double tp_ops_s = 0;    ///< the layer's TP operators, forward + backward
  double layer_s = 0;     ///< tp_ops_s + OtherWork::total_s()
  double total_s = 0;     ///< layers * layer_s + LM head
};

struct LayerPlan {
  std::string profile;
  workload::ModelConfig model;
  workload::ParallelConfig parallel;
  schedule::CommPlan plan;      ///< topology-aware (Megatron's NCCL and Compass use it)
  schedule::CommPlan te_plan;   ///< rank-order rings (TransformerEngine)
  std::vector<PlannedOp> ops;
  OtherWork other;
  double lm_head_s = 0;         ///< vocab-parallel output layer: forward + 2 backward GEMMs
  IterationEstimate megatron, te, compass;
  /// What the iteration estimate leaves out, one item per entry.
  static std::vector<std::string> left_out();
};

/// Called on every operator's choice right after the model made it, with the plan the operator
/// runs on; it may move choice.chosen (e.g. study::refine_choice simulates close candidates).
/// An error stops the plan.
using ChoiceRefiner = std::function<Status(model::OperatorChoice&, const schedule::CommPlan&)>;

/// Plans one layer of `model` with `parallel` on the TP group `gpus` of `p` (GPUs 0..tp-1 when
/// empty), passing every choice through `refine` when given. `breakdown` says which of every
/// operator's choice.estimates carry their breakdown: all of them (Breakdown::all); or only the
/// chosen one, its compute and communication alone without the split of the rest, and the
/// reason (Breakdown::chosen), or its compute alone and no reason (Breakdown::compute); the
/// others then carry total_s alone, and a choice `refine` moves is estimated so again. Every
/// total, choice, the chosen estimate's compute (and under `chosen` its communication and the
/// reason), and the megatron and te estimates are the same bits under all three. Errors: TP larger
/// than the machine, a group whose size is not tp or that names a GPU the machine lacks, shapes not
/// divisible by tp (from workload::layer_operators), an error of `refine`.
Result<LayerPlan> plan_layer(const hardware::Profile& p, const workload::ModelConfig& model,
                             const workload::ParallelConfig& parallel,
                             const std::vector<int>& gpus = {}, const ChoiceRefiner& refine = {},
                             model::Breakdown breakdown = model::Breakdown::all);

/// Plans layers of many shapes on one machine (the layout search plans one per TP size,
/// sequence, micro-batch, SP and dtype), keeping what one plan makes that the next can use:
/// each TP group's communication plan and the model's caches. plan() equals plan_layer() with
/// the same arguments, bit for bit. Not thread-safe.
class LayerPlanner {
 public:
  /// Plans on `p`, which must outlive the planner.
  explicit LayerPlanner(const hardware::Profile& p);
  Result<LayerPlan> plan(const workload::ModelConfig& model,
                         const workload::ParallelConfig& parallel,
                         const std::vector<int>& gpus = {}, const ChoiceRefiner& refine = {},
                         model::Breakdown breakdown = model::Breakdown::all);

 private:
  const hardware::Profile& profile_;
  model::Caches caches_;
  std::map<std::vector<int>, schedule::CommPlan> comm_plans_;  // by TP group
};

}  // namespace compass::plan
