// comm_plan_for: the profile's topology-aware rings mapped to rank numbers.

#include <gtest/gtest.h>

#include <algorithm>

#include "compass/hardware/presets.hpp"
#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

bool is_permutation_of_ranks(std::vector<int> v, int p) {
  std::sort(v.begin(), v.end());
  for (int i = 0; i < p; ++i)
    if (static_cast<int>(v.size()) != p || v[static_cast<std::size_t>(i)] != i) return false;
  return true;
}

TEST(CommPlan, MapsTheProfileRingsToRanks) {
  for (const std::string& name : hardware::preset_names()) {
    auto profile = hardware::make_preset(name);
    ASSERT_TRUE(profile.ok()) << name;
    const int n = std::min(profile->gpu_count(), 8);
    // A group that does not start at GPU 0, so GPU ordinals and ranks differ.
    std::vector<int> gpus;
    for (int g = profile->gpu_count() - n; g < profile->gpu_count(); ++g) gpus.push_back(g);
    auto plan = comm_plan_for(*profile, gpus);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.error().message;
    EXPECT_EQ(plan->gpus, gpus);
    EXPECT_TRUE(is_permutation_of_ranks(plan->ring, n)) << name;
    EXPECT_TRUE(is_permutation_of_ranks(plan->ring2, n)) << name;
    EXPECT_GE(plan->copy_engines, 1);
    // The plan generates a valid double-ring schedule.
    auto s = generate(testing::make_op(workload::OpKind::ag_gemm, 4 * n, 2 * n, 3, n),
                      Strategy{StrategyKind::fuse_double_ring, 0}, *plan);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->gpus, gpus);
  }
}

TEST(CommPlan, BadGroupIsAnError) {
  auto profile = hardware::make_preset("a6000x8");
  ASSERT_TRUE(profile.ok());
  EXPECT_FALSE(comm_plan_for(*profile, {0, 0}).ok());
  EXPECT_FALSE(comm_plan_for(*profile, {0, 99}).ok());
  EXPECT_FALSE(comm_plan_for(*profile, {}).ok());
}

}  // namespace
}  // namespace compass::schedule
