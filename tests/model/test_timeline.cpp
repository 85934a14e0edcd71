// The timeline oracle: the estimate of every op x strategy x p against the timeline of the
// generated schedule under the same cost rules, on every preset and on random machines. Every
// strategy's schedule is its program lowered, which the timeline follows as the estimate does:
// equal to the last bit. The followers themselves are checked against every task's own events
// (evaluate_task_timeline), within the bounds docs/model.md ("Timeline oracle") gives.
// Prints the relative difference per strategy (worst, median).

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <string>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/random_topology.hpp"
#include "compass/model/estimate.hpp"
#include "compass/model/timeline.hpp"
#include "compass/schedule/generate.hpp"
#include "test_helpers.hpp"

namespace compass::model {
namespace {

using schedule::Strategy;
using schedule::StrategyKind;
using workload::OpKind;
using testing::op_of;

std::vector<int> first(int n) {
  std::vector<int> g(static_cast<std::size_t>(n));
  std::iota(g.begin(), g.end(), 0);
  return g;
}

// One comparison: the timeline's makespan and the estimate's total.
struct Row {
  std::string where;
  double timeline_s = 0;
  double estimate_s = 0;
  OpKind kind = OpKind::ag_gemm;
  int copy_engines = 1;  // of the plan
  double rel() const { return std::abs(estimate_s - timeline_s) / timeline_s; }
};

// Every op x strategy x p in {2, 4, 8} (those the machine has GPUs for), two shapes, on `prof`;
// with `task_by_task` the timeline is evaluate_task_timeline's, else evaluate_timeline's.
void compare(const std::string& name, const hardware::Profile& prof, const ModelKnobs& knobs,
             bool task_by_task, std::map<std::string, std::vector<Row>>& rows) {
  const std::vector<Strategy> strategies = schedule::all_strategies(4);
  for (int p : {2, 4, 8}) {
    if (p > prof.gpu_count()) continue;
    auto plan = schedule::comm_plan_for(prof, first(p));
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.error().message;
    for (OpKind kind : {OpKind::ag_gemm, OpKind::gemm_rs, OpKind::gemm_ar})
      for (auto [m, n, k] : {std::array<std::int64_t, 3>{4096, 8192, 8192},
                             std::array<std::int64_t, 3>{1024, 4096, 4096}}) {
        const workload::OperatorSpec op = op_of(kind, m, n, k, p);
        for (const Strategy& st : strategies) {
          const std::string where = fmt::format("{} {} tp{} M{} N{} K{} {}", name,
                                                workload::to_string(kind), p, m, n, k,
                                                schedule::to_string(st));
          // The estimate as plan and sweep ask for it (estimate().total_s with both knobs on).
          auto e = estimate_time_s(prof, op, st, *plan, knobs);
          ASSERT_TRUE(e.ok()) << where << ": " << e.error().message;
          auto s = schedule::generate_for(prof, op, st, *plan);
          ASSERT_TRUE(s.ok()) << where << ": " << s.error().message;
          auto t = task_by_task ? evaluate_task_timeline(prof, *s, knobs)
                                : evaluate_timeline(prof, *s, knobs);
          ASSERT_TRUE(t.ok()) << where << ": " << t.error().message;
          ASSERT_GT(t->makespan_s, 0) << where;
          const std::string key = st.kind == StrategyKind::decompose ? "decompose:d"
                                                                      : schedule::to_string(st);
          rows[key].push_back(Row{where, t->makespan_s, *e, kind, plan->copy_engines});
        }
      }
  }
}

// The documented bound of one strategy: the median and the worst |estimate - timeline| /
// timeline over all rows (docs/model.md, "Timeline oracle").
struct Bound {
  double median = 0;
  double p90 = 0;
  double worst = 0;
};

// Runs every comparison under `knobs`, prints the distribution per strategy, checks it against
// `bounds` and returns the rows.
std::map<std::string, std::vector<Row>> check_against(const ModelKnobs& knobs, bool task_by_task,
                                                      const std::map<std::string, Bound>& bounds) {
  std::map<std::string, std::vector<Row>> rows;
  for (const std::string& name : hardware::preset_names())
    compare(name, *hardware::make_preset(name), knobs, task_by_task, rows);
  // Random machines of 8 GPUs (hardware::random_topology: PCIe trees, one root, switch chains,
  // NVSwitch, staged; 1 to 4 copy engines).
  for (std::uint64_t seed : {3u, 11u, 29u, 47u})
    compare(fmt::format("random{}", seed), hardware::random_topology(seed, 8), knobs,
            task_by_task, rows);
  // A machine whose fused kernel was measured (Calibration::fused_gemm_overhead and
  // fused_slowdown_copy_engine): both sides must read the measured factors.
  hardware::Profile calibrated = *hardware::make_preset("a6000x8");
  calibrated.calibration.fused_gemm_overhead = 1.2;
  calibrated.calibration.fused_slowdown_copy_engine = 1.3;
  compare("a6000x8+fused-calibrated", calibrated, knobs, task_by_task, rows);
  EXPECT_EQ(rows.size(), bounds.size());
  for (auto& [strategy, list] : rows) {
    std::vector<double> rel;
    for (const Row& r : list) rel.push_back(r.rel());
    std::sort(rel.begin(), rel.end());
    const auto worst = std::max_element(
        list.begin(), list.end(), [](const Row& a, const Row& b) { return a.rel() < b.rel(); });
    const double median = rel[rel.size() / 2];
    const double p90 = rel[rel.size() * 9 / 10];
    std::printf("%-17s n=%3zu median %6.3f%%  p90 %6.3f%%  worst %7.3f%%  (%s: timeline %.4g s, "
                "estimate %.4g s)\n",
                strategy.c_str(), rel.size(), 100 * median, 100 * p90,
                100 * rel.back(), worst->where.c_str(), worst->timeline_s, worst->estimate_s);
    if (const char* env = std::getenv("COMPASS_TIMELINE_WORST")) {
      std::vector<const Row*> sorted;
      for (const Row& r : list) sorted.push_back(&r);
      std::sort(sorted.begin(), sorted.end(),
                [](const Row* a, const Row* b) { return a->rel() > b->rel(); });
      const std::size_t shown = std::min(sorted.size(), static_cast<std::size_t>(std::atoi(env)));
      for (std::size_t i = 0; i < shown; ++i)
        std::printf("    %+7.3f%%  %s\n",
                    100 * (sorted[i]->estimate_s - sorted[i]->timeline_s) / sorted[i]->timeline_s,
                    sorted[i]->where.c_str());
    }
    const auto b = bounds.find(strategy);
    if (b == bounds.end()) {
      ADD_FAILURE() << "no bound for " << strategy;
      continue;
    }
    EXPECT_LE(median, b->second.median) << strategy;
    EXPECT_LE(p90, b->second.p90) << strategy;
    EXPECT_LE(worst->rel(), b->second.worst) << strategy << ": " << worst->where;
  }
  return rows;
}

// By hand: a bare ring all-gather on one switch moves every shard over its own link direction
// (nothing shared), one copy-engine transfer after the other: each step costs the copy issue,
// the bytes at link bandwidth and the route latency (two links of `lat`).
TEST(Timeline, RingAllGatherByHand) {
  const double bw = 10e9, lat = 1e-6;
  const hardware::Profile prof = testing::uniform_switch(4, bw, lat);
  const schedule::Schedule s = schedule::ring_allgather(4, 256, 1024);
  auto t = evaluate_timeline(prof, s);
  ASSERT_TRUE(t.ok()) << t.error().message;
  const double step = prof.overheads.copy_launch_s + 256.0 * 1024 * 2 / bw + 2 * lat;
  EXPECT_NEAR(t->makespan_s, 3 * step, 1e-12);
  // Without overheads only the bytes and the latency remain.
  auto bare = evaluate_timeline(prof, s, ModelKnobs{true, false});
  ASSERT_TRUE(bare.ok());
  EXPECT_NEAR(bare->makespan_s, 3 * (256.0 * 1024 * 2 / bw + 2 * lat), 1e-12);
  // Every transfer starts when its predecessor on the ring has landed.
  for (const schedule::Task& task : s.tasks)
    for (int d : task.deps) EXPECT_GE(t->start_s[task.id], t->end_s[d]);
}

// Every strategy, every operator: the estimate follows the strategy's program and the timeline
// follows the same program read back from the generated schedule (schedule::program_of for
// the fused strategies, the collective program whose lowering it is for sequential and
// decompose:d), under the same prices and costs, so the two are equal to the last bit.
void expect_equal(const std::map<std::string, std::vector<Row>>& rows) {
  EXPECT_EQ(rows.size(), 7u);
  for (const auto& [strategy, list] : rows) {
    ASSERT_FALSE(list.empty()) << strategy;
    for (const Row& r : list) EXPECT_EQ(r.estimate_s, r.timeline_s) << r.where;
  }
}

const std::map<std::string, Bound> kEqual = {
    {"sequential", {0, 0, 0}},   {"decompose:d", {0, 0, 0}},      {"fuse:all2all", {0, 0, 0}},
    {"fuse:ring", {0, 0, 0}},    {"fuse:double-ring", {0, 0, 0}}, {"fuse:hier", {0, 0, 0}},
    {"fuse:synth", {0, 0, 0}},
};

// The estimate plan and sweep use, against the timeline with the same interference and overheads.
TEST(Timeline, OracleAgreesWithTheEstimate) {
  expect_equal(check_against(ModelKnobs{}, false, kEqual));
}

// Without interference and fixed overheads: what is left is the pattern, the sharing of links
// and the order of the tasks.
TEST(Timeline, OracleAgreesWithTheBareEstimate) {
  expect_equal(check_against(ModelKnobs{false, false}, false, kEqual));
}

// The followers against every task's own events: the fused programs' follower follows each
// transfer as the tasks do (equal but for the rounding of their sums, under 1e-5), the collective
// programs' follower prices a ring step's transfers as started together and settles their
// slowdown beside GEMMs by a fixed point, within 1%.
TEST(Timeline, FollowersAgreeWithTheTaskByTaskTimeline) {
  const std::map<std::string, Bound> bounds = {
      {"sequential", {0.01, 0.01, 0.01}},  {"decompose:d", {0.01, 0.01, 0.01}},
      {"fuse:all2all", {1e-5, 1e-5, 1e-5}}, {"fuse:ring", {1e-5, 1e-5, 1e-5}},
      {"fuse:double-ring", {1e-5, 1e-5, 1e-5}}, {"fuse:hier", {1e-5, 1e-5, 1e-5}},
      {"fuse:synth", {1e-5, 1e-5, 1e-5}},
  };
  check_against(ModelKnobs{}, true, bounds);
  check_against(ModelKnobs{false, false}, true, bounds);
}

// A sequential or decompose:d schedule is followed as its program only when it is exactly the
// lowering of that program; one changed in any way (here a task's name) runs task by task.
TEST(Timeline, OnlyTheLoweringOfACollectiveProgramIsFollowedAsIt) {
  const hardware::Profile prof = *hardware::make_preset("a6000x8");
  auto plan = schedule::comm_plan_for(prof, first(4));
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const workload::OperatorSpec op = op_of(OpKind::gemm_rs, 4096, 8192, 8192, 4);
  const Strategy st{StrategyKind::decompose, 2};
  auto s = schedule::generate_for(prof, op, st, *plan);
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto e = estimate_time_s(prof, op, st, *plan, ModelKnobs{});
  ASSERT_TRUE(e.ok());
  auto followed = evaluate_timeline(prof, *s);
  ASSERT_TRUE(followed.ok()) << followed.error().message;
  EXPECT_EQ(followed->makespan_s, *e);
  // Every task's recorded times keep its dependencies' order.
  for (const schedule::Task& task : s->tasks)
    for (int d : task.deps) EXPECT_GE(followed->start_s[task.id], followed->end_s[d]);
  schedule::Schedule renamed = *s;
  renamed.tasks.back().name += " (renamed)";
  auto by_tasks = evaluate_timeline(prof, renamed);
  auto reference = evaluate_task_timeline(prof, *s);
  ASSERT_TRUE(by_tasks.ok() && reference.ok());
  EXPECT_EQ(by_tasks->makespan_s, reference->makespan_s);
  EXPECT_NE(by_tasks->makespan_s, followed->makespan_s);
}

}  // namespace
}  // namespace compass::model
