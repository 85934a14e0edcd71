// Schedule building at scale: decompose:d of an AG-GEMM at tp 8 with one row per part, so the
// task count grows with d (about 9 d x 8 tasks). Time per task stays flat when building is
// n log n in tasks (a quadratic builder shows up as time per task growing with d).
//   build/release/bench/bench_schedule --benchmark_counters_tabular=true

#include <benchmark/benchmark.h>

#include "compass/schedule/generate.hpp"

namespace {

void BM_BuildDecompose(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const int p = 8;
  compass::workload::OperatorSpec op;
  op.kind = compass::workload::OpKind::ag_gemm;
  op.m = static_cast<std::int64_t>(d) * p;
  op.n = 64;
  op.k = 64;
  op.tp = p;
  op.dtype = compass::DType::bf16;
  const auto plan = compass::schedule::default_comm_plan(p);
  const compass::schedule::Strategy st{compass::schedule::StrategyKind::decompose, d};
  std::size_t tasks = 0;
  for (auto _ : state) {
    auto s = compass::schedule::generate(op, st, plan);
    if (!s.ok()) {
      state.SkipWithError(s.error().message.c_str());
      return;
    }
    tasks = s->tasks.size();
    benchmark::DoNotOptimize(s);
  }
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["per_task"] = benchmark::Counter(
      static_cast<double>(tasks) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_BuildDecompose)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
