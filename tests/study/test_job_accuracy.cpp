// The search's candidates simulated and re-ranked: the report's own arithmetic, and the model
// held to the simulation on a small search.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "compass/backends/sim/simulator.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/study/job_accuracy.hpp"
#include "support/job_builders.hpp"

namespace compass::study {
namespace {

// The best `top` layouts of 16 GPUs, global batch 64, sequence 2048 (`tp` fixed when given).
Result<job::SearchResult> search_top(job::Searcher& s, int top, std::optional<int> tp = {}) {
  job::SearchRequest req;
  req.gpus = 16;
  req.global_batch = 64;
  req.seq = 2048;
  req.top = top;
  req.tp = tp;
  return s.search(req);
}

TEST(JobAccuracy, RefineRanksBySimulationAndAgreesWithTheModel) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "built without SimGrid";
  job::Searcher s = compass::testing::builtin_job("dgx-h100", "llama2-7b").searcher();
  Result<job::SearchResult> res = search_top(s, 6);
  ASSERT_TRUE(res.ok()) << res.error().message;
  Result<RefineReport> r =
      refine_by_simulation(s.cluster(), s.model(), res->top, job::Pricing::compass);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->rows.size(), res->top.size());
  double sum = 0;
  for (std::size_t i = 0; i < r->rows.size(); ++i) {
    const SimulatedLayout& row = r->rows[i];
    if (i > 0) {
      EXPECT_LE(r->rows[i - 1].sim_s, row.sim_s);
    }
    EXPECT_DOUBLE_EQ(row.model_s, row.candidate.compass.iteration_s);
    EXPECT_NEAR(row.error, (row.model_s - row.sim_s) / row.sim_s, 1e-12);
    EXPECT_GT(row.flows, 0);
    sum += std::abs(row.error);
  }
  EXPECT_NEAR(r->mape, sum / r->rows.size(), 1e-12);
  // The search's first candidate is the model's best.
  EXPECT_EQ(r->rows[r->model_best].candidate.layout, res->top.front().layout);
  // The targets: 3% mean error, the model's pick within 1% of the simulated best.
  EXPECT_LT(r->mape, 0.03);
  EXPECT_LE(r->regret, 0.01);
}

TEST(JobAccuracy, RefineUnderTheLaunchSimulatesWhatTheSearchRecommends) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "built without SimGrid";
  // H100 PCIe boxes, llama2-13b on 8 GPUs: the search recommends TP 1 (its launch needs no TP
  // overlap), while Compass's own choices would be fastest at TP 2, where TE cannot run them.
  Result<job::Cluster> cluster =
      job::resolve_cluster(std::string(COMPASS_SOURCE_DIR) + "/profiles/h100pcie-x8-gen5.json");
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  job::Searcher s(*cluster, workload::resolve_model("llama2-13b").value());
  job::SearchRequest req;
  req.gpus = 8;
  req.global_batch = 32;
  req.seq = 4096;
  req.top = 4;
  Result<job::SearchResult> res = s.search(req);
  ASSERT_TRUE(res.ok()) << res.error().message;
  Result<RefineReport> launch =
      refine_by_simulation(s.cluster(), s.model(), res->top, job::Pricing::launch);
  Result<RefineReport> own =
      refine_by_simulation(s.cluster(), s.model(), res->top, job::Pricing::compass);
  ASSERT_TRUE(launch.ok()) << launch.error().message;
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(launch->under, job::Pricing::launch);
  for (const SimulatedLayout& row : launch->rows)
    EXPECT_EQ(row.model_s, row.candidate.launch.iteration_s) << job::describe(row.candidate.layout);
  // Under the launch the model's best is the layout the search recommends; under Compass's own
  // choices it is another one.
  EXPECT_EQ(launch->rows[launch->model_best].candidate.layout, res->best_launch.layout);
  EXPECT_EQ(own->rows[own->model_best].candidate.layout, res->best_compass.layout);
  ASSERT_FALSE(res->best_launch.layout == res->best_compass.layout);
  // The TP 2 layout's launch (TE running the exported settings) simulates longer than its own
  // choices; TP 1's launch is Megatron-LM's step, the same under both.
  auto sim_of = [](const RefineReport& r, const job::Layout& l) {
    for (const SimulatedLayout& row : r.rows)
      if (row.candidate.layout == l) return row.sim_s;
    return -1.0;
  };
  const double tp2_launch = sim_of(*launch, res->best_compass.layout);
  const double tp2_own = sim_of(*own, res->best_compass.layout);
  ASSERT_GT(tp2_launch, 0);
  ASSERT_GT(tp2_own, 0);
  EXPECT_GT(tp2_launch, tp2_own);
  EXPECT_GT(sim_of(*launch, res->best_launch.layout), 0);
  EXPECT_EQ(sim_of(*launch, res->best_launch.layout), sim_of(*own, res->best_launch.layout));
}

TEST(JobAccuracy, SimulatedTpOpsRunOnlyCompassOrMegatronSchedules) {
  JobSimSettings simulated;
  simulated.tp_ops = TpOpTimes::simulated;
  for (job::Pricing p : {job::Pricing::compass, job::Pricing::megatron}) {
    EXPECT_TRUE(check_job_sim(p, simulated).ok()) << job::to_string(p);
  }
  for (job::Pricing p : {job::Pricing::launch, job::Pricing::te_default}) {
    const Status st = check_job_sim(p, simulated);
    ASSERT_FALSE(st.ok()) << job::to_string(p);
    EXPECT_NE(st.error().message.find(p == job::Pricing::launch ? "TE's exported settings"
                                                                : "te-default"),
              std::string::npos)
        << st.error().message;
    // Priced TP operators simulate any of a candidate's prices.
    EXPECT_TRUE(check_job_sim(p, JobSimSettings{}).ok()) << job::to_string(p);
  }
  // simulate_layouts holds to the same rule before it simulates anything.
  job::Searcher s = compass::testing::builtin_job("dgx-h100", "llama2-7b").searcher();
  Result<job::SearchResult> res = search_top(s, 2, 2);
  ASSERT_TRUE(res.ok()) << res.error().message;
  Result<std::vector<LayoutSimulation>> r =
      simulate_layouts(s.cluster(), s.model(), res->top, job::Pricing::launch, {}, {}, simulated);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("TE's exported settings"), std::string::npos)
      << r.error().message;
}

TEST(JobAccuracy, SimulatedTpOpsAreTheOperatorSimulatorsTimes) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "built without SimGrid";
  const compass::testing::BuiltinJob j = compass::testing::builtin_job("a6000x8-2nic", "llama2-7b");
  Result<plan::LayerPlan> lp = job::plan_for(j.cluster, j.model, compass::testing::layout_of(4, 2, 1, 8));
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  for (plan::Config c : {plan::Config::compass, plan::Config::megatron}) {
    Result<plan::LayerPlan> sim = with_simulated_tp_ops(j.cluster.node, *lp, c);
    ASSERT_TRUE(sim.ok()) << sim.error().message;
    ASSERT_EQ(sim->ops.size(), lp->ops.size());
    for (std::size_t i = 0; i < lp->ops.size(); ++i) {
      const model::Estimate& priced =
          c == plan::Config::megatron ? lp->ops[i].megatron : lp->ops[i].compass();
      const model::Estimate& simulated =
          c == plan::Config::megatron ? sim->ops[i].megatron : sim->ops[i].compass();
      EXPECT_EQ(simulated.compute_s, priced.compute_s);
      EXPECT_EQ(schedule::to_string(simulated.strategy), schedule::to_string(priced.strategy));
      // The per-operator model is held to the same simulator elsewhere; here it is a sanity
      // bound that says the right schedule was simulated.
      EXPECT_NEAR(simulated.total_s / priced.total_s, 1.0, 0.05) << lp->ops[i].choice.op.role;
    }
  }
  // The first operator, simulated here directly, is the time put in the plan.
  Result<plan::LayerPlan> sim = with_simulated_tp_ops(j.cluster.node, *lp, plan::Config::compass);
  ASSERT_TRUE(sim.ok());
  const plan::PlannedOp& first = lp->ops.front();
  Result<schedule::Schedule> s =
      schedule::generate_for(j.cluster.node, first.choice.op, first.compass().strategy, lp->plan);
  ASSERT_TRUE(s.ok()) << s.error().message;
  backends::sim::SimOptions so;
  so.busiest_links = 0;
  Result<backends::sim::SimResult> direct = backends::sim::simulate(j.cluster.node, *s, so);
  ASSERT_TRUE(direct.ok()) << direct.error().message;
  EXPECT_EQ(sim->ops.front().compass().total_s, direct->total_s);
}

TEST(JobAccuracy, SimulatedTpOpsRefuseTeDefaultsAndKeepTpOne) {
  const compass::testing::BuiltinJob j = compass::testing::builtin_job("dgx-h100", "llama2-7b");
  Result<plan::LayerPlan> lp = job::plan_for(j.cluster, j.model, compass::testing::layout_of(2, 2, 1, 8));
  ASSERT_TRUE(lp.ok()) << lp.error().message;
  Result<plan::LayerPlan> te = with_simulated_tp_ops(j.cluster.node, *lp, plan::Config::te_default);
  ASSERT_FALSE(te.ok());
  EXPECT_NE(te.error().message.find("te-default"), std::string::npos) << te.error().message;
  Result<plan::LayerPlan> one = job::plan_for(j.cluster, j.model, compass::testing::layout_of(1, 2, 1, 8));
  ASSERT_TRUE(one.ok()) << one.error().message;
  Result<plan::LayerPlan> same = with_simulated_tp_ops(j.cluster.node, *one, plan::Config::compass);
  ASSERT_TRUE(same.ok()) << same.error().message;
  for (std::size_t i = 0; i < one->ops.size(); ++i)
    EXPECT_EQ(same->ops[i].compass().total_s, one->ops[i].compass().total_s);
}

TEST(JobAccuracy, SimulatedTpOpsMoveTheSimulatedIterationLittle) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "built without SimGrid";
  job::Searcher s = compass::testing::builtin_job("dgx-h100", "llama2-7b").searcher();
  Result<job::SearchResult> res = search_top(s, 4, 4);
  ASSERT_TRUE(res.ok()) << res.error().message;
  Result<std::vector<LayoutSimulation>> priced =
      simulate_layouts(s.cluster(), s.model(), res->top, job::Pricing::compass);
  JobSimSettings settings;
  settings.tp_ops = TpOpTimes::simulated;
  Result<std::vector<LayoutSimulation>> simulated =
      simulate_layouts(s.cluster(), s.model(), res->top, job::Pricing::compass, {}, {}, settings);
  ASSERT_TRUE(priced.ok()) << priced.error().message;
  ASSERT_TRUE(simulated.ok()) << simulated.error().message;
  ASSERT_EQ(priced->size(), res->top.size());
  ASSERT_EQ(simulated->size(), res->top.size());
  for (std::size_t i = 0; i < res->top.size(); ++i) {
    // The same sends and collectives; only the TP operators' durations changed.
    EXPECT_EQ((*simulated)[i].flows, (*priced)[i].flows);
    EXPECT_GT((*simulated)[i].sim_s, 0);
    EXPECT_NEAR((*simulated)[i].sim_s / (*priced)[i].sim_s, 1.0, 0.03)
        << job::describe(res->top[i].layout);
  }
  EXPECT_STREQ(to_string(TpOpTimes::simulated), "simulated");
  EXPECT_STREQ(to_string(TpOpTimes::priced), "priced");
}

TEST(JobAccuracy, NoCandidatesIsAnError) {
  const compass::testing::BuiltinJob j = compass::testing::builtin_job("dgx-h100", "llama2-7b");
  EXPECT_FALSE(refine_by_simulation(j.cluster, j.model, {}, job::Pricing::compass).ok());
}

}  // namespace
}  // namespace compass::study
