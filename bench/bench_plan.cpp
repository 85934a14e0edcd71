// Planner speed: the whole paper grid (288 configurations, every strategy, ODP and choice) and
// one operator's estimates. The target is the grid well under 100 ms.
//
// The model memoises through a model::Caches the caller owns (ring-step patterns, released-flow
// patterns, all-to-all congestion, tree estimates and programs), so
// planning the same thing again with the same Caches is mostly hits. BM_SweepPaperGrid and
// BM_ChooseOneOperator construct a fresh Caches for every iteration (a first plan, as one
// `compass sweep` or `compass op` does); BM_SweepPaperGridWarm keeps one across iterations (the
// same grid planned again). The sweeps plan the distinct operators on one worker per hardware
// thread, as `compass sweep` does (BM_SweepPaperGridOneThread: on the calling thread alone);
// their times are wall-clock and their CPU times those of the whole process. They plan what
// the table, the CSV and the summary print (every strategy's time and the choice);
// BM_SweepPaperGridExplained also explains every row's choice (the chosen strategy's
// breakdown and the reason), as `compass sweep --json` does.
// BM_TimelinePaperGrid generates the schedule of every grid row under every strategy
// (decompose:4 for decompose) and evaluates its timeline (model::evaluate_timeline: every
// generated schedule recognised as its strategy's program and followed; sequential's and
// decompose's by generating their lowering again and comparing): what planning would cost if
// the model evaluated the schedules instead of the programs.

#include <benchmark/benchmark.h>

#include <map>
#include <numeric>
#include <optional>

#include "compass/hardware/presets.hpp"
#include "compass/model/caches.hpp"
#include "compass/model/selector.hpp"
#include "compass/model/timeline.hpp"
#include "compass/plan/sweep.hpp"

namespace {

void sweep_paper_grid(benchmark::State& state, bool cold, int threads, bool explain = false) {
  const compass::hardware::Profile p = *compass::hardware::make_preset("a6000x8");
  const auto grid = compass::workload::paper_grid();
  std::optional<compass::model::Caches> caches;
  caches.emplace();
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      caches.emplace();  // the previous iteration's tables are dropped outside the timing
      state.ResumeTiming();
    }
    auto r = compass::plan::run_sweep(p, grid, *caches, {}, {}, threads, explain);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(grid.size()));
}

void BM_SweepPaperGrid(benchmark::State& state) { sweep_paper_grid(state, true, 0); }
BENCHMARK(BM_SweepPaperGrid)->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();

void BM_SweepPaperGridExplained(benchmark::State& state) {
  sweep_paper_grid(state, true, 0, true);
}
BENCHMARK(BM_SweepPaperGridExplained)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_SweepPaperGridOneThread(benchmark::State& state) { sweep_paper_grid(state, true, 1); }
BENCHMARK(BM_SweepPaperGridOneThread)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_SweepPaperGridWarm(benchmark::State& state) { sweep_paper_grid(state, false, 0); }
BENCHMARK(BM_SweepPaperGridWarm)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

void BM_ChooseOneOperator(benchmark::State& state) {
  const compass::hardware::Profile p = *compass::hardware::make_preset("a6000x8");
  const auto plan = *compass::schedule::comm_plan_for(p, {0, 1, 2, 3, 4, 5, 6, 7});
  compass::workload::OperatorSpec op;
  op.kind = state.range(0) == 0 ? compass::workload::OpKind::ag_gemm
                                : compass::workload::OpKind::gemm_rs;
  op.m = 8192;
  op.n = 5120;
  op.k = 5120;
  op.tp = 8;
  std::optional<compass::model::Caches> caches;
  for (auto _ : state) {
    state.PauseTiming();
    caches.emplace();
    state.ResumeTiming();
    auto c = compass::model::choose_strategy(p, op, plan, *caches);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_ChooseOneOperator)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_TimelinePaperGrid(benchmark::State& state) {
  const compass::hardware::Profile p = *compass::hardware::make_preset("a6000x8");
  const auto grid = compass::workload::paper_grid();
  std::map<int, compass::schedule::CommPlan> plans;
  for (const auto& g : grid) {
    if (plans.count(g.op.tp) != 0) continue;
    std::vector<int> gpus(static_cast<std::size_t>(g.op.tp));
    std::iota(gpus.begin(), gpus.end(), 0);
    plans.emplace(g.op.tp, *compass::schedule::comm_plan_for(p, gpus));
  }
  std::int64_t schedules = 0;
  for (auto _ : state) {
    for (const auto& g : grid)
      for (const auto& st : compass::schedule::all_strategies(4)) {
        auto s = compass::schedule::generate_for(p, g.op, st, plans.at(g.op.tp));
        if (!s.ok()) continue;  // decompose:4 that does not divide the rows
        auto t = compass::model::evaluate_timeline(p, *s);
        benchmark::DoNotOptimize(t);
        ++schedules;
      }
  }
  state.SetItemsProcessed(schedules);
}
BENCHMARK(BM_TimelinePaperGrid)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
