// One training iteration simulated on SimGrid (backends/sim/job_sim) as the job grows: a
// 175B-class model (gpt3-175b) on dgx-a100 with TP 8, PP 8, micro-batch 1 and the global batch
// of 1,536 sequences of 2,048 tokens, on 64 ... 4,096 GPUs (the target: 1,024 GPUs in <= 60 s
// on a 2-core machine). The layout is the search's best under those constraints; what is timed
// is the simulation alone (a forked SimGrid run). Counters: data-parallel replicas, micro-batches
// per replica, SimGrid flows, the simulated iteration.
//   bench_job_sim --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include "compass/backends/sim/job_sim.hpp"
#include "compass/job/search.hpp"

namespace {

void simulate_175b(benchmark::State& state) {
  const std::int64_t gpus = state.range(0);
  const auto cluster = compass::job::builtin_cluster("dgx-a100");
  const auto m = compass::workload::resolve_model("gpt3-175b");
  if (!cluster.ok() || !m.ok()) {
    state.SkipWithError("cluster or model missing");
    return;
  }
  compass::job::Searcher s(*cluster, *m);
  compass::job::SearchRequest r;
  r.gpus = gpus;
  r.global_batch = 1536;
  r.seq = 2048;
  r.tp = 8;
  r.pp = 8;
  r.micro_batch = 1;
  r.top = 1;
  const auto res = s.search(r);
  if (!res.ok() || res->top.empty()) {
    state.SkipWithError(res.ok() ? "no layout fits" : res.error().message.c_str());
    return;
  }
  const compass::job::Candidate& c = res->top.front();
  for (auto _ : state) {
    const auto sim = compass::backends::sim::simulate_job(*cluster, *m, c.compass);
    if (!sim.ok()) {
      state.SkipWithError(sim.error().message.c_str());
      return;
    }
    state.counters["dp"] = c.layout.dp;
    state.counters["microbatches"] = c.layout.microbatches();
    state.counters["flows"] = static_cast<double>(sim->flows);
    state.counters["iteration_s"] = sim->iteration_s;
    benchmark::DoNotOptimize(sim->iteration_s);
  }
}

}  // namespace

BENCHMARK(simulate_175b)
    ->RangeMultiplier(2)
    ->Range(64, 4096)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK_MAIN();
