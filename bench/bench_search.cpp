// The whole layout search (compass search) for large jobs: a 405B-class model on 16,384 GPUs of
// dgx-h100 (the target: <= 10 s on a 2-core machine), and a 70B model on 64 GPUs, with the
// layer shapes planned and the layouts priced by one worker per hardware thread (the default)
// and by one worker (`_one_thread`). Real time and the process's CPU time. Counters: layouts
// valid / fitting, distinct layer plans.
//   bench_search --benchmark_min_time=1x --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <string>

#include "compass/job/search.hpp"

namespace {

void search(benchmark::State& state, const std::string& model, std::int64_t gpus, int batch,
            std::int64_t seq, int threads) {
  const auto cluster = compass::job::builtin_cluster("dgx-h100");
  const auto m = compass::workload::resolve_model(model);
  if (!cluster.ok() || !m.ok()) {
    state.SkipWithError("cluster or model missing");
    return;
  }
  for (auto _ : state) {
    compass::job::Searcher s(*cluster, *m);  // a cold search: no layer plan cached
    compass::job::SearchRequest r;
    r.gpus = gpus;
    r.global_batch = batch;
    r.seq = seq;
    r.threads = threads;
    auto res = s.search(r);
    if (!res.ok()) {
      state.SkipWithError(res.error().message.c_str());
      return;
    }
    state.counters["valid"] = static_cast<double>(res->enumerated);
    state.counters["fitting"] = static_cast<double>(res->fitting);
    state.counters["layer_plans"] = static_cast<double>(s.planned_layers());
    benchmark::DoNotOptimize(res->top.front().compass.iteration_s);
  }
}

}  // namespace

BENCHMARK_CAPTURE(search, llama3_405b_16384gpus, "llama3-405b", 16384, 2048, 8192, 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(search, llama3_70b_64gpus, "llama3-70b", 64, 512, 4096, 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(search, llama3_70b_64gpus_one_thread, "llama3-70b", 64, 512, 4096, 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime()
    ->MeasureProcessCPUTime();

BENCHMARK_MAIN();
