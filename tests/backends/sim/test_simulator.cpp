// The simulator against closed forms: single transfers, sharing, rings, GEMMs, interference.

#include <gtest/gtest.h>

#include <cmath>

#include "compass/backends/sim/simulator.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/random_topology.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/model/estimate.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/schedule/generate.hpp"
#include "sim_fixtures.hpp"

namespace compass::backends::sim {
namespace {

using testing::ScheduleBuilder;

constexpr double kBw = 10e9;
constexpr double kLat = 2e-6;
constexpr std::int64_t kSimCols = 1024;  // one row = 2 KiB in bf16

SimResult run(const hardware::Profile& p, const schedule::Schedule& s, SimOptions o = {}) {
  auto r = simulate(p, s, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : SimResult{};
}

double duration(const SimResult& r, int id) { return r.tasks.at(id).end_s - r.tasks.at(id).start_s; }

TEST(Simulator, SingleTransferTakesLaunchLatencyAndSizeOverBandwidth) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  p.links[1].reverse_bandwidth_bytes_per_s = kBw / 2;  // switch -> gpu1 is slower
  ScheduleBuilder b(2, 512, kSimCols);
  const int t = b.transfer(0, 1, 512, 0);
  const SimResult r = run(p, b.s);
  const double bytes = 512.0 * kSimCols * 2;
  const double expect = p.overheads.copy_launch_s + 2 * kLat + bytes / (kBw / 2);
  EXPECT_NEAR(duration(r, t), expect, 1e-9);
  EXPECT_NEAR(r.total_s, expect, 1e-9);
  EXPECT_NEAR(isolated_task_time_s(p, b.s, b.s.tasks[t]), expect, 1e-12);
  EXPECT_EQ(r.transfers, 1);
  EXPECT_DOUBLE_EQ(r.transferred_bytes, bytes);
}

TEST(Simulator, FlowsShareOneDirectionFairlyAndOppositeDirectionsDoNotInterfere) {
  hardware::Profile p = testing::star_profile(3, kBw, kLat);
  testing::clear_overheads(p);
  const double bytes = 512.0 * kSimCols * 2;
  {
    ScheduleBuilder b(3, 512, kSimCols);
    const int a = b.transfer(0, 2, 512, 0);
    const int c = b.transfer(1, 2, 512, 1);
    const SimResult r = run(p, b.s);
    EXPECT_NEAR(duration(r, a), 2 * kLat + 2 * bytes / kBw, 1e-9);
    EXPECT_NEAR(duration(r, c), 2 * kLat + 2 * bytes / kBw, 1e-9);
    ASSERT_FALSE(r.busiest_links.empty());
    EXPECT_EQ(r.busiest_links[0].name, p.hop_name(hardware::Hop{2, false}));
    EXPECT_DOUBLE_EQ(r.busiest_links[0].bytes, 2 * bytes);
    EXPECT_NEAR(r.busiest_links[0].busy_s, 2 * bytes / kBw, 1e-9);
  }
  {
    ScheduleBuilder b(3, 512, kSimCols);
    const int a = b.transfer(0, 2, 512, 0);
    const int c = b.transfer(2, 0, 512, 1);
    const SimResult r = run(p, b.s);
    EXPECT_NEAR(duration(r, a), 2 * kLat + bytes / kBw, 1e-9);
    EXPECT_NEAR(duration(r, c), 2 * kLat + bytes / kBw, 1e-9);
  }
}

// Two flows into GPU 2 share its link; GPU 0's route has twice the latency of GPU 1's. Max-min
// fair sharing gives each half the link once both are running, whatever their latencies: GPU 1's
// flow runs alone for the latency difference D, then both share, then GPU 0's finishes alone,
// so the link is never idle. (SimGrid's CM02 default weights a flow's share by its route
// latency, which gives GPU 1's flow 3/2 of GPU 0's share here.)
TEST(Simulator, SharingIsMaxMinFairWhateverTheRouteLatency) {
  hardware::Profile p = testing::star_profile(3, kBw, kLat);
  testing::clear_overheads(p);
  const double extra = 2 * kLat;
  p.links[0].latency_s = kLat + extra;
  const double bytes = 512.0 * kSimCols * 2;
  ScheduleBuilder b(3, 512, kSimCols);
  const int far = b.transfer(0, 2, 512, 0);
  const int near = b.transfer(1, 2, 512, 1);
  const SimResult r = run(p, b.s);
  const double start = 2 * kLat;  // GPU 1's flow leaves its latency phase
  EXPECT_NEAR(r.tasks.at(near).end_s, start + 2 * bytes / kBw - extra, 1e-9);
  EXPECT_NEAR(r.tasks.at(far).end_s, start + 2 * bytes / kBw, 1e-9);
}

// The model and the simulator price every task of sequential and decompose by the same rules
// (one issue per staging copy, one launch per collective, the proportional interference rule),
// so on two GPUs, where no link is shared, they agree to rounding.
TEST(Simulator, ModelAndSimulatorAgreeOnDecomposeWithoutSharing) {
  for (const bool interference : {false, true}) {
    hardware::Profile p = testing::star_profile(2, kBw, kLat);
    p.interference = interference ? hardware::Interference{1.2, 1.5, 1.25}
                                  : hardware::Interference{1, 1, 1};
    const schedule::CommPlan plan = *schedule::comm_plan_for(p, {0, 1});
    workload::OperatorSpec op;
    op.kind = workload::OpKind::ag_gemm;
    op.m = 4096;
    op.n = 4096;
    op.k = 4096;
    op.tp = 2;
    for (const schedule::Strategy st :
         {schedule::Strategy{schedule::StrategyKind::sequential, 0},
          schedule::Strategy{schedule::StrategyKind::decompose, 2},
          schedule::Strategy{schedule::StrategyKind::decompose, 4}}) {
      const schedule::Schedule s = *schedule::generate(op, st, plan);
      const double sim = run(p, s).total_s;
      const double model = model::estimate(p, op, st, plan)->total_s;
      EXPECT_NEAR(model, sim, 1e-9 * sim)
          << schedule::to_string(st) << (interference ? " with" : " without") << " interference";
    }
  }
}

// The model's follower runs a fused program as the simulator's engine runs its schedule,
// latency included: a transfer waits out its route's latency before its bytes share the links.
// On a6000x8 the routes' latencies differ (cross-socket, switch, root port), and the tree
// reduce-scatter's transfers share the switches' uplinks: with the latency after the bytes
// the model was 2.7% above the simulation here.
TEST(Simulator, ModelFollowsTheSimulatorsLatencyOrderOnSharedPcieRoutes) {
  const hardware::Profile p = *hardware::make_preset("a6000x8");
  const schedule::CommPlan plan = *schedule::comm_plan_for(p, {0, 1, 2, 3, 4, 5, 6, 7});
  const workload::OperatorSpec op{
      .kind = workload::OpKind::gemm_rs, .m = 16384, .n = 5120, .k = 5120, .tp = 8};
  for (const schedule::StrategyKind kind :
       {schedule::StrategyKind::fuse_hier, schedule::StrategyKind::fuse_double_ring}) {
    const schedule::Strategy st{kind, 0};
    const schedule::Schedule s = *schedule::generate_for(p, op, st, plan);
    const double sim = run(p, s).total_s;
    const double model = model::estimate(p, op, st, plan)->total_s;
    EXPECT_NEAR(model, sim, 1e-4 * sim) << schedule::to_string(st);
  }
}

// A measured fused kernel (calibration.fused_gemm_overhead, fused_slowdown_copy_engine) prices
// the fused strategies' GEMMs in the simulator as in the model; sequential does not use them.
TEST(Simulator, FusedKernelCalibrationPricesFusedGemmsOnly) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  const schedule::CommPlan plan = *schedule::comm_plan_for(p, {0, 1});
  const workload::OperatorSpec op{
      .kind = workload::OpKind::ag_gemm, .m = 4096, .n = 4096, .k = 4096, .tp = 2};
  const schedule::Strategy ring{schedule::StrategyKind::fuse_ring, 0};
  const schedule::Strategy seq{schedule::StrategyKind::sequential, 0};
  const schedule::Schedule fused = *schedule::generate(op, ring, plan);
  const schedule::Schedule plain = *schedule::generate(op, seq, plan);
  const double fused_before = run(p, fused).total_s;
  const double plain_before = run(p, plain).total_s;
  p.calibration.fused_gemm_overhead = 1.3;
  p.calibration.fused_slowdown_copy_engine = 1.4;
  const double fused_after = run(p, fused).total_s;
  EXPECT_GT(fused_after, fused_before * 1.05);
  EXPECT_NEAR(run(p, plain).total_s, plain_before, 1e-12 * plain_before);
  const double model = model::estimate(p, op, ring, plan)->total_s;
  EXPECT_NEAR(model, fused_after, 0.005 * fused_after);
}

// Property on random machines of every family (p2p-off staging, NVSwitch, PCIe trees with
// NVLink bridges): a transfer alone takes its issue, its route's latency and its bytes at the
// route's bottleneck, in the simulator as in the model.
TEST(Simulator, LoneTransferOnRandomMachinesMatchesTheModel) {
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    const hardware::Profile p = hardware::random_topology(seed, 2 + static_cast<int>(seed % 7));
    const int from = static_cast<int>(seed % p.gpu_count());
    const int to = static_cast<int>((seed / 3 + 1 + from) % p.gpu_count());
    if (from == to) continue;
    ScheduleBuilder b(p.gpu_count(), 256, kSimCols);
    const int t = b.transfer(from, to, 256, 0);
    const SimResult r = run(p, b.s);
    const double bytes = 256.0 * kSimCols * 2;
    const double expect = p.overheads.copy_launch_s + model::transfer_time_s(p, from, to, bytes);
    EXPECT_NEAR(duration(r, t), expect, 1e-9 * expect) << "seed " << seed << " " << p.name;
  }
}

// p - 1 steps; at step s rank r forwards the shard it received at step s - 1.
schedule::Schedule ring_allgather(int p, std::int64_t shard_rows) {
  ScheduleBuilder b(p, shard_rows, kSimCols);
  std::vector<int> prev(p, -1);
  for (int s = 0; s + 1 < p; ++s) {
    std::vector<int> cur(p);
    for (int r = 0; r < p; ++r) {
      const int from_left = prev[(r - 1 + p) % p];
      cur[r] = b.transfer(r, (r + 1) % p, shard_rows, ((r - s) % p + p) % p,
                          from_left >= 0 ? std::vector<int>{from_left} : std::vector<int>{}, 0, s,
                          fmt::format("r{} ag step{} chunk{}", r, s, ((r - s) % p + p) % p));
    }
    prev = cur;
  }
  return b.s;
}

TEST(Simulator, RingAllGatherOnUniformRingMatchesClosedForm) {
  for (int p : {2, 4, 8}) {
    hardware::Profile prof = testing::ring_profile(p, kBw, kLat);
    const schedule::Schedule s = ring_allgather(p, 256);
    const SimResult r = run(prof, s);
    const double shard = 256.0 * kSimCols * 2;
    const double step = prof.overheads.copy_launch_s + kLat + shard / kBw;
    EXPECT_NEAR(r.total_s, (p - 1) * step, 1e-9) << "p=" << p;
    EXPECT_EQ(r.transfers, p * (p - 1));
  }
}

TEST(Simulator, GemmTakesTheModelTime) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  ScheduleBuilder b(2, 4096, kSimCols);
  const int g = b.gemm(0, 4096, kSimCols, kSimCols);
  const SimResult r = run(p, b.s);
  EXPECT_NEAR(duration(r, g), hardware::gemm_time_s(p, 4096, kSimCols, kSimCols, DType::bf16, 0), 1e-9);
  // Rank 1 has no compute work: all of the time is exposed for it, none for rank 0.
  ASSERT_EQ(r.exposed_comm_s_per_rank.size(), 2u);
  EXPECT_NEAR(r.exposed_comm_s_per_rank[0], 0.0, 1e-12);
}

TEST(Simulator, GemmSlowsOnlyWhileACopyEngineOfItsRankIsActive) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  testing::clear_overheads(p);
  p.interference.gemm_slowdown_copy_engine = 1.5;
  ScheduleBuilder b(2, 4096, kSimCols);
  const int g = b.gemm(0, 4096, 4 * kSimCols, kSimCols);
  const int t = b.transfer(0, 1, 64, 0);
  const SimResult r = run(p, b.s);
  const double work = hardware::gemm_compute_s(p, 4096, 4 * kSimCols, kSimCols, DType::bf16, 0);
  const double tc = duration(r, t);
  ASSERT_LT(tc * 1.5, work);
  EXPECT_NEAR(tc, 2 * kLat + 64.0 * kSimCols * 2 / kBw, 1e-9);
  // Work advances at 1/1.5 while the transfer is in flight, at full speed afterwards.
  EXPECT_NEAR(duration(r, g), tc + (work - tc / 1.5), 1e-9);
  SimOptions off;
  off.interference = false;
  EXPECT_NEAR(duration(run(p, b.s, off), g), work, 1e-9);
}

TEST(Simulator, TransferStartedBesideAGemmIsCappedBelowItsBottleneck) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  testing::clear_overheads(p);
  p.interference.comm_slowdown_beside_gemm = 1.25;
  ScheduleBuilder b(2, 4096, kSimCols);
  b.gemm(0, 4096, 8 * kSimCols, kSimCols);
  const int c = b.local_copy(0, 64);  // delays the transfer until the GEMM runs
  const int t = b.transfer(0, 1, 64, 0, {c});
  const SimResult r = run(p, b.s);
  EXPECT_NEAR(duration(r, t), 2 * kLat + 64.0 * kSimCols * 2 * 1.25 / kBw, 1e-9);
}

TEST(Simulator, CopyAndAddUseMemoryBandwidth) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  testing::clear_overheads(p);
  ScheduleBuilder b(2, 512, kSimCols);
  const int c = b.local_copy(0, 512);
  const SimResult r = run(p, b.s);
  EXPECT_NEAR(duration(r, c), 2.0 * 512 * kSimCols * 2 / 1e12, 1e-12);
  EXPECT_EQ(r.transfers, 0);
}

// The simulator charges each task the start its schedule names (Task::launch), not one derived
// from the strategy: the strategy stays fuse:ring while the launches change, and every
// overhead differs, so a simulator that ignored the launch would charge one value throughout.
TEST(Simulator, EachTaskPaysTheLaunchTheScheduleNames) {
  using schedule::Launch;
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  testing::clear_overheads(p);
  p.overheads = hardware::Overheads{1e-3, 3e-3, 2e-4, 5e-4};
  const auto overhead = [&](Launch l) {
    switch (l) {
      case Launch::kernel:
      case Launch::fused_kernel: return p.overheads.kernel_launch_s;
      case Launch::flag_wait: return p.overheads.flag_wait_s;
      case Launch::collective: return p.overheads.collective_launch_s;
      case Launch::in_collective: return 0.0;
      case Launch::copy: return p.overheads.copy_launch_s;
    }
    return -1.0;
  };
  const double bytes = 512.0 * kSimCols * 2;
  for (Launch l : {Launch::kernel, Launch::fused_kernel, Launch::flag_wait, Launch::collective,
                   Launch::in_collective, Launch::copy}) {
    ScheduleBuilder b(2, 512, kSimCols);
    const int t = b.transfer(0, 1, 512, 0);
    b.s.tasks[t].launch = l;
    ASSERT_EQ(b.s.strategy.kind, schedule::StrategyKind::fuse_ring);
    EXPECT_NEAR(duration(run(p, b.s), t), overhead(l) + 2 * kLat + bytes / kBw, 1e-9)
        << schedule::to_string(l);
  }
  // GEMMs: a launch of its own, or pieces of one fused kernel (a fused kernel's pieces share
  // one GEMM's waves: hardware::fused_chunk_compute_s over the rank's rows).
  const double alone = hardware::gemm_compute_s(p, 256, kSimCols, kSimCols, DType::bf16, 0);
  const double piece = hardware::fused_chunk_compute_s(p, 256, 512, kSimCols, kSimCols, DType::bf16, 0);
  ASSERT_GT(std::abs(alone - piece), 1e-9);  // the two cost rules differ at this shape
  struct Want {
    Launch first, second;
    double first_s, second_s;
  };
  for (const Want& w :
       {Want{Launch::kernel, Launch::kernel, 1e-3 + alone, 1e-3 + alone},
        Want{Launch::fused_kernel, Launch::flag_wait, 1e-3 + piece, 2e-4 + piece}}) {
    ScheduleBuilder b(2, 512, kSimCols, schedule::StrategyKind::sequential);
    const int g1 = b.gemm(0, 256, kSimCols, kSimCols);
    const int g2 = b.gemm(0, 256, kSimCols, kSimCols, {g1});
    b.s.tasks[g1].launch = w.first;
    b.s.tasks[g2].launch = w.second;
    const SimResult r = run(p, b.s);
    EXPECT_NEAR(duration(r, g1), w.first_s, 1e-9) << schedule::to_string(w.first);
    EXPECT_NEAR(duration(r, g2), w.second_s, 1e-9) << schedule::to_string(w.second);
  }
}

// The GEMM-RS / GEMM-AR fusions with fused GEMM groups (the fused kernel's form) simulate task
// by task: every task starts after its dependencies end, and the partials each rank stores
// into the owners' slots move (p - 1) M N elements in all (twice that for gemm_ar, whose
// all-gather moves each chunk to the p - 1 other ranks).
TEST(Simulator, FusedGemmRsGroupsRunTaskByTask) {
  const hardware::Profile p = *hardware::make_preset("a6000x8");
  const int tp = 4;
  auto plan = schedule::comm_plan_for(p, {0, 1, 2, 3});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  for (auto kind : {workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
    for (auto sk : {schedule::StrategyKind::fuse_all2all, schedule::StrategyKind::fuse_ring,
                    schedule::StrategyKind::fuse_double_ring}) {
      workload::OperatorSpec op{kind, 4096, 2048, 4096, tp, DType::bf16, ""};
      auto s = schedule::generate(op, schedule::Strategy{sk, 0}, *plan,
                                  schedule::GenerateOptions{true});
      ASSERT_TRUE(s.ok()) << s.error().message;
      const SimResult r = run(p, *s);
      SCOPED_TRACE(std::string(workload::to_string(kind)) + " " +
                   schedule::to_string(schedule::Strategy{sk, 0}));
      ASSERT_EQ(r.tasks.size(), s->tasks.size());
      for (const schedule::Task& t : s->tasks)
        for (int d : t.deps)
          EXPECT_GE(r.tasks[static_cast<std::size_t>(t.id)].start_s,
                    r.tasks[static_cast<std::size_t>(d)].end_s - 1e-12)
              << t.name;
      const double chunked = (tp - 1.0) * op.m * op.n * 2;
      EXPECT_NEAR(r.transferred_bytes, kind == workload::OpKind::gemm_ar ? 2 * chunked : chunked,
                  1e-6 * chunked);
      EXPECT_GT(r.total_s, 0);
    }
}

TEST(Simulator, BadInputIsAnError) {
  hardware::Profile p = testing::star_profile(2, kBw, kLat);
  {
    ScheduleBuilder b(2, 64, kSimCols);
    b.transfer(0, 1, 64, 0);
    b.s.gpus = {0, 7};
    auto r = simulate(p, b.s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("GPU 7"), std::string::npos) << r.error().message;
  }
  {
    ScheduleBuilder b(2, 64, kSimCols);
    b.transfer(0, 1, 64, 0);
    b.s.gpus = {1, 1};
    auto r = simulate(p, b.s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("same GPU"), std::string::npos) << r.error().message;
  }
  {
    hardware::Profile q = p;
    q.routes.erase(q.routes.begin());  // 0 -> 1
    ScheduleBuilder b(2, 64, kSimCols);
    b.transfer(0, 1, 64, 0);
    auto r = simulate(q, b.s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("no route from GPU 0 to GPU 1"), std::string::npos)
        << r.error().message;
  }
  {
    hardware::Profile q = p;
    q.links[0].bandwidth_bytes_per_s = 0;
    ScheduleBuilder b(2, 64, kSimCols);
    b.transfer(0, 1, 64, 0);
    auto r = simulate(q, b.s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("'l0'"), std::string::npos) << r.error().message;
  }
  {
    // Engine 0 of rank 0 runs A then B, engine 0 of rank 1 runs C then D; A needs D, C needs B:
    // acyclic dependencies, but the resource order deadlocks.
    ScheduleBuilder b(2, 64, kSimCols);
    b.transfer(0, 1, 16, 0, {3});
    b.transfer(0, 1, 16, 1);
    b.transfer(1, 0, 16, 0, {1});
    b.transfer(1, 0, 16, 1);
    auto r = simulate(p, b.s);
    ASSERT_FALSE(r.ok());
    const std::string& m = r.error().message;
    EXPECT_TRUE(m.find("deadlocks") != std::string::npos || m.find("cycle") != std::string::npos)
        << m;
  }
  {
    ScheduleBuilder b(2, 64, kSimCols);
    b.transfer(0, 1, 64, 0, {5});  // dependency out of range: schedule::validate names it
    EXPECT_FALSE(simulate(p, b.s).ok());
  }
}

TEST(Simulator, RepeatedRunsInForkedChildrenAgree) {
  hardware::Profile prof = testing::ring_profile(4, kBw, kLat);
  const schedule::Schedule s = ring_allgather(4, 128);
  const SimResult a = run(prof, s);
  const SimResult b = run(prof, s);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace compass::backends::sim
