// Clusters, multi-node collectives and the whole step.
#include <gtest/gtest.h>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/job/cluster.hpp"
#include "compass/job/comm.hpp"
#include "compass/job/step.hpp"

namespace compass::job {
namespace {

workload::ModelConfig small_model() {
  Result<workload::ModelConfig> m = workload::resolve_model("llama2-7b");
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(Cluster, BuiltinsValidateAndRoundTrip) {
  for (const std::string& name : cluster_names()) {
    Result<Cluster> c = builtin_cluster(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_TRUE(validate(*c).ok()) << name;
    Result<Cluster> back = cluster_from_json(cluster_to_json(*c), name);
    ASSERT_TRUE(back.ok()) << (back.ok() ? "" : back.error().message);
    EXPECT_EQ(back->nic, c->nic);
    EXPECT_EQ(back->network.hops, c->network.hops);
    EXPECT_EQ(back->node.gpu_count(), c->node.gpu_count());
  }
  EXPECT_FALSE(builtin_cluster("nope").ok());
}

TEST(Cluster, AMachineProfileIsAOneNodeCluster) {
  Result<hardware::Profile> p = hardware::make_preset("a6000x8");
  ASSERT_TRUE(p.ok());
  Result<Cluster> c = cluster_from_json(hardware::profile_to_json(*p), "a6000x8.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->max_nodes, 1);
  EXPECT_EQ(c->gpus_per_node(), 8);
}

TEST(Cluster, NicCountDefaultsToTheProfilesNics) {
  // A one-server profile with a NIC per GPU (four NIC nodes) and a cluster file without a count.
  const hardware::Profile p = hardware::make_multinode_nvswitch(1, 4);
  Result<Cluster> c = cluster_from_json(
      std::string(R"({"node": )") + hardware::profile_to_json(p) + "}", "four.json");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->nic.count, 4);
}

TEST(Cluster, BadFieldsAreNamed) {
  Result<Cluster> c = cluster_from_json(R"({"node": "h100x8", "nic": {"count": 0}})", "x.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("nic.count"), std::string::npos);
}

TEST(Cluster, MisspeltFieldsAndFractionalCountsAreRefused) {
  auto error_of = [](const std::string& text) {
    Result<Cluster> c = cluster_from_json(text, "x.json");
    return c.ok() ? std::string("(read)") : c.error().message;
  };
  // Before, each of these fell back to a default or was cut to an integer without a word.
  EXPECT_EQ(error_of(R"({"node": "h100x8", "nic": {"gbsp": 100}})"),
            "x.json: nic: unknown field 'gbsp' (known: count, gbps, efficiency, latency_us, "
            "rail_optimized, source)");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "network": {"oversub": 4}})"),
            "x.json: network: unknown field 'oversub' (known: oversubscription, hop_latency_us, "
            "hops, source)");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "gpus": 16})"),
            "x.json: unknown field 'gpus' (known: name, description, nodes, node, nic, network, "
            "notes)");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "nic": {"count": 2.5}})"),
            "x.json: nic: count: expected an integer, got 2.5");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "nodes": 10000000000})"),
            "x.json: nodes: expected an integer, got 10000000000");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "nodes": 18446744073709551615})"),
            "x.json: nodes: expected an integer, got 18446744073709551615");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "nodes": 4, "nodes": 2})"),
            "x.json: duplicate key 'nodes'");
  EXPECT_EQ(error_of(R"({"node": "h100x8", "nodes": 4, "nic": {"count": 8, "gbps": 200}})"),
            "(read)");
}

TEST(JobComm, InterNodeRingByHand) {
  Result<Cluster> c = builtin_cluster("dgx-h100");
  ASSERT_TRUE(c.ok());
  JobComm comm(*c);
  // Each GPU gets 8 x 400 Gb/s x 0.9 / 8 GPUs = 45 GB/s; one message 2 us + 2 hops x 0.5 us.
  const double bw = 8 * 400e9 / 8 * 0.9 / 8;
  EXPECT_DOUBLE_EQ(c->nic_bytes_per_s_per_gpu(), bw);
  const double bytes = 400e6, launch = c->node.overheads.collective_launch_s;
  const double step = 3e-6 + bytes / 4 / bw;
  EXPECT_NEAR(comm.inter_node_s(4, bytes, model::Collective::reduce_scatter), 3 * step + launch,
              1e-12);
  EXPECT_NEAR(comm.inter_node_s(4, bytes, model::Collective::all_reduce), 6 * step + launch, 1e-12);
  EXPECT_EQ(comm.inter_node_s(1, bytes, model::Collective::all_gather), 0);
}

TEST(JobComm, DpGroupGoesInsideTheNodeFirst) {
  Result<Cluster> c = builtin_cluster("dgx-h100");
  ASSERT_TRUE(c.ok());
  JobComm comm(*c);
  Layout l;
  l.tp = 2;
  l.dp = 16;  // 4 DP ranks per node, 4 nodes
  const Placement pl = place(l, 8);
  EXPECT_EQ(pl.dp_per_node, 4);
  EXPECT_EQ(pl.dp_nodes, 4);
  const double bytes = 1e9;
  const double expected = comm.intra_node_s(4, 2, bytes, model::Collective::reduce_scatter) +
                          comm.inter_node_s(4, bytes / 4, model::Collective::reduce_scatter);
  EXPECT_DOUBLE_EQ(comm.dp_collective_s(pl, 2, bytes, model::Collective::reduce_scatter), expected);
  // The NIC share is the bottleneck: the hierarchical collective is slower than the node part.
  EXPECT_GT(expected, 2 * comm.intra_node_s(4, 2, bytes, model::Collective::reduce_scatter));
}

TEST(JobComm, PipelineSendsTakeTheLinkTheStagesSitOn) {
  Result<Cluster> dgx = builtin_cluster("dgx-h100");
  Result<Cluster> pcie = builtin_cluster("a6000x8-2nic");
  ASSERT_TRUE(dgx.ok() && pcie.ok());
  JobComm dgx_comm(*dgx), pcie_comm(*pcie);
  Layout l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 2;  // stages 4 GPUs apart: inside one node
  const double bytes = 64e6;
  const Placement inside = place(l, 8);
  EXPECT_FALSE(inside.pp_crosses_nodes);
  EXPECT_DOUBLE_EQ(dgx_comm.p2p_s(inside, bytes), model::transfer_time_s(dgx->node, 0, 4, bytes));
  l.dp = 4;  // stages 8 GPUs apart: the next node, over the NIC share
  const Placement across = place(l, 8);
  EXPECT_TRUE(across.pp_crosses_nodes);
  EXPECT_DOUBLE_EQ(dgx_comm.p2p_s(across, bytes),
                   model::transfer_time_s(dgx_comm.rail(), 0, 1, bytes));
  // Two 100 Gb/s NICs shared by eight GPUs against one 400 Gb/s NIC per GPU: 16x less per GPU.
  EXPECT_NEAR(pcie_comm.p2p_s(across, bytes) / dgx_comm.p2p_s(across, bytes), 16, 0.1);
}

TEST(Step, EachPipelineBoundaryOnItsOwnLink) {
  // tp 2 x dp 2: stages 4 GPUs apart, two stages per node. Boundaries 0->1 and 2->3 stay inside
  // a node (GPU 0 -> GPU 4), boundary 1->2 crosses to the next node over the NIC share.
  Result<Cluster> c = builtin_cluster("a6000x8-2nic");
  ASSERT_TRUE(c.ok());
  Layout l;
  l.tp = 2;
  l.dp = 2;
  l.pp = 4;
  l.global_batch = 16;
  l.seq = 2048;
  Result<plan::LayerPlan> lp = plan_for(*c, small_model(), l);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  JobComm comm(*c);
  Result<StepResult> r = price_step(*c, comm, small_model(), l, *lp, plan::Config::compass);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const double bytes = 2048.0 * small_model().hidden * 2;
  const std::vector<double>& send = r->pipeline.send_s;
  ASSERT_EQ(send.size(), 3u);
  EXPECT_DOUBLE_EQ(send[0], model::transfer_time_s(c->node, 0, 4, bytes));
  EXPECT_DOUBLE_EQ(send[1], model::transfer_time_s(comm.rail(), 0, 1, bytes));
  EXPECT_DOUBLE_EQ(send[2], send[0]);
  EXPECT_GT(send[1], send[0]);
}

TEST(Cluster, Nvl72AllowsTpBeyondEightGpus) {
  Result<Cluster> nvl = builtin_cluster("gb200-nvl72");
  Result<Cluster> dgx = builtin_cluster("dgx-h100");
  ASSERT_TRUE(nvl.ok() && dgx.ok());
  // 96 heads and 96 KV heads split 16 ways (Llama's 8 KV heads would not).
  Result<workload::ModelConfig> m = workload::resolve_model("gpt3-175b");
  ASSERT_TRUE(m.ok());
  Layout l;
  l.tp = 16;
  l.seq = 4096;
  l.sequence_parallel = true;
  EXPECT_TRUE(plan_for(*nvl, *m, l).ok());
  Result<plan::LayerPlan> refused = plan_for(*dgx, *m, l);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("larger than a node"), std::string::npos);
}

class StepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Cluster> c = builtin_cluster("dgx-h100");
    ASSERT_TRUE(c.ok());
    cluster = *c;
    layout.tp = 4;
    layout.pp = 2;
    layout.dp = 4;
    layout.micro_batch = 1;
    layout.global_batch = 32;
    layout.seq = 2048;
    layout.sequence_parallel = true;
    Result<plan::LayerPlan> lp = plan_for(cluster, small_model(), layout);
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    plan = *lp;
  }
  StepResult price(const Layout& l, plan::Config c) {
    JobComm comm(cluster);
    Result<StepResult> r = price_step(cluster, comm, small_model(), l, plan, c);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return *r;
  }
  Cluster cluster;
  Layout layout;
  plan::LayerPlan plan;
};

TEST_F(StepTest, BreakdownAddsUpToTheIteration) {
  const StepResult r = price(layout, plan::Config::compass);
  const StepBreakdown& b = r.breakdown;
  EXPECT_NEAR(
      b.compute_s + b.tp_exposed_s + b.cp_exposed_s + b.bubble_s + b.dp_exposed_s + b.optimizer_s,
      r.iteration_s, 1e-9 * r.iteration_s);
  EXPECT_EQ(b.cp_exposed_s, 0);  // no context parallelism
  EXPECT_GT(b.bubble_s, 0);
  EXPECT_GT(r.mfu, 0);
  EXPECT_LT(r.mfu, 1);
  EXPECT_NEAR(r.tokens_per_s_per_gpu, 32.0 * 2048 / r.iteration_s / 32, 1e-9);
}

TEST_F(StepTest, CompassOverlapIsNeverSlowerThanSequential) {
  EXPECT_LE(price(layout, plan::Config::compass).iteration_s,
            price(layout, plan::Config::megatron).iteration_s);
}

TEST_F(StepTest, DpOverlapHidesGradientTime) {
  Layout off = layout;
  off.overlap_grad_reduce = false;
  off.overlap_param_gather = false;
  const StepResult with = price(layout, plan::Config::compass);
  const StepResult without = price(off, plan::Config::compass);
  EXPECT_LT(with.breakdown.dp_exposed_s, without.breakdown.dp_exposed_s);
  EXPECT_LT(with.iteration_s, without.iteration_s);
}

TEST_F(StepTest, RecomputationCostsTimeAndSavesMemory) {
  Layout full = layout;
  full.recompute = Recompute::full;
  const StepResult none = price(layout, plan::Config::compass);
  const StepResult rc = price(full, plan::Config::compass);
  EXPECT_GT(rc.iteration_s, none.iteration_s);
  EXPECT_LT(rc.memory.peak_bytes, none.memory.peak_bytes);
  EXPECT_DOUBLE_EQ(rc.model_tflops_per_gpu * rc.iteration_s,
                   none.model_tflops_per_gpu * none.iteration_s);
  EXPECT_GT(rc.hardware_tflops_per_gpu, rc.model_tflops_per_gpu);
}

TEST_F(StepTest, RejectsLayoutsTheClusterCannotRun) {
  JobComm comm(cluster);
  Layout bad = layout;
  bad.global_batch = 30;
  EXPECT_FALSE(price_step(cluster, comm, small_model(), bad, plan, plan::Config::compass).ok());
  Layout other = layout;
  other.micro_batch = 2;
  other.global_batch = 64;
  Result<StepResult> r =
      price_step(cluster, comm, small_model(), other, plan, plan::Config::compass);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("layer plan"), std::string::npos);
}

}  // namespace
}  // namespace compass::job
