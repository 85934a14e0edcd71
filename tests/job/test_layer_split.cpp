// How the layers are split over the virtual stages, and what the step and the launch make of
// an uneven interleaved split.
#include <gtest/gtest.h>

#include <numeric>

#include "compass/job/cluster.hpp"
#include "compass/job/comm.hpp"
#include "compass/job/memory.hpp"
#include "compass/job/search.hpp"
#include "compass/job/step.hpp"
#include "support/job_builders.hpp"

namespace compass::job {
namespace {

int sum(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 0);
}

TEST(LayerSplit, EvenWhenPpTimesVppDivides) {
  const std::optional<LayerSplit> s = split_layers(32, 4, 2);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rule, SplitRule::even);
  EXPECT_EQ(s->layers, std::vector<int>(8, 4));
}

TEST(LayerSplit, WithoutInterleavingTheFirstAndLastStageTakeTheRest) {
  const std::optional<LayerSplit> s = split_layers(126, 16, 1);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rule, SplitRule::first_last);
  ASSERT_EQ(s->layers.size(), 16u);
  EXPECT_EQ(s->layers.front(), 7);
  EXPECT_EQ(s->layers.back(), 7);
  for (std::size_t i = 1; i + 1 < s->layers.size(); ++i) EXPECT_EQ(s->layers[i], 8) << i;
  EXPECT_EQ(sum(s->layers), 126);
  // 30 on 4: middle stages ceil(30 / 4) = 8, the first and last split the 14 left.
  EXPECT_EQ(layers_per_virtual_stage(30, 4, 1), (std::vector<int>{7, 8, 8, 7}));
}

TEST(LayerSplit, InterleavedCountsTheEmbeddingAndTheLossAsLayers) {
  // Llama3.1-405B on PP 8 x VPP 8: (126 + 2) / 64 = 2 per chunk, one in the first and the last.
  const std::optional<LayerSplit> s = split_layers(126, 8, 8);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->rule, SplitRule::embedding_and_loss);
  ASSERT_EQ(s->layers.size(), 64u);
  EXPECT_EQ(s->layers.front(), 1);
  EXPECT_EQ(s->layers.back(), 1);
  for (std::size_t i = 1; i + 1 < s->layers.size(); ++i) EXPECT_EQ(s->layers[i], 2) << i;
  EXPECT_EQ(sum(s->layers), 126);
  EXPECT_EQ(layers_per_virtual_stage(40, 2, 3), (std::vector<int>{6, 7, 7, 7, 7, 6}));
}

TEST(LayerSplit, NoneWhereNoRuleApplies) {
  EXPECT_FALSE(split_layers(41, 2, 3));  // 41 and 43 are not multiples of 6
  EXPECT_FALSE(split_layers(5, 4, 1));   // middle stages of 2 leave the first and last one
  EXPECT_FALSE(split_layers(4, 2, 3));   // (4 + 2) / 6 = 1: the first chunk would hold none
  EXPECT_FALSE(split_layers(0, 1, 1));
  EXPECT_TRUE(layers_per_virtual_stage(41, 2, 3).empty());
}

Layout interleaved_13b() {
  Layout l = compass::testing::layout_of(2, 2, 2, 32, 4096);
  l.vpp = 3;
  return l;
}

TEST(LayerSplit, TheLayoutCheckNamesBothCounts) {
  const workload::ModelConfig m7 = workload::resolve_model("llama2-7b").value();
  const Status st = check(interleaved_13b(), m7);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message,
            "interleaved schedule: PP 2 x virtual stages 3 divides neither the 32 layers of "
            "llama2-7b nor the 34 that count the embedding and the loss as layers");
  const workload::ModelConfig m13 = workload::resolve_model("llama2-13b").value();
  EXPECT_TRUE(check(interleaved_13b(), m13).ok());
}

TEST(LayerSplit, TheStepMemoryAndLaunchFollowTheUnevenChunks) {
  const workload::ModelConfig m = workload::resolve_model("llama2-13b").value();
  const Cluster cl = builtin_cluster("dgx-h100").value();
  const Layout l = interleaved_13b();
  const Result<plan::LayerPlan> lp = plan_for(cl, m, l);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  JobComm comm(cl);
  const Result<StepResult> r = price_step(cl, comm, m, l, *lp, plan::Config::compass);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Chunks of 6, 7, 7, 7, 7, 6 layers: the middle ones equal, the first one layer short (its
  // embedding lookup costs less than a layer).
  const std::vector<double>& f = r->pipeline.forward_s;
  ASSERT_EQ(f.size(), 6u);
  EXPECT_DOUBLE_EQ(f[1], f[2]);
  EXPECT_DOUBLE_EQ(f[1], f[4]);
  EXPECT_LT(f[0], f[1]);
  // Stage 0 holds chunks 0, 2 and 4 (20 layers) and the embedding; stage 1 chunks 1, 3 and 5
  // (20 layers) and the LM head.
  const ParamCounts pc = param_counts(m);
  const MemoryOptions mo;
  ASSERT_EQ(r->memory.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(r->memory.stages[0].weights_bytes,
                   (20 * pc.per_layer + pc.embedding) / l.tp * mo.weight_bytes);
  EXPECT_DOUBLE_EQ(r->memory.stages[1].weights_bytes,
                   (20 * pc.per_layer + pc.lm_head) / l.tp * mo.weight_bytes);
  // Megatron-LM builds this split from the middle chunks' count and the two flags.
  std::string all;
  for (const std::string& a : megatron_args(l, m.layers, plan::Config::megatron)) all += a + " ";
  EXPECT_NE(all.find("--num-layers-per-virtual-pipeline-stage 7 "
                     "--account-for-embedding-in-pipeline-split "
                     "--account-for-loss-in-pipeline-split "),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("--decoder-first-pipeline-num-layers"), std::string::npos) << all;
}

}  // namespace
}  // namespace compass::job
