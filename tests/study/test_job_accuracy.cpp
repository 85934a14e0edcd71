// The search's candidates simulated and re-ranked: the report's own arithmetic, and the model
// held to the simulation on a small search.
#include <gtest/gtest.h>

#include <cmath>

#include "compass/backends/sim/simulator.hpp"
#include "compass/study/job_accuracy.hpp"

namespace compass::study {
namespace {

TEST(JobAccuracy, RefineRanksBySimulationAndAgreesWithTheModel) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "built without SimGrid";
  Result<job::Cluster> c = job::builtin_cluster("dgx-h100");
  ASSERT_TRUE(c.ok());
  Result<workload::ModelConfig> m = workload::resolve_model("llama2-7b");
  ASSERT_TRUE(m.ok());
  job::Searcher s(*c, *m);
  job::SearchRequest req;
  req.gpus = 16;
  req.global_batch = 64;
  req.seq = 2048;
  req.top = 6;
  Result<job::SearchResult> res = s.search(req);
  ASSERT_TRUE(res.ok()) << res.error().message;
  Result<RefineReport> r =
      refine_by_simulation(s.cluster(), s.model(), res->top, plan::Config::compass);
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

TEST(JobAccuracy, NoCandidatesIsAnError) {
  Result<job::Cluster> c = job::builtin_cluster("dgx-h100");
  ASSERT_TRUE(c.ok());
  Result<workload::ModelConfig> m = workload::resolve_model("llama2-7b");
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(refine_by_simulation(*c, *m, {}, plan::Config::compass).ok());
}

}  // namespace
}  // namespace compass::study
