// Context parallelism in the job model: the layout's counts and checks, the ranks' placement,
// the layer plan on each rank's sequence share, the ring attention's exposed exchange by hand,
// and what the step and the search make of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "compass/job/comm.hpp"
#include "compass/job/memory.hpp"
#include "compass/job/search.hpp"
#include "compass/job/step.hpp"
#include "support/job_builders.hpp"

namespace compass::job {
namespace {

using compass::testing::builtin_job;
using compass::testing::BuiltinJob;
using compass::testing::layout_of;

Layout with_cp(Layout l, int cp) {
  l.cp = cp;
  return l;
}

TEST(ContextParallel, LayoutCountsAndChecks) {
  const workload::ModelConfig m = workload::resolve_model("llama2-7b").value();
  const Layout l = with_cp(layout_of(2, 2, 2, 16, 8192), 4);
  EXPECT_EQ(l.gpus(), 2 * 4 * 2 * 2);
  EXPECT_EQ(l.local_seq(), 2048);
  EXPECT_EQ(l.grad_group(), 8);
  EXPECT_EQ(describe(l), "tp2 cp4 pp2 dp2 mbs1 sp");
  EXPECT_EQ(describe(with_cp(l, 1)), "tp2 pp2 dp2 mbs1 sp");
  EXPECT_TRUE(check(l, m).ok()) << check(l, m).error().message;
  // Megatron-LM splits each sequence into 2 x CP chunks.
  const Status odd = check(with_cp(layout_of(2, 1, 1, 8, 4100), 4), m);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message.find("2 x CP = 8"), std::string::npos) << odd.error().message;
  // With SP each CP rank's share splits over TP.
  const Status sp = check(with_cp(layout_of(8, 1, 1, 8, 80), 4), m);
  ASSERT_FALSE(sp.ok());
  EXPECT_NE(sp.error().message.find("each CP rank's sequence share 20"), std::string::npos)
      << sp.error().message;
  EXPECT_FALSE(check(with_cp(layout_of(2, 1, 1, 8), 0), m).ok());
}

TEST(ContextParallel, GradientsGoOverDpTimesCp) {
  // Megatron-LM's order tp-cp-dp-pp: CP ranks are TP groups next to each other, and a gradient
  // is reduced over DP x CP ranks tp apart, placed as a DP group of that size.
  const Placement a = place(with_cp(layout_of(2, 2, 2, 16), 2), 8);
  const Placement b = place(layout_of(2, 2, 4, 16), 8);
  EXPECT_EQ(a.dp_per_node, b.dp_per_node);
  EXPECT_EQ(a.dp_nodes, b.dp_nodes);
  EXPECT_EQ(a.pp_crosses_nodes, b.pp_crosses_nodes);
  EXPECT_EQ(a.pp_peer_offset, b.pp_peer_offset);
  EXPECT_EQ(a.dp_per_node, 4);
  EXPECT_TRUE(a.pp_crosses_nodes);
}

TEST(ContextParallel, LayerPlanHoldsTheSharesAttentionOverTheWholeSequence) {
  const BuiltinJob j = builtin_job("dgx-h100", "llama2-7b");
  Result<plan::LayerPlan> cp2 =
      plan_for(j.cluster, j.model, with_cp(layout_of(2, 1, 1, 8, 8192), 2));
  Result<plan::LayerPlan> half = plan_for(j.cluster, j.model, layout_of(2, 1, 1, 8, 4096));
  ASSERT_TRUE(cp2.ok()) << cp2.error().message;
  ASSERT_TRUE(half.ok()) << half.error().message;
  EXPECT_EQ(cp2->parallel.seq, 4096);
  EXPECT_EQ(cp2->parallel.cp, 2);
  // The TP operators hold the rank's 4096 tokens, as a plan of a 4096-token sequence does.
  ASSERT_EQ(cp2->ops.size(), half->ops.size());
  for (std::size_t i = 0; i < cp2->ops.size(); ++i) {
    EXPECT_EQ(cp2->ops[i].choice.op, half->ops[i].choice.op);
    EXPECT_EQ(cp2->ops[i].compass().total_s, half->ops[i].compass().total_s);
  }
  // Attention reads the keys of the whole sequence: twice the work of the 4096-token plan's
  // (its launch once).
  const double launch = j.cluster.node.overheads.kernel_launch_s;
  EXPECT_NEAR(cp2->other.attention_fwd_s - launch, 2 * (half->other.attention_fwd_s - launch),
              1e-12 * cp2->other.attention_fwd_s);
  EXPECT_NEAR(cp2->other.attention_bwd_s - launch, 2 * (half->other.attention_bwd_s - launch),
              1e-12 * cp2->other.attention_bwd_s);
  EXPECT_EQ(cp2->other.elementwise_fwd_s, half->other.elementwise_fwd_s);
  EXPECT_NE(layer_plan_key(with_cp(layout_of(2, 1, 1, 8, 8192), 2)),
            layer_plan_key(layout_of(2, 1, 1, 8, 8192)));
}

TEST(ContextParallel, ExposedExchangeByHand) {
  // PCIe boxes: llama2-7b's keys and values (32 KV heads of 128) for 2048 tokens per rank are
  // 32 MiB a step, longer than half a layer's attention.
  const BuiltinJob j = builtin_job("a6000x8-2nic", "llama2-7b");
  const Layout l = with_cp(layout_of(1, 1, 1, 8, 4096), 2);
  Result<plan::LayerPlan> lp = plan_for(j.cluster, j.model, l);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  JobComm comm(j.cluster);
  const CpExposure e = cp_exposure(comm, j.model, l, *lp);
  const double kv = 2.0 * 2048 * 32 * 128 * 2;
  // One step (CP 2), ranks 0 and 1 (TP 1) and back.
  const double hop = std::max(comm.p2p_ranks_s(0, 1, kv), comm.p2p_ranks_s(1, 0, kv));
  const double hop2 = std::max(comm.p2p_ranks_s(0, 1, 2 * kv), comm.p2p_ranks_s(1, 0, 2 * kv));
  ASSERT_GT(hop, lp->other.attention_fwd_s / 2);
  EXPECT_DOUBLE_EQ(e.forward_s, hop - lp->other.attention_fwd_s / 2);
  EXPECT_DOUBLE_EQ(e.backward_s, std::max(0.0, hop2 - lp->other.attention_bwd_s / 2));
  // CP 1 exchanges nothing.
  Result<plan::LayerPlan> one = plan_for(j.cluster, j.model, layout_of(1, 1, 1, 8, 4096));
  ASSERT_TRUE(one.ok());
  const CpExposure none = cp_exposure(comm, j.model, layout_of(1, 1, 1, 8, 4096), *one);
  EXPECT_EQ(none.forward_s, 0);
  EXPECT_EQ(none.backward_s, 0);
  // Four CP ranks 4 apart (TP 4) on two 8-GPU nodes: ranks 0 and 4 on one, 8 and 12 on the
  // other. The step waits for its slowest hop: the four TP ranks' hops from socket 0 to socket 1
  // (0 -> 4, ..., 3 -> 7) at once, or a hop between the nodes.
  const Layout wide = with_cp(layout_of(4, 1, 1, 8, 8192), 4);
  Result<plan::LayerPlan> wlp = plan_for(j.cluster, j.model, wide);
  ASSERT_TRUE(wlp.ok()) << wlp.error().message;
  const CpExposure w = cp_exposure(comm, j.model, wide, *wlp);
  const double wkv = 2.0 * 2048 * 8 * 128 * 2;
  const double across = comm.p2p_ranks_s(4, 8, wkv);
  const double inside = model::concurrent_flows_time(
                            j.cluster.node, {{0, 4, wkv}, {1, 5, wkv}, {2, 6, wkv}, {3, 7, wkv}})
                            .time_s;
  EXPECT_GT(inside, comm.p2p_ranks_s(0, 4, wkv));  // the four share the link between the sockets
  EXPECT_EQ(comm.cp_ring_step_s(4, 4, 1, wkv), std::max(inside, across));
  EXPECT_DOUBLE_EQ(w.forward_s,
                   3 * std::max(0.0, std::max(inside, across) - wlp->other.attention_fwd_s / 4));
  EXPECT_GT(w.forward_s, 0);
}

TEST(ContextParallel, TheRingsOfAStageStepTogether) {
  // TP 4 x CP 2 on one 8-GPU node: the CP rings 0 <-> 4, 1 <-> 5, 2 <-> 6, 3 <-> 7 step at once.
  const double bytes = 64e6;
  const std::vector<hardware::Flow> hops = {{0, 4, bytes}, {4, 0, bytes}, {1, 5, bytes},
                                            {5, 1, bytes}, {2, 6, bytes}, {6, 2, bytes},
                                            {3, 7, bytes}, {7, 3, bytes}};
  // PCIe: the eight hops cross the link between the sockets, four each way.
  const BuiltinJob pcie = builtin_job("a6000x8-2nic", "llama2-7b");
  JobComm pc(pcie.cluster);
  const double shared = model::concurrent_flows_time(pcie.cluster.node, hops).time_s;
  EXPECT_EQ(pc.cp_ring_step_s(4, 2, 1, bytes), shared);
  EXPECT_GT(shared, 2 * pc.p2p_ranks_s(0, 4, bytes));
  // TP 1 x CP 8: one hop crosses the sockets each way (3 -> 4, 7 -> 0), the others stay under
  // their socket; the step is a crossing hop alone.
  EXPECT_NEAR(pc.cp_ring_step_s(1, 8, 1, bytes) / pc.p2p_ranks_s(3, 4, bytes), 1.0, 1e-12);
  // NVSwitch: every GPU has its own ports; the step is one hop alone.
  const BuiltinJob nvs = builtin_job("dgx-h100", "llama2-7b");
  JobComm nv(nvs.cluster);
  EXPECT_DOUBLE_EQ(nv.cp_ring_step_s(4, 2, 1, bytes), nv.p2p_ranks_s(0, 4, bytes));
  EXPECT_EQ(nv.cp_ring_step_s(4, 1, 1, bytes), 0);
}

TEST(ContextParallel, StepCountsTheExchangeAndSharesTheOptimizer) {
  const BuiltinJob j = builtin_job("a6000x8-2nic", "llama2-7b");
  const Layout l = with_cp(layout_of(1, 1, 2, 8, 4096), 2);
  Result<plan::LayerPlan> lp = plan_for(j.cluster, j.model, l);
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  JobComm comm(j.cluster);
  Result<StepResult> r = price_step(j.cluster, comm, j.model, l, *lp, plan::Config::compass);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const StepBreakdown& b = r->breakdown;
  EXPECT_NEAR(
      b.compute_s + b.tp_exposed_s + b.cp_exposed_s + b.bubble_s + b.dp_exposed_s + b.optimizer_s,
      r->iteration_s, 1e-9 * r->iteration_s);
  // One stage: every layer of every micro-batch exchanges.
  const CpExposure e = cp_exposure(comm, j.model, l, *lp);
  EXPECT_NEAR(b.cp_exposed_s, j.model.layers * l.microbatches() * (e.forward_s + e.backward_s),
              1e-9 * b.cp_exposed_s);
  EXPECT_GT(b.cp_exposed_s, 0);
  EXPECT_NEAR(r->tokens_per_s_per_gpu, 8.0 * 4096 / r->iteration_s / 4, 1e-9);
  // Memory: a rank's activations are those of its 2048 tokens; the optimizer shards over the
  // 4 ranks of DP x CP.
  const double capacity = j.cluster.node.gpu_device(0).memory_bytes;
  const MemoryReport cp_mem = memory_per_gpu(j.model, l, plan::Config::compass, capacity);
  const MemoryReport half =
      memory_per_gpu(j.model, layout_of(1, 1, 2, 8, 2048), plan::Config::compass, capacity);
  const MemoryReport dp4 =
      memory_per_gpu(j.model, layout_of(1, 1, 4, 8, 2048), plan::Config::compass, capacity);
  EXPECT_EQ(cp_mem.stages[0].activations_bytes, half.stages[0].activations_bytes);
  EXPECT_EQ(cp_mem.stages[0].optimizer_bytes, dp4.stages[0].optimizer_bytes);
  EXPECT_LT(cp_mem.stages[0].optimizer_bytes, half.stages[0].optimizer_bytes);
  // A plan for the whole sequence is not this layout's.
  Result<plan::LayerPlan> whole = plan_for(j.cluster, j.model, layout_of(1, 1, 2, 8, 4096));
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(price_step(j.cluster, comm, j.model, l, *whole, plan::Config::compass).ok());
}

TEST(ContextParallel, MegatronArgumentsNameIt) {
  const std::vector<std::string> a =
      megatron_args(with_cp(layout_of(2, 1, 1, 8, 8192), 2), 32, plan::Config::compass);
  const auto it = std::find(a.begin(), a.end(), "--context-parallel-size");
  ASSERT_NE(it, a.end());
  EXPECT_EQ(*(it + 1), "2");
  // DP 1 with CP 2 still reduces gradients, over the two CP ranks, under the backward.
  EXPECT_NE(std::find(a.begin(), a.end(), "--overlap-grad-reduce"), a.end());
  const std::vector<std::string> plain =
      megatron_args(layout_of(2, 1, 1, 8, 8192), 32, plan::Config::compass);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "--context-parallel-size"), plain.end());
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "--overlap-grad-reduce"), plain.end());
}

TEST(ContextParallel, TheSearchTriesItWhenAsked) {
  Searcher s = builtin_job("dgx-h100", "llama3-8b").searcher();
  SearchRequest r;
  r.gpus = 16;
  r.global_batch = 16;
  r.seq = 16384;
  r.top = 1000;
  Result<SearchResult> plain = s.search(r);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  for (const Candidate& c : plain->top) EXPECT_EQ(c.layout.cp, 1);
  r.max_cp = 4;
  Result<SearchResult> tried = s.search(r);
  ASSERT_TRUE(tried.ok()) << tried.error().message;
  EXPECT_GT(tried->enumerated, plain->enumerated);
  std::set<int> cps;
  for (const Candidate& c : tried->top) cps.insert(c.layout.cp);
  EXPECT_EQ(cps, (std::set<int>{1, 2, 4}));
  r.cp = 2;
  Result<SearchResult> fixed = s.search(r);
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  for (const Candidate& c : fixed->top) {
    EXPECT_EQ(c.layout.cp, 2);
    EXPECT_EQ(c.layout.gpus(), 16);
  }
  // Requests no layout can take, named as given.
  r.cp = 3;
  Result<SearchResult> three = s.search(r);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().message, "CP 3 does not divide the 16 GPUs");
  r.cp = 2;
  r.seq = 4098;
  Result<SearchResult> odd = s.search(r);
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message.find("not a multiple of 2 x CP = 4"), std::string::npos)
      << odd.error().message;
  // CP 1 is no context parallelism: any sequence.
  r.cp = 1;
  r.seq = 4097;
  Result<SearchResult> one = s.search(r);
  ASSERT_TRUE(one.ok()) << one.error().message;
}

}  // namespace
}  // namespace compass::job
