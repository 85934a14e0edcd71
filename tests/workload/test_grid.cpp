#include <gtest/gtest.h>

#include <map>
#include <set>

#include "compass/workload/layer_ops.hpp"

namespace compass::workload {
namespace {

TEST(PaperGrid, Has288ValidEntries) {
  const auto grid = paper_grid();
  ASSERT_EQ(grid.size(), 288u);
  for (const auto& e : grid) {
    const Status s = validate(e.op);
    EXPECT_TRUE(s.ok()) << e.model << " " << e.layer << " " << describe(e.op) << ": "
                        << (s.ok() ? "" : s.error().message);
    EXPECT_EQ(e.op.dtype, DType::bf16);
    EXPECT_EQ(e.op.role, e.layer + "_fprop");
  }
}

TEST(PaperGrid, CountsPerKindModelLayerTpAndTokens) {
  std::map<OpKind, int> kinds;
  std::map<std::string, int> models, layers;
  std::map<int, int> tps;
  std::map<std::int64_t, int> tokens;
  std::set<std::tuple<std::string, std::string, int, std::int64_t>> unique;
  for (const auto& e : paper_grid()) {
    ++kinds[e.op.kind];
    ++models[e.model];
    ++layers[e.layer];
    ++tps[e.op.tp];
    ++tokens[e.op.m];
    unique.emplace(e.model, e.layer, e.op.tp, e.op.m);
  }
  EXPECT_EQ(unique.size(), 288u);
  EXPECT_EQ(kinds[OpKind::ag_gemm], 144);
  EXPECT_EQ(kinds[OpKind::gemm_rs], 144);
  EXPECT_EQ(kinds.count(OpKind::gemm_ar), 0u);
  EXPECT_EQ(models.size(), 6u);
  for (const auto& [name, n] : models) EXPECT_EQ(n, 48) << name;
  EXPECT_EQ(layers.size(), 4u);
  for (const auto& [name, n] : layers) EXPECT_EQ(n, 72) << name;
  EXPECT_EQ(tps, (std::map<int, int>{{2, 96}, {4, 96}, {8, 96}}));
  EXPECT_EQ(tokens, (std::map<std::int64_t, int>{{2048, 72}, {4096, 72}, {8192, 72}, {16384, 72}}));
}

TEST(PaperGrid, FixedOrder) {
  const auto grid = paper_grid();
  // model, then layer (qkv, fc1, proj, fc2), then tp (2, 4, 8), then tokens.
  EXPECT_EQ(grid[0].model, "gpt3-2.7b");
  EXPECT_EQ(grid[0].layer, "qkv");
  EXPECT_EQ(grid[0].op.tp, 2);
  EXPECT_EQ(grid[0].op.m, 2048);
  EXPECT_EQ(grid[1].op.m, 4096);
  EXPECT_EQ(grid[4].op.tp, 4);
  EXPECT_EQ(grid[12].layer, "fc1");
  EXPECT_EQ(grid[24].layer, "proj");
  EXPECT_EQ(grid[36].layer, "fc2");
  EXPECT_EQ(grid[48].model, "gpt3-6.7b");
  EXPECT_EQ(grid[240].model, "llama2-70b");
  EXPECT_EQ(grid[287].model, "llama2-70b");
  EXPECT_EQ(grid[287].layer, "fc2");
  EXPECT_EQ(grid[287].op.tp, 8);
  EXPECT_EQ(grid[287].op.m, 16384);
}

TEST(PaperGrid, SpotChecks) {
  const auto grid = paper_grid();
  auto find = [&](const std::string& model, const std::string& layer, int tp, std::int64_t m) {
    for (const auto& e : grid) {
      if (e.model == model && e.layer == layer && e.op.tp == tp && e.op.m == m) return e.op;
    }
    ADD_FAILURE() << "missing " << model << " " << layer;
    return OperatorSpec{};
  };
  // GPT-3 2.7B QKV: N = 3h.
  OperatorSpec o = find("gpt3-2.7b", "qkv", 2, 2048);
  EXPECT_EQ(o.kind, OpKind::ag_gemm);
  EXPECT_EQ(o.k, 2560);
  EXPECT_EQ(o.n, 7680);
  // Llama-2 70B QKV with GQA: h + 2 * 8 * 128.
  o = find("llama2-70b", "qkv", 8, 16384);
  EXPECT_EQ(o.n, 10240);
  EXPECT_EQ(o.k, 8192);
  // SwiGLU FC1 carries gate and up: N = 2f.
  o = find("llama2-7b", "fc1", 4, 4096);
  EXPECT_EQ(o.kind, OpKind::ag_gemm);
  EXPECT_EQ(o.n, 22016);
  o = find("gpt3-13b", "fc1", 4, 4096);
  EXPECT_EQ(o.n, 20480);
  // FC2: K = f (not 2f), N = h; llama2-7b at tp=8 gives K/p = 1376.
  o = find("llama2-7b", "fc2", 8, 8192);
  EXPECT_EQ(o.kind, OpKind::gemm_rs);
  EXPECT_EQ(o.k, 11008);
  EXPECT_EQ(o.n, 4096);
  EXPECT_EQ(rank_shapes(o).gemm_k, 1376);
  EXPECT_EQ(rank_shapes(o).y_rows, 1024);
  // Projection: K = N = h.
  o = find("llama2-13b", "proj", 2, 2048);
  EXPECT_EQ(o.kind, OpKind::gemm_rs);
  EXPECT_EQ(o.k, 5120);
  EXPECT_EQ(o.n, 5120);
}

TEST(PaperGrid, MatchesForwardLayerOperators) {
  // The grid rows are exactly the SP forward operators of layer_operators.
  for (const auto& e : paper_grid()) {
    const auto ops = layer_operators(*resolve_model(e.model),
                                     ParallelConfig{e.op.tp, e.op.m, 1, true, DType::bf16});
    ASSERT_TRUE(ops.ok()) << ops.error().message;
    bool found = false;
    for (const auto& lo : *ops) found = found || lo.op == e.op;
    EXPECT_TRUE(found) << e.model << " " << describe(e.op);
  }
}

}  // namespace
}  // namespace compass::workload

namespace compass::workload {
namespace {

// The per-(model, layer) shapes printed in docs/workload.md; this test keeps them honest.
TEST(PaperGrid, ShapeTableOfTheDocs) {
  struct Row {
    const char* model;
    std::int64_t qkv_n, fc1_n, h, f;
  };
  const Row rows[] = {
      {"gpt3-2.7b", 7680, 10240, 2560, 10240},   {"gpt3-6.7b", 12288, 16384, 4096, 16384},
      {"gpt3-13b", 15360, 20480, 5120, 20480},   {"llama2-7b", 12288, 22016, 4096, 11008},
      {"llama2-13b", 15360, 27648, 5120, 13824}, {"llama2-70b", 10240, 57344, 8192, 28672},
  };
  const auto grid = paper_grid();
  for (const Row& r : rows) {
    int seen = 0;
    for (const auto& e : grid) {
      if (e.model != r.model) continue;
      ++seen;
      if (e.layer == "qkv") {
        EXPECT_EQ(e.op.k, r.h);
        EXPECT_EQ(e.op.n, r.qkv_n);
      } else if (e.layer == "fc1") {
        EXPECT_EQ(e.op.k, r.h);
        EXPECT_EQ(e.op.n, r.fc1_n);
      } else if (e.layer == "proj") {
        EXPECT_EQ(e.op.k, r.h);
        EXPECT_EQ(e.op.n, r.h);
      } else {
        EXPECT_EQ(e.op.k, r.f);
        EXPECT_EQ(e.op.n, r.h);
      }
    }
    EXPECT_EQ(seen, 48) << r.model;
  }
}

}  // namespace
}  // namespace compass::workload
