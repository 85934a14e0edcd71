#pragma once
// Memory per GPU for a layout, stage by stage: weights, gradients, optimizer states, activations
// (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"),
// communication buffers of the TP overlap, and an allowance for workspace and fragmentation.
// Formulas and assumptions: docs/job.md, "Memory".

#include <vector>

#include "compass/job/layout.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::job {

/// Parameters of the model's parts (biases left out).
struct ParamCounts {
  double per_layer = 0;  ///< QKV, proj, FC1, FC2 weights and the two norms
  double embedding = 0;  ///< vocab x hidden
  double lm_head = 0;    ///< vocab x hidden (untied) plus the final norm
  double total(int layers) const { return per_layer * layers + embedding + lm_head; }
};
ParamCounts param_counts(const workload::ModelConfig& m);

/// Bytes per parameter and the allowance; defaults: bf16 weights, fp32 gradients, fp32 master
/// weights and Adam moments (18 bytes per parameter, Megatron-LM's distributed optimizer
/// notes), 2 GiB + 5% for CUDA context, library workspaces and fragmentation (assumed).
struct MemoryOptions {
  double weight_bytes = 2;
  double grad_bytes = 4;
  double optimizer_bytes = 12;  ///< sharded over DP by the distributed optimizer
  double fixed_allowance_bytes = 2.0 * (1 << 30);
  double fragmentation = 0.05;  ///< of everything else
  /// FlashAttention (what the step model prices): the s x s attention scores, softmax and its
  /// dropout mask (Korthikanti's 5as/h term) are never stored, with or without recomputation.
  bool flash_attention = true;
};

/// One pipeline stage's memory on one GPU.
struct StageMemory {
  double weights_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double comm_buffers_bytes = 0;
  double allowance_bytes = 0;
  int microbatches_in_flight = 0;  ///< (chunk-)micro-batches whose activations are held
  double total_bytes() const {
    return weights_bytes + grads_bytes + optimizer_bytes + activations_bytes + comm_buffers_bytes +
           allowance_bytes;
  }
};

struct MemoryReport {
  std::vector<StageMemory> stages;
  int peak_stage = 0;
  double peak_bytes = 0;
  double capacity_bytes = 0;
  bool fits() const { return peak_bytes <= capacity_bytes; }
  double over_bytes() const { return peak_bytes - capacity_bytes; }
};

/// Activation bytes of one layer for one micro-batch on one GPU (Korthikanti et al.):
/// sbh(34 + 5as/h) without TP; sbh(10 + 24/t + 5as/(ht)) with TP; sbh/t(34 + 5as/h) with TP and
/// SP; selective recomputation drops the 5as/h term; full recomputation keeps the layer input,
/// 2sbh (/t with SP). `flash_attention` drops the 5as/h term in every case.
double layer_activation_bytes(const workload::ModelConfig& m, const Layout& l,
                              bool flash_attention);

/// The memory of every stage of `l`, under TP overlap `overlap`, against `capacity_bytes`.
MemoryReport memory_per_gpu(const workload::ModelConfig& m, const Layout& l, plan::Config overlap,
                            double capacity_bytes, const MemoryOptions& o = {});

}  // namespace compass::job
