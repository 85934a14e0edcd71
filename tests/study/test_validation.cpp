// The validation runner: every strategy the planner weighs runs for real on the CPU executor
// with paced links, and each configuration's choice, best and regret come from those runs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "compass/hardware/presets.hpp"
#include "compass/study/validation.hpp"

namespace compass::study {
namespace {

TEST(ValidationGrid, SmallAndPaperScaledAndNothingElse) {
  const auto small = validation_grid("small", 2);
  ASSERT_TRUE(small.ok()) << small.error().message;
  EXPECT_EQ(small->size(), 4u);
  for (const GridConfig& c : *small) EXPECT_EQ(c.op.tp, 2) << c.label;
  const auto paper = validation_grid("paper-scaled", 2);
  ASSERT_TRUE(paper.ok()) << paper.error().message;
  EXPECT_EQ(paper->size(), 96u);  // the paper grid's TP-2 rows
  const auto bad = validation_grid("huge", 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("huge"), std::string::npos) << bad.error().message;
}

TEST(ValidationGrid, TheEmulatedProfileKeepsTheLinksAndTakesTheCalibratedDevices) {
  const hardware::Profile topology = hardware::make_preset("a6000x8").value();
  const hardware::Profile calibrated = hardware::make_preset("h100x8").value();
  const hardware::Profile p = emulated_profile(topology, calibrated, 0.5);
  ASSERT_EQ(p.links.size(), topology.links.size());
  for (std::size_t i = 0; i < p.links.size(); ++i)
    EXPECT_DOUBLE_EQ(p.links[i].bandwidth_bytes_per_s, 0.5 * topology.links[i].bandwidth_bytes_per_s);
  ASSERT_EQ(p.devices.size(), topology.devices.size());
  EXPECT_EQ(p.devices.front().peak_flops, calibrated.devices.front().peak_flops);
  EXPECT_EQ(p.overheads.kernel_launch_s, calibrated.overheads.kernel_launch_s);
}

TEST(Validation, EveryStrategyRunsAndEachConfigurationIsJudgedByItsRuns) {
  const hardware::Profile topology = hardware::make_preset("a6000x8").value();
  const std::vector<GridConfig> grid = validation_grid("small", 2).value();
  const hardware::Profile predicted = emulated_profile(topology, topology, 1.0);
  ValidateOptions o;
  o.repeat = 1;
  o.warmup = 0;
  std::vector<double> progress;
  o.progress = [&](double f) { progress.push_back(f); };
  const auto res = run_validation(grid, topology, predicted, o);
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_TRUE(res->outputs_ok) << "a run did not match the FP64 reference";
  ASSERT_EQ(res->configs.size(), grid.size());
  ASSERT_EQ(progress.size(), grid.size());
  EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
  EXPECT_DOUBLE_EQ(progress.back(), 1.0);

  std::map<std::string, std::vector<const ValidatePoint*>> by_config;
  for (const ValidatePoint& p : res->points) by_config[p.config].push_back(&p);
  ASSERT_EQ(by_config.size(), grid.size());
  double ape_sum = 0;
  for (const ValidateConfig& c : res->configs) {
    const auto& pts = by_config.at(c.config);
    EXPECT_GE(pts.size(), 5u) << c.config;  // sequential, decompose, the three fusions at least
    EXPECT_EQ(std::count_if(pts.begin(), pts.end(), [](auto* p) { return p->chosen; }), 1)
        << c.config;
    EXPECT_EQ(std::count_if(pts.begin(), pts.end(), [](auto* p) { return p->best; }), 1)
        << c.config;
    double fastest = pts.front()->measured_s;
    for (const ValidatePoint* p : pts) {
      EXPECT_GT(p->measured_s, 0) << c.config;
      EXPECT_GT(p->predicted_s, 0) << c.config;
      fastest = std::min(fastest, p->measured_s);
      ape_sum += std::fabs(p->predicted_s - p->measured_s) / p->measured_s;
      if (p->best) {
        EXPECT_EQ(p->measured_s, c.best_s) << c.config;
      }
      if (p->chosen) {
        EXPECT_EQ(p->measured_s, c.chosen_s) << c.config;
      }
    }
    EXPECT_EQ(c.best_s, fastest) << c.config;
    EXPECT_DOUBLE_EQ(c.regret, c.chosen_s / c.best_s - 1) << c.config;
    EXPECT_GT(c.sequential_s, 0) << c.config;
  }
  EXPECT_NEAR(res->mape, ape_sum / static_cast<double>(res->points.size()), 1e-12);
  EXPECT_GE(res->worst_regret, res->mean_regret);
}

TEST(Validation, AnEmptyGridGivesNothingToJudge) {
  const hardware::Profile topology = hardware::make_preset("a6000x8").value();
  const auto res = run_validation({}, topology, topology, ValidateOptions{});
  ASSERT_TRUE(res.ok()) << res.error().message;
  EXPECT_TRUE(res->points.empty());
  EXPECT_TRUE(res->configs.empty());
}

}  // namespace
}  // namespace compass::study
