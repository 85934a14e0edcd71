#include <gtest/gtest.h>

#include <map>

#include "compass/workload/layer_ops.hpp"

namespace compass::workload {
namespace {

std::map<std::string, LayerOp> by_role(const std::vector<LayerOp>& ops) {
  std::map<std::string, LayerOp> out;
  for (const auto& o : ops) {
    EXPECT_TRUE(out.emplace(o.op.role, o).second) << "duplicate role " << o.op.role;
  }
  return out;
}

void expect_op(const LayerOp& lo, OpKind kind, std::int64_t m, std::int64_t n, std::int64_t k,
               Pass pass) {
  EXPECT_EQ(lo.op.kind, kind) << lo.op.role;
  EXPECT_EQ(lo.op.m, m) << lo.op.role;
  EXPECT_EQ(lo.op.n, n) << lo.op.role;
  EXPECT_EQ(lo.op.k, k) << lo.op.role;
  EXPECT_EQ(lo.pass, pass) << lo.op.role;
}

TEST(LayerOps, SequenceParallelLlama2_70b) {
  const ModelConfig m = *resolve_model("llama2-70b");
  ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  pc.micro_batch = 2;
  const auto r = layer_operators(m, pc);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 10u);
  const auto ops = by_role(*r);
  const std::int64_t M = 8192, h = 8192, f = 28672, qkv = 10240, fc1 = 2 * 28672;
  expect_op(ops.at("qkv_fprop"), OpKind::ag_gemm, M, qkv, h, Pass::forward);
  expect_op(ops.at("proj_fprop"), OpKind::gemm_rs, M, h, h, Pass::forward);
  expect_op(ops.at("fc1_fprop"), OpKind::ag_gemm, M, fc1, h, Pass::forward);
  expect_op(ops.at("fc2_fprop"), OpKind::gemm_rs, M, h, f, Pass::forward);
  expect_op(ops.at("qkv_dgrad"), OpKind::gemm_rs, M, h, qkv, Pass::backward);
  expect_op(ops.at("proj_dgrad"), OpKind::ag_gemm, M, h, h, Pass::backward);
  expect_op(ops.at("fc1_dgrad"), OpKind::gemm_rs, M, h, fc1, Pass::backward);
  expect_op(ops.at("fc2_dgrad"), OpKind::ag_gemm, M, f, h, Pass::backward);
  expect_op(ops.at("qkv_wgrad"), OpKind::ag_gemm, M, qkv, h, Pass::backward);
  expect_op(ops.at("fc1_wgrad"), OpKind::ag_gemm, M, fc1, h, Pass::backward);
  EXPECT_EQ(ops.count("proj_wgrad"), 0u);
  EXPECT_EQ(ops.count("fc2_wgrad"), 0u);
  for (const auto& lo : *r) {
    EXPECT_EQ(lo.op.tp, 8);
    EXPECT_EQ(lo.op.dtype, DType::bf16);
    EXPECT_TRUE(validate(lo.op).ok());
  }
}

TEST(LayerOps, ForwardComesBeforeBackward) {
  const auto r = layer_operators(*resolve_model("gpt3-2.7b"), ParallelConfig{});
  ASSERT_TRUE(r.ok());
  bool seen_backward = false;
  for (const auto& lo : *r) {
    if (lo.pass == Pass::backward) seen_backward = true;
    if (seen_backward) {
      EXPECT_EQ(lo.pass, Pass::backward) << lo.op.role;
      EXPECT_EQ(lo.op.role.find("fprop"), std::string::npos);
    }
  }
  EXPECT_EQ(r->front().op.role, "qkv_fprop");
}

TEST(LayerOps, DgradMirrorsFprop) {
  // The data gradient of a layer has the transposed weight: K and N swap, the kind flips.
  const auto r = layer_operators(*resolve_model("llama3-8b"), ParallelConfig{4, 2048, 1, true});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto ops = by_role(*r);
  for (const char* layer : {"qkv", "proj", "fc1", "fc2"}) {
    const auto& f = ops.at(std::string(layer) + "_fprop").op;
    const auto& d = ops.at(std::string(layer) + "_dgrad").op;
    EXPECT_EQ(f.n, d.k) << layer;
    EXPECT_EQ(f.k, d.n) << layer;
    EXPECT_NE(f.kind, d.kind) << layer;
    EXPECT_DOUBLE_EQ(total_flops(f), total_flops(d)) << layer;
  }
}

TEST(LayerOps, WithoutSequenceParallelism) {
  const ModelConfig m = *resolve_model("gpt3-6.7b");
  ParallelConfig pc;
  pc.tp = 4;
  pc.seq = 2047;  // tokens need not divide by tp without SP
  pc.sequence_parallel = false;
  const auto r = layer_operators(m, pc);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 4u);
  const auto ops = by_role(*r);
  expect_op(ops.at("proj_fprop"), OpKind::gemm_ar, 2047, 4096, 4096, Pass::forward);
  expect_op(ops.at("fc2_fprop"), OpKind::gemm_ar, 2047, 4096, 16384, Pass::forward);
  expect_op(ops.at("fc1_dgrad"), OpKind::gemm_ar, 2047, 4096, 16384, Pass::backward);
  expect_op(ops.at("qkv_dgrad"), OpKind::gemm_ar, 2047, 4096, 3 * 4096, Pass::backward);
  for (const auto& lo : *r) EXPECT_NE(lo.op.kind, OpKind::ag_gemm);
}

TEST(LayerOps, MicroBatchMultipliesTokens) {
  const auto r = layer_operators(*resolve_model("gpt3-13b"), ParallelConfig{8, 1024, 3, true});
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const auto& lo : *r) EXPECT_EQ(lo.op.m, 3072);
}

TEST(LayerOps, ErrorsNameModelAndDimension) {
  auto msg = [](const char* model, ParallelConfig pc) {
    const auto r = layer_operators(*resolve_model(model), pc);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.error().message;
  };
  std::string e = msg("gpt3-2.7b", ParallelConfig{3, 2048, 1, true});
  EXPECT_NE(e.find("gpt3-2.7b"), std::string::npos) << e;
  EXPECT_NE(e.find("not divisible by tp=3"), std::string::npos) << e;

  e = msg("llama2-70b", ParallelConfig{16, 4096, 1, true});  // 8 kv heads over 16 ranks
  EXPECT_NE(e.find("kv_heads=8"), std::string::npos) << e;

  e = msg("llama2-7b", ParallelConfig{8, 1001, 1, true});
  EXPECT_NE(e.find("llama2-7b"), std::string::npos) << e;
  EXPECT_NE(e.find("1001"), std::string::npos) << e;

  e = msg("llama2-7b", ParallelConfig{0, 1024, 1, true});
  EXPECT_NE(e.find("tp=0"), std::string::npos) << e;
  e = msg("llama2-7b", ParallelConfig{2, 0, 1, true});
  EXPECT_NE(e.find("seq=0"), std::string::npos) << e;
  e = msg("llama2-7b", ParallelConfig{2, 1024, -1, true});
  EXPECT_NE(e.find("micro_batch=-1"), std::string::npos) << e;
}

TEST(LayerOps, EveryBuiltinSplitsAtTp8) {
  for (const auto& m : builtin_models()) {
    const auto r = layer_operators(m, ParallelConfig{8, 4096, 1, true});
    EXPECT_TRUE(r.ok()) << m.name << ": " << (r.ok() ? "" : r.error().message);
  }
}

TEST(LayerOps, InvalidModelIsRejected) {
  ModelConfig m = *resolve_model("gpt3-2.7b");
  m.heads = 0;
  EXPECT_FALSE(layer_operators(m, ParallelConfig{}).ok());
}

}  // namespace
}  // namespace compass::workload
