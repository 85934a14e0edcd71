// Refining the model's choice by simulation: which candidates are simulated, which one is kept,
// and that refining a real operator keeps a candidate that simulates no slower than the model's.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "compass/backends/sim/simulator.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/study/refine.hpp"
#include "support/builders.hpp"

namespace compass::study {
namespace {

using Idx = std::vector<std::size_t>;

// An operator at tp 8 on GPUs 0..7 of a preset, with its plan and the model's choice.
struct Planned {
  hardware::Profile profile;
  schedule::CommPlan plan;
  model::OperatorChoice choice;
};

Planned plan_op(const std::string& preset, workload::OpKind kind, std::int64_t m, std::int64_t n,
                std::int64_t k) {
  auto [profile, plan] = compass::testing::preset_plan(preset, 8);
  const workload::OperatorSpec op = compass::testing::op_of(kind, m, n, k, 8);
  model::OperatorChoice choice = model::choose_strategy(profile, op, plan).value();
  return {std::move(profile), std::move(plan), std::move(choice)};
}

TEST(Refine, CandidatesAreThePickThenTheCloseOnesInPredictedOrder) {
  const std::vector<double> pred = {10.0, 10.5, 12.0, 20.0, 10.8};
  RefineOptions o;
  o.margin = 0.10;
  o.max_candidates = 3;
  EXPECT_EQ(refine_candidates(pred, 0, o), (Idx{0, 1, 4}));
  // The selector's pick need not be the fastest prediction (its tie rule): it goes first.
  EXPECT_EQ(refine_candidates(pred, 1, o), (Idx{1, 0, 4}));
  o.max_candidates = 5;
  EXPECT_EQ(refine_candidates(pred, 0, o), (Idx{0, 1, 4}));  // 12 is 20% above the best
  o.margin = 0.25;
  EXPECT_EQ(refine_candidates(pred, 0, o), (Idx{0, 1, 4, 2}));
  o.margin = 0;
  EXPECT_EQ(refine_candidates(pred, 0, o), (Idx{0}));
  o.margin = 0.10;
  o.max_candidates = 1;
  EXPECT_EQ(refine_candidates(pred, 0, o), (Idx{0}));
  EXPECT_TRUE(refine_candidates(pred, 7, o).empty());
}

TEST(Refine, PickIsTheSimulatedFastestFirstOnTies) {
  EXPECT_EQ(refined_pick({2, 0, 4}, {3.0, 1.0, 1.0}), 0u);
  EXPECT_EQ(refined_pick({2, 0, 4}, {0.5, 1.0, 1.0}), 2u);
}

TEST(Refine, OptionsAreChecked) {
  RefineOptions o;
  EXPECT_TRUE(check(o).ok());
  o.margin = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(check(o).ok());
  o.margin = -0.1;
  EXPECT_FALSE(check(o).ok());
  o.margin = 0.1;
  o.max_candidates = 0;
  EXPECT_FALSE(check(o).ok());
}

TEST(Refine, RefinedChoiceSimulatesNoSlowerThanTheModelsPick) {
  if (!backends::sim::compiled_in()) GTEST_SKIP() << "no simulator in this build";
  Planned d = plan_op("h100x8", workload::OpKind::ag_gemm, 2048, 27648, 5120);
  model::OperatorChoice& c = d.choice;
  const std::size_t model_pick = c.chosen;
  RefineOptions o;
  o.margin = 10;  // every candidate
  o.max_candidates = 16;
  const Result<RefinedOp> r = refine_choice(d.profile, c, d.plan, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->simulated.size(), c.estimates.size());
  EXPECT_EQ(r->simulated.front(), model_pick);
  EXPECT_EQ(r->model_choice, model_pick);
  EXPECT_EQ(c.chosen, r->refined_choice);
  double best = std::numeric_limits<double>::infinity();
  for (double t : r->simulated_s) {
    EXPECT_TRUE(std::isfinite(t) && t > 0);
    best = std::min(best, t);
  }
  const std::size_t k = static_cast<std::size_t>(
      std::find(r->simulated.begin(), r->simulated.end(), r->refined_choice) -
      r->simulated.begin());
  EXPECT_EQ(r->simulated_s[k], best);
  EXPECT_LE(r->simulated_s[k], r->simulated_s.front());
  if (r->changed()) {
    EXPECT_NE(c.reason.find("refined by simulation"), std::string::npos);
  }
}

TEST(Refine, NothingToSimulateLeavesTheChoiceAlone) {
  Planned d = plan_op("a6000x8", workload::OpKind::gemm_rs, 4096, 5120, 1728);
  model::OperatorChoice& c = d.choice;
  const std::size_t before = c.chosen;
  const std::string reason = c.reason;
  RefineOptions o;
  o.max_candidates = 1;  // the model's pick alone
  const Result<RefinedOp> r = refine_choice(d.profile, c, d.plan, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->simulated.empty());
  EXPECT_EQ(c.chosen, before);
  EXPECT_EQ(c.reason, reason);
}

}  // namespace
}  // namespace compass::study
