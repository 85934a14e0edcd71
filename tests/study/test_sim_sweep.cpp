// The simulated sweep's runner: every candidate of a planned row simulated on its TP group, the
// row's best, choice and regret derived from those times, and the summary's accuracy computed
// from rows whose numbers are known.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "compass/backends/sim/simulator.hpp"
#include "compass/plan/sweep.hpp"
#include "compass/study/sim_sweep.hpp"
#include "support/builders.hpp"

namespace compass::study {
namespace {

using compass::testing::op_of;

// Two rows of a sweep on a preset: an AG-GEMM at tp 4 and a GEMM-RS at tp 2.
plan::SweepResult small_sweep(const hardware::Profile& p) {
  const std::vector<workload::GridEntry> grid = {
      {"toy", "qkv", op_of(workload::OpKind::ag_gemm, 2048, 4096, 1024, 4)},
      {"toy", "proj", op_of(workload::OpKind::gemm_rs, 2048, 1024, 2048, 2)}};
  return plan::run_sweep(p, grid).value();
}

TEST(SimSweep, EveryCandidateIsSimulatedAndTheRowIsDerivedFromThoseTimes) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "built without SimGrid";
  const hardware::Profile p = hardware::make_preset("a6000x8").value();
  const plan::SweepResult sweep = small_sweep(p);
  std::vector<std::pair<std::size_t, std::size_t>> progress;
  const auto rows = simulate_sweep(p, sweep, [&](std::size_t done, std::size_t total) {
    progress.emplace_back(done, total);
  });
  ASSERT_TRUE(rows.ok()) << rows.error().message;
  ASSERT_EQ(rows->size(), sweep.rows.size());
  EXPECT_EQ(progress, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 2}, {2, 2}}));
  for (std::size_t i = 0; i < rows->size(); ++i) {
    const SimRow& r = (*rows)[i];
    const std::vector<double> sim(std::begin(r.sim_s), std::end(r.sim_s));
    for (int c = 0; c < kCandidateCount; ++c) {
      EXPECT_GT(r.sim_s[c], 0) << row_label(sweep, i) << " " << candidate_name(c);
      EXPECT_GT(r.pred_s[c], 0) << row_label(sweep, i) << " " << candidate_name(c);
    }
    EXPECT_EQ(static_cast<std::size_t>(r.best), fastest(sim)) << row_label(sweep, i);
    EXPECT_EQ(r.regret, r.sim_s[r.chosen] / r.sim_s[r.best] - 1) << row_label(sweep, i);
    EXPECT_GE(r.regret, 0);
    EXPECT_GT(r.attainable_s, 0);
    // No strategy beats the attainable time (the cut bound overlapped with the GEMM alone).
    EXPECT_LE(r.attainable_s, *std::min_element(sim.begin(), sim.end()) * (1 + 1e-9))
        << row_label(sweep, i);
  }
  // The same row simulated alone gives the same time: the runner adds nothing of its own.
  const SimRow& first = rows->front();
  const auto plan = schedule::comm_plan_for(p, compass::testing::first_gpus(4)).value();
  const schedule::Strategy ring = sweep.rows[0].choice.of(kCandidates[3]).strategy;
  ASSERT_EQ(ring.kind, schedule::StrategyKind::fuse_ring);
  const auto s = schedule::generate(sweep.rows[0].entry.op, ring, plan);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto alone = backends::sim::simulate(p, *s);
  ASSERT_TRUE(alone.ok()) << alone.error().message;
  EXPECT_EQ(first.sim_s[3], alone->total_s);  // candidate 3: fuse:ring
}

TEST(SimSweep, RowLabelsNameModelLayerOperatorAndShape) {
  const hardware::Profile p = hardware::make_preset("a6000x8").value();
  const plan::SweepResult sweep = small_sweep(p);
  EXPECT_EQ(row_label(sweep, 0), "toy qkv ag_gemm tp4 M=2048");
  EXPECT_EQ(row_label(sweep, 1), "toy proj gemm_rs tp2 M=2048");
  EXPECT_STREQ(candidate_name(1), "decompose:d*");
}

// A row whose simulated times are `sim` and whose predictions are `pred`, choosing `chosen`.
SimRow row_of(const std::vector<double>& sim, const std::vector<double>& pred, int chosen) {
  SimRow r;
  std::copy(sim.begin(), sim.end(), r.sim_s);
  std::copy(pred.begin(), pred.end(), r.pred_s);
  r.best = static_cast<int>(fastest(sim));
  r.chosen = chosen;
  r.regret = r.sim_s[chosen] / r.sim_s[r.best] - 1;
  r.attainable_s = 0.5 * r.sim_s[r.best];
  return r;
}

TEST(SimSweep, SummaryCountsTheModelAgainstTheSimulation) {
  // Row 1: every prediction 10% high, the choice (fuse:ring) is the simulated best.
  // Row 2: exact predictions, the choice (sequential) is 25% slower than fuse:hier.
  const std::vector<double> sim1 = {4, 3, 5, 2, 2.5, 2.2, 2.2};
  std::vector<double> pred1 = sim1;
  for (double& t : pred1) t *= 1.1;
  const std::vector<double> sim2 = {5, 6, 7, 4.5, 4.5, 4, 4};
  const std::vector<SimRow> rows = {row_of(sim1, pred1, 3), row_of(sim2, sim2, 0)};
  const SimSummary s = summarise(rows);
  EXPECT_EQ(s.accuracy.configs, 2u);
  EXPECT_NEAR(s.accuracy.mape, 0.05, 1e-12);  // 14 points: 7 at 10%, 7 at 0%
  EXPECT_EQ(s.accuracy.choice_is_best, 1);
  EXPECT_NEAR(s.accuracy.mean_regret, 0.125, 1e-12);
  EXPECT_NEAR(s.accuracy.worst_regret.value, 0.25, 1e-12);
  EXPECT_EQ(s.accuracy.worst_regret.config, 1u);
  EXPECT_EQ(s.a2a_slower_than_seq, 2);
}

}  // namespace
}  // namespace compass::study
