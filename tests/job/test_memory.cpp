// Memory formulas on a tiny model, worked out by hand.
#include <gtest/gtest.h>

#include "compass/job/flops.hpp"
#include "compass/job/memory.hpp"

namespace compass::job {
namespace {

workload::ModelConfig tiny() {
  workload::ModelConfig m;
  m.name = "tiny";
  m.hidden = 64;
  m.ffn = 256;
  m.heads = 4;
  m.kv_heads = 4;
  m.layers = 4;
  m.vocab = 100;
  return m;
}

Layout tiny_layout() {
  Layout l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 4;
  l.micro_batch = 2;
  l.global_batch = 16;  // 2 micro-batches per pipeline
  l.seq = 32;
  l.sequence_parallel = true;
  return l;
}

TEST(Memory, ParameterCounts) {
  // QKV 64 x 192, proj 64 x 64, FC1 64 x 256, FC2 256 x 64, two norms of 64.
  const ParamCounts c = param_counts(tiny());
  EXPECT_DOUBLE_EQ(c.per_layer, 12288 + 4096 + 16384 + 16384 + 128);
  EXPECT_DOUBLE_EQ(c.embedding, 6400);
  EXPECT_DOUBLE_EQ(c.lm_head, 6400 + 64);
}

TEST(Memory, KorthikantiActivationsPerLayer) {
  const workload::ModelConfig m = tiny();
  Layout l = tiny_layout();
  // s b h = 32 * 2 * 64 = 4096; 5 a s / h = 5 * 4 * 32 / 64 = 10.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, false), 4096.0 / 2 * (34 + 10));  // TP + SP
  l.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, false), 4096.0 * (10 + 24.0 / 2 + 10.0 / 2));
  l.recompute = Recompute::selective;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, false), 4096.0 * (10 + 24.0 / 2));
  l.sequence_parallel = true;
  l.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, false), 2 * 4096.0 / 2);
  l.tp = 1;
  l.sequence_parallel = false;
  l.recompute = Recompute::none;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, false), 4096.0 * 44);
  // FlashAttention never stores the scores: 34 sbh.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, true), 4096.0 * 34);
}

TEST(Memory, Fp8KeepsTheGemmInputsInOneByte) {
  const workload::ModelConfig m = tiny();
  Layout l = tiny_layout();
  l.fp8 = true;
  // s b h = 4096: 29 sbh/t with TP + SP (QKV and FC1 inputs 1 byte each, the FC2 input 4, an
  // FP8 copy of the attention output beside the BF16 one), 8 + 21/t without SP, 29 on one rank.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, true), 4096.0 / 2 * 29);
  l.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, true), 4096.0 * (8 + 21.0 / 2));
  l.tp = 1;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, true), 4096.0 * 29);
  // Full recomputation keeps the layer input in BF16 either way.
  l.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, l, true), 2 * 4096.0);
}

TEST(Memory, StagesWithDistributedOptimizer) {
  const workload::ModelConfig m = tiny();
  MemoryOptions o;
  o.fixed_allowance_bytes = 0;
  o.fragmentation = 0;
  o.flash_attention = false;
  const MemoryReport r = memory_per_gpu(m, tiny_layout(), plan::Config::megatron, 1e9, o);
  ASSERT_EQ(r.stages.size(), 2u);
  // Stage 0: 2 layers + embedding over TP 2 = (2 * 49280 + 6400) / 2 = 52480 parameters.
  const StageMemory& s0 = r.stages[0];
  EXPECT_DOUBLE_EQ(s0.weights_bytes, 52480 * 2);
  EXPECT_DOUBLE_EQ(s0.grads_bytes, 52480 * 4);
  EXPECT_DOUBLE_EQ(s0.optimizer_bytes, 52480 * 12 / 4.0);
  // 1F1B: stage 0 holds min(pp, m) = 2 micro-batches of 2 layers of 90112 bytes.
  EXPECT_EQ(s0.microbatches_in_flight, 2);
  EXPECT_DOUBLE_EQ(s0.activations_bytes, 2 * 2 * 90112.0);
  // Stage 1 holds one micro-batch, plus the logits (s b V / t * 6 bytes).
  const StageMemory& s1 = r.stages[1];
  EXPECT_EQ(s1.microbatches_in_flight, 1);
  EXPECT_DOUBLE_EQ(s1.activations_bytes, 2 * 90112.0 + 32 * 2 * 100 / 2.0 * 6);
  EXPECT_DOUBLE_EQ(s1.comm_buffers_bytes, 0);
  // TP overlap keeps three gathered activations.
  const MemoryReport te = memory_per_gpu(m, tiny_layout(), plan::Config::te_default, 1e9, o);
  EXPECT_DOUBLE_EQ(te.stages[1].comm_buffers_bytes, 3 * 4096.0 * 2);
  // Without sequence parallelism TE's overlap is off (Megatron-LM refuses it): no buffers.
  Layout no_sp = tiny_layout();
  no_sp.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(
      memory_per_gpu(m, no_sp, plan::Config::te_default, 1e9, o).stages[1].comm_buffers_bytes, 0);
}

TEST(Memory, InterleavingHoldsMoreOnTheFirstStage) {
  const workload::ModelConfig m = tiny();
  Layout l = tiny_layout();
  l.vpp = 2;
  MemoryOptions o;
  o.fixed_allowance_bytes = 0;
  o.fragmentation = 0;
  o.flash_attention = false;
  const MemoryReport r = memory_per_gpu(m, l, plan::Config::megatron, 1e9, o);
  // Warm-up (p - 1) * 2 + (v - 1) * p = 4, plus one, capped at m * v = 4 chunk-micro-batches of
  // one layer each.
  EXPECT_EQ(r.stages[0].microbatches_in_flight, 4);
  EXPECT_DOUBLE_EQ(r.stages[0].activations_bytes, 4 * 90112.0);
}

TEST(Memory, NotFittingReportsTheAmountOver) {
  const MemoryReport r = memory_per_gpu(tiny(), tiny_layout(), plan::Config::megatron, 1e6);
  EXPECT_FALSE(r.fits());
  EXPECT_DOUBLE_EQ(r.over_bytes(), r.peak_bytes - 1e6);
}

TEST(Flops, NarayananFormulaForAGptShape) {
  // 72 B s l h^2 (1 + s / 6h + V / 12 l h) per B s tokens.
  workload::ModelConfig m = tiny();
  m.ffn = 4 * m.hidden;
  const double h = 64, l = 4, s = 32, V = 100;
  EXPECT_DOUBLE_EQ(model_flops_per_token(m, 32),
                   72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)));
  EXPECT_GT(hardware_flops_per_token(m, 32, Recompute::full), model_flops_per_token(m, 32));
}

}  // namespace
}  // namespace compass::job
