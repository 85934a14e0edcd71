// Hand-computed cases for the fused-program follower (model/program.hpp), which every fused
// strategy's estimate runs: launch, flag wait and copy issue, a transfer's bytes and latency,
// the two interference rules, a program that cannot finish, and items that take no time.

#include <gtest/gtest.h>

#include <cmath>

#include "compass/hardware/flows.hpp"
#include "compass/model/program.hpp"
#include "compass/schedule/patterns.hpp"
#include "compass/schedule/program.hpp"
#include "support/builders.hpp"
#include "test_helpers.hpp"

namespace compass::model {
namespace {

using detail::FollowCosts;
using detail::FusedProgram;
using testing::uniform_switch;

constexpr double kBw = 10e9, kLat = 1e-6;  // per GPU link; a route crosses two
constexpr double kRowBytes = 1000;

detail::Followed follow(FusedProgram pr, const FollowCosts& costs, bool work = true) {
  const hardware::Profile prof = uniform_switch(2, kBw, kLat);
  detail::prepare_program(pr, prof, {0, 1}, kRowBytes);
  hardware::sharing::IncrementalMaxmin sharing;
  return detail::follow_program(pr, costs, work, sharing);
}

// Rank 0 computes a piece and sends it; rank 1 adds it when it lands.
FusedProgram gemm_send_add(double gemm_s, double add_s, std::int64_t rows) {
  FusedProgram pr;
  pr.items = {{{false, gemm_s, -1}}, {{true, add_s, 0}}};
  pr.sends = {{0, 1, -1, /*ready_item=*/0, -1, rows}};
  return pr;
}

TEST(FusedProgram, GemmSendAddByHand) {
  const double launch = 5e-6, issue = 3e-6, flag = 2e-6, gemm = 40e-6, add = 7e-6;
  const std::int64_t rows = 500;  // 500 KB: 50 us at 10 GB/s
  const detail::Followed f =
      follow(gemm_send_add(gemm, add, rows), FollowCosts{launch, issue, flag, 1, 1});
  const double lands = launch + gemm + issue + rows * kRowBytes / kBw + 2 * kLat;
  EXPECT_NEAR(f.end_s, lands + flag + add, 1e-15);
  EXPECT_DOUBLE_EQ(f.work_s, gemm);  // the busiest rank's work
  // The communication alone: no work and no overheads.
  const detail::Followed comm = follow(gemm_send_add(gemm, add, rows), FollowCosts{}, false);
  EXPECT_NEAR(comm.end_s, rows * kRowBytes / kBw + 2 * kLat, 1e-15);
  EXPECT_EQ(comm.work_s, 0.0);
}

// Two transfers into one GPU share its link direction max-min, then the second one runs alone.
TEST(FusedProgram, TransfersShareALinkMaxMin) {
  FusedProgram pr;
  pr.items = {{}, {}, {}};
  pr.sends = {{0, 2, -1, -1, -1, 100}, {1, 2, -1, -1, -1, 300}};
  const hardware::Profile prof = uniform_switch(3, kBw, kLat);
  detail::prepare_program(pr, prof, {0, 1, 2}, kRowBytes);
  hardware::sharing::IncrementalMaxmin sharing;
  const detail::Followed f = detail::follow_program(pr, FollowCosts{}, true, sharing);
  // Both at half rate until the first has moved its 100 KB (20 us), then 200 KB at full rate.
  EXPECT_NEAR(f.end_s, 2 * 100 * kRowBytes / kBw + 200 * kRowBytes / kBw + 2 * kLat, 1e-15);
}

// A transfer that starts while a GEMM runs at either end counts its bytes fc times.
TEST(FusedProgram, TransferBesideAGemmCountsItsBytesFcTimes) {
  FusedProgram pr;
  pr.items = {{}, {{false, 1e-3, -1}}};  // rank 1 computes for 1 ms from the start
  pr.sends = {{0, 1, -1, -1, -1, 100}};  // ready at once: starts after its copy issue
  const double issue = 3e-6, fc = 2;
  const detail::Followed f = follow(pr, FollowCosts{0, issue, 0, 1, fc});
  EXPECT_NEAR(f.end_s, 1e-3, 1e-15);  // the GEMM ends last
  // Without the GEMM the transfer alone decides the end, at its plain size.
  pr.items[1].clear();
  EXPECT_NEAR(follow(pr, FollowCosts{0, issue, 0, 1, fc}).end_s,
              issue + 100 * kRowBytes / kBw + 2 * kLat, 1e-15);
  // With the GEMM short enough to end first, the transfer's doubled bytes decide it.
  pr.items[1] = {{false, 1e-6, -1}};
  pr.sends[0].rows = 1000;  // 100 us plain
  const detail::Followed beside = follow(pr, FollowCosts{0, 0, 0, 1, fc});
  EXPECT_NEAR(beside.end_s, fc * 1000 * kRowBytes / kBw + 2 * kLat, 1e-15);
}

// A GEMM advances at 1/fg while its rank has a transfer under way (start to landing).
TEST(FusedProgram, GemmBesideATransferAdvancesAtOneOverFg) {
  FusedProgram pr;
  pr.items = {{{false, 1e-3, -1}}, {}};
  pr.sends = {{0, 1, -1, -1, -1, 100}};  // 10 us of bytes, lands 2 us later
  const double issue = 3e-6, fg = 1.5;
  const detail::Followed f = follow(pr, FollowCosts{0, issue, 0, fg, 1});
  const double under_way = 100 * kRowBytes / kBw + 2 * kLat;  // from `issue` on
  // While it is under way the GEMM does under_way / fg of its work; the rest takes as long.
  EXPECT_NEAR(f.end_s, 1e-3 + under_way * (1 - 1 / fg), 1e-15);
}

// An item waiting for a transfer whose data is that same item never runs: no time at all.
TEST(FusedProgram, AProgramThatCannotFinishGivesNaN) {
  FusedProgram pr;
  pr.items = {{{false, 1e-6, 0}}, {}};
  pr.sends = {{0, 1, -1, /*ready_item=*/0, -1, 10}};
  EXPECT_TRUE(std::isnan(follow(pr, FollowCosts{}).end_s));
}

// Without work or overheads (the communication alone) an item ends as it begins instead of by
// compute events at the same instant: the same end, and the same start and end of every
// transfer and item, as the events give when they are followed (items of no work, followed
// with their work), on every fused strategy's program on a6000x8.
TEST(FusedProgram, ItemsThatTakeNoTimeEndAsTheyBegin) {
  const compass::testing::PresetPlan pp = compass::testing::preset_plan("a6000x8", 8);
  const hardware::Profile& prof = pp.profile;
  const schedule::CommPlan& plan = pp.plan;
  using schedule::StrategyKind;
  int followed = 0;
  for (workload::OpKind kind :
       {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
    for (StrategyKind sk :
         {StrategyKind::fuse_ring, StrategyKind::fuse_double_ring, StrategyKind::fuse_all2all,
          StrategyKind::fuse_hier, StrategyKind::fuse_synth}) {
      const workload::OperatorSpec op = compass::testing::op_of(kind, 8192, 5120, 5120, 8);
      const schedule::Program program = schedule::program(op, schedule::Strategy{sk, 0}, plan,
                                                          schedule::tree_rs_costs(prof, plan, op));
      FusedProgram pr = detail::price_program(program, prof, op, plan.gpus.front());
      detail::prepare_program(pr, prof, plan.gpus, schedule::program_row_bytes(op));
      FusedProgram no_work = pr;
      for (std::vector<FusedProgram::Item>& rank : no_work.items)
        for (FusedProgram::Item& it : rank) it.work = 0;
      hardware::sharing::IncrementalMaxmin sharing;
      detail::FollowedTimes instant, by_events;
      const detail::Followed a =
          detail::follow_program(pr, FollowCosts{}, false, sharing, &instant);
      const detail::Followed b =
          detail::follow_program(no_work, FollowCosts{}, true, sharing, &by_events);
      SCOPED_TRACE(schedule::to_string(schedule::Strategy{sk, 0}));
      ASSERT_TRUE(std::isfinite(a.end_s));
      EXPECT_GT(a.end_s, 0.0);
      EXPECT_EQ(a.end_s, b.end_s);
      EXPECT_EQ(instant.send_start_s, by_events.send_start_s);
      EXPECT_EQ(instant.send_end_s, by_events.send_end_s);
      EXPECT_EQ(instant.item_start_s, by_events.item_start_s);
      EXPECT_EQ(instant.item_end_s, by_events.item_end_s);
      ++followed;
    }
  EXPECT_EQ(followed, 15);
}

}  // namespace
}  // namespace compass::model
