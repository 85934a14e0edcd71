// The megatron-core release a printed launch needs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compass/plan/megatron_flags.hpp"

namespace compass::plan {
namespace {

TEST(MegatronFlags, TheNewestFlagNamesTheRelease) {
  const std::vector<std::string> base = {"--tensor-model-parallel-size", "8", "--tp-comm-overlap",
                                         "--num-layers-per-virtual-pipeline-stage", "2"};
  const MegatronCoreNeed none = megatron_core_needed(base);
  EXPECT_EQ(none.minor, kMegatronCoreBaseMinor);
  EXPECT_TRUE(none.flag.empty());
  EXPECT_EQ(describe(none), "megatron-core 0.8 or newer");

  std::vector<std::string> uneven = base;
  uneven.insert(uneven.end(), {"--decoder-first-pipeline-num-layers", "7",
                               "--decoder-last-pipeline-num-layers", "7"});
  EXPECT_EQ(megatron_core_needed(uneven).minor, 9);
  EXPECT_EQ(megatron_core_needed(uneven).flag, "--decoder-first-pipeline-num-layers");

  std::vector<std::string> split = base;
  split.insert(split.end(), {"--account-for-embedding-in-pipeline-split",
                             "--account-for-loss-in-pipeline-split"});
  EXPECT_EQ(
      describe(megatron_core_needed(split)),
      "megatron-core 0.11 or newer (Megatron-LM's --account-for-embedding-in-pipeline-split)");

  // The newest wins whatever the order.
  std::vector<std::string> fp8 = {"--first-last-layers-bf16"};
  fp8.insert(fp8.end(), split.begin(), split.end());
  EXPECT_EQ(megatron_core_needed(fp8).minor, 12);
  EXPECT_EQ(megatron_core_needed(fp8).flag, "--first-last-layers-bf16");
  // Words are compared whole.
  EXPECT_EQ(megatron_core_needed(std::vector<std::string>{"--fp8-recipe-x"}).minor,
            kMegatronCoreBaseMinor);
}

}  // namespace
}  // namespace compass::plan
