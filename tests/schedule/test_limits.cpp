// Limits of schedule building: the decomposition degree and the task count are capped before
// any work, and the largest schedules within the caps build (O(n log n) in tasks: see
// bench/bench_schedule.cpp for the time per task).

#include <gtest/gtest.h>

#include "compass/schedule/limits.hpp"
#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using testing::make_op;
using workload::OpKind;

TEST(Limits, DecomposeDegreeIsCapped) {
  auto parsed = parse_strategy("decompose:100000");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("at most 4096"), std::string::npos)
      << parsed.error().message;
  EXPECT_TRUE(parse_strategy("decompose:4096").ok());

  auto s = generate(make_op(OpKind::ag_gemm, 800000, 64, 64, 2),
                    Strategy{StrategyKind::decompose, 100000}, default_comm_plan(2));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("at most 4096"), std::string::npos) << s.error().message;
}

TEST(Limits, TaskCountIsCappedBeforeBuilding) {
  // decompose:4096 at tp 64 would be about 34 million tasks.
  auto s = generate(make_op(OpKind::gemm_rs, 4096 * 64, 64, 64 * 64, 64),
                    Strategy{StrategyKind::decompose, 4096}, default_comm_plan(64));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("more than the limit"), std::string::npos)
      << s.error().message;
}

TEST(Limits, LargestDecompositionBuilds) {
  // One row per part: 4096 parts x 8 ranks, about 300k tasks. A builder that compares every
  // access with every earlier one of its buffer needs ~10^10 comparisons here.
  for (OpKind kind : {OpKind::ag_gemm, OpKind::gemm_rs}) {
    auto s = generate(make_op(kind, 4096 * 8, 64, 64, 8), Strategy{StrategyKind::decompose, 4096},
                      default_comm_plan(8));
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_GT(s->tasks.size(), 4096u * 8u * 2u);
    EXPECT_LE(static_cast<std::int64_t>(s->tasks.size()), kMaxTasks);
    EXPECT_TRUE(validate(*s).ok());
  }
}

}  // namespace
}  // namespace compass::schedule
