// The one pricing rule of a schedule's tasks (schedule/prices.hpp), which the model's timeline
// and the simulator both read: each kind of task against the hardware rule it names.

#include <gtest/gtest.h>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/schedule/prices.hpp"
#include "schedule_cases.hpp"

namespace compass::schedule {
namespace {

using workload::OpKind;

TEST(TaskPrices, EveryKindOfTaskByItsRule) {
  const hardware::Profile prof = *hardware::make_preset("a6000x8");
  const workload::OperatorSpec op = testing::make_op(OpKind::gemm_rs, 512, 256, 1024, 4);
  for (const Strategy& st :
       {Strategy{StrategyKind::fuse_ring, 0}, Strategy{StrategyKind::decompose, 2}}) {
    auto s = generate(op, st, default_comm_plan(4));
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto prices = task_prices(prof, *s);
    ASSERT_TRUE(prices.ok()) << prices.error().message;
    ASSERT_EQ(prices->size(), s->tasks.size());
    // A fused kernel's pieces share the rows of all its pieces of the same N and K.
    std::vector<std::int64_t> fused_rows(4, 0);
    for (const Task& t : s->tasks)
      if (in_fused_kernel(t)) fused_rows[static_cast<std::size_t>(t.resource.rank)] += t.dst.rows;
    int kinds[4] = {0, 0, 0, 0};
    for (const Task& t : s->tasks) {
      const TaskPrice& pr = (*prices)[static_cast<std::size_t>(t.id)];
      const int gpu = s->gpus[static_cast<std::size_t>(t.resource.rank)];
      EXPECT_EQ(pr.fixed_s, launch_cost_s(prof, t.launch)) << task_label(t);
      ++kinds[static_cast<int>(t.kind)];
      switch (t.kind) {
        case TaskKind::gemm:
          EXPECT_EQ(pr.gemm_s, in_fused_kernel(t)
                                   ? hardware::fused_chunk_compute_s(
                                         prof, t.dst.rows,
                                         fused_rows[static_cast<std::size_t>(t.resource.rank)],
                                         t.dst.cols, t.src.cols, op.dtype, gpu)
                                   : hardware::gemm_compute_s(prof, t.dst.rows, t.dst.cols,
                                                              t.src.cols, op.dtype, gpu))
              << task_label(t);
          EXPECT_EQ(pr.bytes, 0);
          break;
        case TaskKind::transfer:
          EXPECT_TRUE(pr.crosses) << task_label(t);  // every rank on its own GPU
          EXPECT_EQ(pr.bytes, task_bytes(*s, t));
          EXPECT_EQ(pr.local_s, 0.0);
          break;
        case TaskKind::add:
          EXPECT_FALSE(pr.crosses);
          EXPECT_EQ(pr.local_s, hardware::add_s(prof, gpu, static_cast<double>(task_bytes(*s, t))));
          break;
        case TaskKind::copy:
          EXPECT_FALSE(pr.crosses);
          EXPECT_EQ(pr.local_s,
                    hardware::copy_s(prof, gpu, static_cast<double>(task_bytes(*s, t))));
          break;
      }
    }
    EXPECT_GT(kinds[static_cast<int>(TaskKind::gemm)], 0);
    EXPECT_GT(kinds[static_cast<int>(TaskKind::transfer)], 0);
    EXPECT_GT(kinds[static_cast<int>(TaskKind::add)], 0);
    if (st.kind == StrategyKind::decompose) {
      EXPECT_GT(kinds[static_cast<int>(TaskKind::copy)], 0);  // staging copies
    }
  }
}

TEST(TaskPrices, ALocalCopyNeedsAMemoryBandwidth) {
  hardware::Profile prof = *hardware::make_preset("a6000x8");
  const workload::OperatorSpec op = testing::make_op(OpKind::gemm_rs, 512, 256, 1024, 4);
  auto s = generate(op, Strategy{StrategyKind::decompose, 2}, default_comm_plan(4));
  ASSERT_TRUE(s.ok());
  for (hardware::DeviceSpec& d : prof.devices) d.memory_bandwidth_bytes_per_s = 0;
  prof.calibration.copy_bandwidth_bytes_per_s.reset();
  auto prices = task_prices(prof, *s);
  ASSERT_FALSE(prices.ok());
  EXPECT_NE(prices.error().message.find("memory_bandwidth_bytes_per_s"), std::string::npos)
      << prices.error().message;
}

}  // namespace
}  // namespace compass::schedule
