#pragma once
// The TP operators of one transformer layer, and the paper's 288-configuration grid.

#include <cstdint>
#include <vector>

#include "compass/workload/model_config.hpp"
#include "compass/workload/operator.hpp"

namespace compass::workload {

struct ParallelConfig {
  int tp = 1;
  /// This rank's tokens of each sequence: the whole sequence over the context-parallel size.
  std::int64_t seq = 2048;
  std::int64_t micro_batch = 1;
  bool sequence_parallel = true;
  DType dtype = DType::bf16;
  /// Context-parallel ranks sharing each sequence (Megatron-LM's --context-parallel-size): the
  /// TP operators hold `seq` tokens, and attention reads the keys of all cp shares.
  int cp = 1;
};

/// Whether the operator runs in the forward or the backward pass.
enum class Pass { forward, backward };

struct LayerOp {
  OperatorSpec op;
  Pass pass = Pass::forward;
};

/// The TP operators of one layer, forward then backward, with roles (qkv_fprop, proj_fprop,
/// fc1_fprop, fc2_fprop, *_dgrad, *_wgrad). Errors on shapes not divisible by tp.
Result<std::vector<LayerOp>> layer_operators(const ModelConfig& m, const ParallelConfig& pc);

/// Context parallelism: Megatron-LM splits each sequence into 2 x cp equal chunks (two per
/// rank, for the causal balance). An error naming the sequence and 2 x cp where `seq` does not
/// divide into them; none for cp 1.
Status check_context_split(std::int64_t seq, int cp);

/// One row of the paper grid.
struct GridEntry {
  std::string model;   ///< model name
  std::string layer;   ///< "qkv", "fc1", "proj", "fc2"
  OperatorSpec op;
};

/// The paper's 288 configurations (docs/workload.md), in a fixed order.
std::vector<GridEntry> paper_grid();

}  // namespace compass::workload
