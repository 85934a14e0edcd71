// The accuracy module: MAPE per strategy and overall, regret, and the one tie rule for "the
// choice is the best".

#include <gtest/gtest.h>

#include "compass/study/accuracy.hpp"

namespace compass::study {
namespace {

ConfigTimes config(std::vector<double> pred, std::vector<double> ref, std::size_t chosen) {
  ConfigTimes c;
  for (std::size_t i = 0; i < pred.size(); ++i) c.strategies.push_back("s" + std::to_string(i));
  c.predicted_s = std::move(pred);
  c.reference_s = std::move(ref);
  c.chosen = chosen;
  return c;
}

TEST(Accuracy, FastestIsTheFirstMinimum) {
  EXPECT_EQ(fastest({3.0, 1.0, 2.0, 1.0}), 1u);
  EXPECT_EQ(fastest({2.0}), 0u);
}

TEST(Accuracy, MapePerStrategyAndOverall) {
  // s0: errors 10% and 30%; s1: errors 0% and 20%.
  const std::vector<ConfigTimes> cs = {config({1.1, 2.0}, {1.0, 2.0}, 0),
                                       config({1.3, 2.4}, {1.0, 2.0}, 0)};
  const Accuracy a = accuracy(cs);
  ASSERT_EQ(a.by_strategy.size(), 2u);
  EXPECT_EQ(a.by_strategy[0].strategy, "s0");
  EXPECT_NEAR(a.by_strategy[0].mape, 0.2, 1e-12);
  EXPECT_NEAR(a.by_strategy[0].worst.value, 0.3, 1e-12);
  EXPECT_EQ(a.by_strategy[0].worst.config, 1u);
  EXPECT_NEAR(a.by_strategy[1].mape, 0.1, 1e-12);
  EXPECT_NEAR(a.mape, 0.15, 1e-12);
  EXPECT_NEAR(a.worst.value, 0.3, 1e-12);
  EXPECT_EQ(a.worst.config, 1u);
}

TEST(Accuracy, RegretAndTheTieRule) {
  const std::vector<ConfigTimes> cs = {
      config({1, 1}, {2.0, 2.0}, 1),   // tie: the choice counts as the best
      config({1, 1}, {2.0, 2.2}, 1),   // 10% regret
      config({1, 1}, {2.0, 2.01}, 1),  // 0.5% regret
  };
  const Accuracy a = accuracy(cs);
  EXPECT_EQ(a.choice_is_best, 1);
  EXPECT_NEAR(a.regrets[1], 0.1, 1e-12);
  EXPECT_NEAR(a.mean_regret, (0.0 + 0.1 + 0.005) / 3, 1e-12);
  EXPECT_NEAR(a.worst_regret.value, 0.1, 1e-12);
  EXPECT_EQ(a.worst_regret.config, 1u);
  EXPECT_EQ(choice_within(a, 0.006), 2);
  EXPECT_EQ(choice_within(a, 0.2), 3);
  EXPECT_EQ(choice_within(a, 0.0), 1);
}

TEST(Accuracy, EmptyIsZero) {
  const Accuracy a = accuracy({});
  EXPECT_EQ(a.configs, 0u);
  EXPECT_EQ(a.mape, 0);
  EXPECT_EQ(a.choice_is_best, 0);
  EXPECT_TRUE(a.by_strategy.empty());
}

}  // namespace
}  // namespace compass::study
