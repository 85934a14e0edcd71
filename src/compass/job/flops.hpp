#pragma once
// Training FLOPs per token as the usual transformer formula counts them (Narayanan et al.,
// "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"):
// forward + backward = 3 x forward; forward = 2 x (layer matmul weights) per layer, plus
// 4 s h per layer for the attention scores and values, plus 2 V h for the LM head.

#include <cstdint>

#include "compass/job/layout.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::job {

/// Model FLOPs per token of one training step (recomputation excluded).
double model_flops_per_token(const workload::ModelConfig& m, std::int64_t seq);
/// The FLOPs the GPUs execute per token: model FLOPs plus the recomputed forward (full: every
/// layer's forward; selective: the attention scores and values).
double hardware_flops_per_token(const workload::ModelConfig& m, std::int64_t seq, Recompute r);

}  // namespace compass::job
