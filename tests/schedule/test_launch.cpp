// Every generated task says how it starts (Task::launch), consistently with its kind, its
// strategy and the tasks before it, over the whole op x strategy x p x shape x plan grid; and
// reading a schedule back from JSON gives every task the same launch.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using testing::Case;

class LaunchProperties : public ::testing::TestWithParam<Case> {};

TEST_P(LaunchProperties, EveryTaskSaysHowItStartsConsistently) {
  const Case& c = GetParam();
  if (!testing::feasible(c.op, c.strategy)) GTEST_SKIP() << "infeasible: " << c.label();
  auto r = generate(c.op, c.strategy, c.plan(), c.options());
  ASSERT_TRUE(r.ok()) << c.label() << ": " << r.error().message;
  const Schedule& s = *r;
  const bool fused = is_fused(s.strategy.kind);
  std::set<int> fused_kernel_of;  // ranks whose fused kernel has been launched
  for (const Task& t : s.tasks) {
    const std::string where = c.label() + ": " + task_label(t) + " launch " +
                              std::string(to_string(t.launch));
    const int rank = t.resource.rank;
    switch (t.kind) {
      case TaskKind::gemm:
        if (!fused) {
          EXPECT_EQ(t.launch, Launch::kernel) << where;
        } else if (fused_kernel_of.insert(rank).second) {
          EXPECT_EQ(t.launch, Launch::fused_kernel) << where << " (the rank's first GEMM)";
        } else {
          EXPECT_EQ(t.launch, Launch::flag_wait) << where << " (a later GEMM piece)";
        }
        break;
      case TaskKind::transfer:
        if (fused || s.owner(t.src) == s.owner(t.dst)) {
          EXPECT_EQ(t.launch, Launch::copy) << where;
        } else if (t.launch == Launch::collective) {
          EXPECT_LE(t.step, 0) << where << " (a collective starts at its first step)";
        } else {
          EXPECT_EQ(t.launch, Launch::in_collective) << where;
          EXPECT_GT(t.step, 0) << where << " (a later step)";
        }
        break;
      case TaskKind::add:
        EXPECT_EQ(t.launch, fused ? Launch::flag_wait : Launch::in_collective) << where;
        break;
      case TaskKind::copy:
        EXPECT_EQ(t.launch, Launch::copy) << where;
        break;
    }
    // Fused strategies launch no collective kernels; the others no fused kernels.
    if (fused)
      EXPECT_TRUE(t.launch != Launch::collective && t.launch != Launch::in_collective) << where;
    else
      EXPECT_TRUE(t.launch != Launch::fused_kernel && t.launch != Launch::flag_wait) << where;
  }
  // The launches are not written to the JSON (its format is unchanged); reading it back sets
  // them by the same rule, so the round trip gives the same schedule.
  const std::string text = schedule_to_json(s);
  EXPECT_EQ(text.find("launch"), std::string::npos);
  auto back = schedule_from_json(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->tasks.size(), s.tasks.size());
  for (std::size_t i = 0; i < s.tasks.size(); ++i)
    EXPECT_EQ(back->tasks[i].launch, s.tasks[i].launch) << c.label() << ": task " << i;
}

INSTANTIATE_TEST_SUITE_P(Grid, LaunchProperties, ::testing::ValuesIn(testing::all_cases()),
                         testing::case_name);

// The rule on a hand-made schedule: the launches follow the strategy, not the task names or
// resources, and assign_launches overwrites whatever was there.
TEST(Launch, AssignFollowsTheStrategy) {
  auto make = [](StrategyKind kind) {
    Schedule s;
    s.op = testing::make_op(workload::OpKind::ag_gemm, 4, 2, 2, 2);
    s.strategy = Strategy{kind, kind == StrategyKind::decompose ? 1 : 0};
    s.gpus = {0, 1};
    s.copy_engines = 1;
    s.buffers = {Buffer{"x", 0, 2, 2, BufferRole::input}, Buffer{"y", 1, 4, 2, BufferRole::output},
                 Buffer{"y0", 0, 4, 2, BufferRole::scratch}};
    const Region x{0, 0, 2, 0, 2}, y{1, 0, 2, 0, 2}, y0{2, 0, 2, 0, 2};
    auto task = [&](TaskKind k, Resource res, Region src, Region dst, int step) {
      Task t;
      t.id = static_cast<int>(s.tasks.size());
      t.kind = k;
      t.resource = res;
      t.src = src;
      t.dst = dst;
      t.step = step;
      t.launch = Launch::in_collective;  // overwritten
      s.tasks.push_back(t);
    };
    task(TaskKind::transfer, Resource{0, ResourceKind::copy_engine, 0}, x, y, 0);
    task(TaskKind::transfer, Resource{0, ResourceKind::copy_engine, 0}, x, y, 1);
    task(TaskKind::transfer, Resource{0, ResourceKind::copy_engine, 0}, x, y0, 0);  // same rank
    task(TaskKind::copy, Resource{0, ResourceKind::copy_engine, 0}, x, y0, -1);
    task(TaskKind::add, Resource{1, ResourceKind::compute, 0}, y, y, 0);
    assign_launches(s);
    std::vector<Launch> out;
    for (const Task& t : s.tasks) out.push_back(t.launch);
    return out;
  };
  EXPECT_EQ(make(StrategyKind::sequential),
            (std::vector<Launch>{Launch::collective, Launch::in_collective, Launch::copy,
                                 Launch::copy, Launch::in_collective}));
  EXPECT_EQ(make(StrategyKind::decompose), make(StrategyKind::sequential));
  EXPECT_EQ(make(StrategyKind::fuse_ring),
            (std::vector<Launch>{Launch::copy, Launch::copy, Launch::copy, Launch::copy,
                                 Launch::flag_wait}));
}

}  // namespace
}  // namespace compass::schedule
