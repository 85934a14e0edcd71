// The job on SimGrid: a two-stage pipeline checked by hand, and the step model held to it.
#include <gtest/gtest.h>

#include <cmath>

#include "compass/backends/sim/job_sim.hpp"
#include "compass/job/comm.hpp"
#include "compass/job/step.hpp"
#include "compass/model/comm_model.hpp"
#include "support/job_builders.hpp"

namespace compass::backends::sim {
namespace {

struct Priced {
  job::Cluster cluster;
  workload::ModelConfig model;
  job::StepResult step;
};

Priced price(const std::string& cluster, const job::Layout& l,
             const std::string& model = "llama2-7b") {
  Priced p;
  compass::testing::BuiltinJob j = compass::testing::builtin_job(cluster, model);
  p.cluster = std::move(j.cluster);
  p.model = std::move(j.model);
  job::JobComm comm(p.cluster);
  Result<plan::LayerPlan> lp = job::plan_for(p.cluster, p.model, l);
  EXPECT_TRUE(lp.ok()) << lp.error().message;
  Result<job::StepResult> r =
      job::price_step(p.cluster, comm, p.model, l, *lp, plan::Config::compass);
  EXPECT_TRUE(r.ok()) << r.error().message;
  p.step = *r;
  return p;
}

TEST(JobSim, TwoStagesFourMicrobatchesByHand) {
  // TP 1, two stages on GPUs 0 and 1 of one DGX H100, four micro-batches, no DP. With forward 1 ms,
  // backward 2 ms and a send of c seconds (c < 1 ms), following 1F1B by hand: stage 1 ends its
  // last backward at 13 ms + 3c, stage 0 at 15 ms + 4c ((m + p - 1)(f + b) plus four sends on
  // the critical path).
  job::Layout l;
  l.pp = 2;
  l.global_batch = 4;
  l.seq = 2048;
  Priced p = price("dgx-h100", l);
  p.step.pipeline.forward_s = {1e-3, 1e-3};
  p.step.pipeline.backward_s = {2e-3, 2e-3};
  const double bytes = 2048.0 * p.model.hidden * 2;
  const double c = model::transfer_time_s(p.cluster.node, 0, 1, bytes);
  ASSERT_GT(c, 0);
  ASSERT_LT(c, 1e-3);
  Result<JobSimResult> r = simulate_job(p.cluster, p.model, p.step);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(r->stage_end_s[1], 13e-3 + 3 * c, 1e-8);
  EXPECT_NEAR(r->stage_end_s[0], 15e-3 + 4 * c, 1e-8);
  EXPECT_EQ(r->flows, 2 * 4);                    // one activation and one gradient per micro-batch
  EXPECT_GT(r->iteration_s, r->stage_end_s[0]);  // the optimizer step follows
}

TEST(JobSim, ModelAgreesOnAFewLayouts) {
  struct Case {
    const char* cluster;
    int tp, pp, vpp, dp, gb;
  };
  for (const Case& k : {Case{"dgx-h100", 2, 2, 1, 4, 64}, Case{"dgx-h100", 4, 4, 2, 2, 64},
                        Case{"dgx-a100", 8, 2, 1, 2, 32}, Case{"a6000x8-2nic", 2, 4, 1, 2, 32}}) {
    job::Layout l;
    l.tp = k.tp;
    l.pp = k.pp;
    l.vpp = k.vpp;
    l.dp = k.dp;
    l.global_batch = k.gb;
    l.seq = 2048;
    l.sequence_parallel = k.tp > 1;
    Priced p = price(k.cluster, l);
    Result<JobSimResult> r = simulate_job(p.cluster, p.model, p.step);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const double err = std::abs(p.step.iteration_s - r->iteration_s) / r->iteration_s;
    // The target for the mean error, here on each layout.
    EXPECT_LT(err, 0.03) << k.cluster << " " << job::describe(l);
  }
}

TEST(JobSim, UnevenInterleavedChunksAgreeWithTheModel) {
  // llama2-13b's 40 layers on PP 2 x VPP 3: chunks of 6, 7, 7, 7, 7, 6 layers (the embedding and
  // the loss counted as layers, job::split_layers).
  job::Layout l = compass::testing::layout_of(2, 2, 2, 32);
  l.vpp = 3;
  Priced p = price("dgx-h100", l, "llama2-13b");
  ASSERT_EQ(job::layers_per_virtual_stage(p.model.layers, l.pp, l.vpp),
            (std::vector<int>{6, 7, 7, 7, 7, 6}));
  Result<JobSimResult> r = simulate_job(p.cluster, p.model, p.step);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_LT(std::abs(p.step.iteration_s - r->iteration_s) / r->iteration_s, 0.03);
  // Each stage ends where the model's pipeline ends it.
  ASSERT_EQ(r->stage_end_s.size(), p.step.stage_end_s.size());
  for (std::size_t s = 0; s < r->stage_end_s.size(); ++s)
    EXPECT_NEAR(r->stage_end_s[s] / p.step.stage_end_s[s], 1.0, 0.03) << "stage " << s;
}

job::Layout layout(int tp, int pp, int dp, int gb) { return compass::testing::layout_of(tp, pp, dp, gb); }

// One layout simulated over both scopes.
struct BothScopes {
  JobSimResult replica, whole;
};

BothScopes simulate_both(const Priced& p) {
  BothScopes b;
  Result<JobSimResult> replica = simulate_job(p.cluster, p.model, p.step);
  Result<JobSimResult> whole =
      simulate_job(p.cluster, p.model, p.step, {}, JobSimScope::cluster);
  EXPECT_TRUE(replica.ok()) << replica.error().message;
  EXPECT_TRUE(whole.ok()) << whole.error().message;
  if (replica.ok()) b.replica = *replica;
  if (whole.ok()) b.whole = *whole;
  return b;
}

// Both scopes simulate the same flows and end within `tolerance` of each other.
void expect_scopes_agree(const Priced& p, double tolerance) {
  const BothScopes b = simulate_both(p);
  ASSERT_GT(b.whole.iteration_s, 0);
  EXPECT_EQ(b.whole.flows, b.replica.flows);
  EXPECT_NEAR(b.whole.iteration_s / b.replica.iteration_s, 1.0, tolerance);
}

TEST(JobSimScope, ClusterIsTheReplicaWhenNoOtherRankRuns) {
  // TP 1, DP 1: the only ranks are the pipeline's own, so both scopes simulate the same flows.
  expect_scopes_agree(price("dgx-h100", layout(1, 4, 1, 16)), 1e-12);
}

TEST(JobSimScope, ClusterMatchesTheReplicaWhereNoLinkIsShared) {
  // One DGX H100, TP 1, DP 8: the replica scope already drives every member's flow of the
  // node's DP ring, and every GPU has its own NVSwitch ports, so the cluster scope (each member
  // running its own steps, eight pipelines computing) must end at the same time with as many
  // ring flows.
  expect_scopes_agree(price("dgx-h100", layout(1, 1, 8, 64)), 1e-9);
}

TEST(JobSimScope, ReplicaDrivesEveryTpRanksRingOfTheNode) {
  // An A6000 node (PCIe switches), TP 2, DP 4: TP rank 1's DP ring crosses the same switches as
  // rank 0's. The replica scope drives both rings of the node, as every member does in the
  // cluster scope, so the two agree; with rank 0's ring alone the reductions would be faster.
  Priced p = price("a6000x8-2nic", layout(2, 1, 4, 32));
  expect_scopes_agree(p, 1e-9);
  // The step model prices the two rings together too.
  job::JobComm comm(p.cluster);
  const job::Placement pl = job::place(p.step.layout, p.cluster.gpus_per_node());
  const double both = comm.dp_collective_s(pl, 2, 1e9, model::Collective::reduce_scatter);
  const double one = comm.intra_node_s(pl.dp_per_node, 2, 1e9, model::Collective::reduce_scatter);
  EXPECT_GT(both, one * 1.2) << "the two rings share the PCIe switches' links";
}

TEST(JobSimScope, ClusterScopeAcrossNodesRuns) {
  // Two DGX A100 nodes, TP 2, PP 2, DP 4: the DP rings cross the NICs and the uplinks.
  Priced p = price("dgx-a100", layout(2, 2, 4, 64));
  const BothScopes b = simulate_both(p);
  ASSERT_GT(b.whole.iteration_s, 0);
  EXPECT_GT(b.whole.flows, b.replica.flows);
  EXPECT_LT(std::abs(b.whole.iteration_s / b.replica.iteration_s - 1), 0.1);
  EXPECT_STREQ(to_string(JobSimScope::cluster), "cluster");
}

TEST(JobSimScope, ClusterScopeRefusesMoreGpusThanItsLimit) {
  // 2,048 GPUs: the cluster scope would run for hours; it names the scope that takes them.
  Priced p = price("dgx-h100", layout(8, 1, 256, 256));
  ASSERT_GT(p.step.layout.gpus(), kMaxClusterScopeGpus);
  Result<JobSimResult> whole = simulate_job(p.cluster, p.model, p.step, {}, JobSimScope::cluster);
  ASSERT_FALSE(whole.ok());
  EXPECT_EQ(whole.error().message,
            "the cluster scope simulates every GPU, at most 1024; 2048 GPUs take the replica "
            "scope");
}

TEST(JobSim, ContextParallelRanksJoinTheGradientGroup) {
  // CP's exchange is in the passes as priced; its ranks are members of the gradient group. A CP
  // layout simulates like the layout whose DP is DP x CP with the same passes, and the model
  // agrees with it as it does without CP.
  job::Layout l = compass::testing::layout_of(2, 2, 2, 16, 8192);
  l.cp = 2;
  Priced p = price("dgx-h100", l);
  Result<JobSimResult> cp = simulate_job(p.cluster, p.model, p.step);
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  EXPECT_NEAR(cp->iteration_s / p.step.iteration_s, 1.0, 0.03);
  job::StepResult as_dp = p.step;
  as_dp.layout.cp = 1;
  as_dp.layout.dp = 4;
  as_dp.layout.seq = 4096;         // the same send bytes
  as_dp.layout.global_batch = 32;  // the same micro-batches per pipeline
  Result<JobSimResult> dp = simulate_job(p.cluster, p.model, as_dp);
  ASSERT_TRUE(dp.ok()) << dp.error().message;
  EXPECT_EQ(cp->iteration_s, dp->iteration_s);
  EXPECT_EQ(cp->flows, dp->flows);
  Result<JobSimResult> whole = simulate_job(p.cluster, p.model, p.step, {}, JobSimScope::cluster);
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_NEAR(whole->iteration_s / cp->iteration_s, 1.0, 0.01);
}

}  // namespace
}  // namespace compass::backends::sim
