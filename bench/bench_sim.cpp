// Simulator speed: one 8-GPU operator per strategy on a6000x8 (target <= 50 ms each, fork
// included) and a 1024-GPU ring all-gather on 128 x 8 NVSwitch nodes (target <= 10 s for
// simulate(); the profile and the schedule are built outside the timed loop and their build
// times are reported as counters).
// Run: ./build/bench/bench_sim --benchmark_min_time=1x  (see docs/simulator.md)

#include <benchmark/benchmark.h>

#include <chrono>

#include <fmt/format.h>

#include "compass/backends/sim/simulator.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/schedule/generate.hpp"

namespace {

using namespace compass;

// One 8-GPU operator (GPT-3 13B FC1 forward shape) under strategy `arg`.
void BM_Operator8Gpu(benchmark::State& state) {
  static const hardware::Profile prof = *hardware::make_preset("a6000x8");
  const std::vector<schedule::Strategy> strategies = schedule::all_strategies(4);
  const schedule::Strategy st = strategies.at(static_cast<std::size_t>(state.range(0)));
  workload::OperatorSpec op{workload::OpKind::ag_gemm, 8192, 20480, 5120, 8, DType::bf16, ""};
  std::vector<int> gpus{0, 1, 2, 3, 4, 5, 6, 7};
  const auto plan = schedule::comm_plan_for(prof, gpus);
  if (!plan.ok()) {
    state.SkipWithError(plan.error().message.c_str());
    return;
  }
  const auto s = schedule::generate_for(prof, op, st, *plan);
  if (!s.ok()) {
    state.SkipWithError(s.error().message.c_str());
    return;
  }
  double simulated = 0;
  for (auto _ : state) {
    auto r = backends::sim::simulate(prof, *s);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    simulated = r->total_s;
  }
  state.SetLabel(schedule::to_string(st));
  state.counters["tasks"] = static_cast<double>(s->tasks.size());
  state.counters["simulated_ms"] = simulated * 1e3;
}
BENCHMARK(BM_Operator8Gpu)->DenseRange(0, 4)->Unit(benchmark::kMillisecond)->UseRealTime();

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A ring all-gather of 1 MiB shards over `range(0)` GPUs of 8-GPU NVSwitch nodes, one NIC each.
void BM_RingAllGatherMultinode(benchmark::State& state) {
  const int p = static_cast<int>(state.range(0));
  auto t0 = std::chrono::steady_clock::now();
  const hardware::Profile prof = hardware::make_multinode_nvswitch(p / 8, 8);
  const double profile_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const schedule::Schedule s = schedule::ring_allgather(p, 256, 2048);  // 1 MiB shards
  const double schedule_s = seconds_since(t0);
  std::int64_t transfers = 0;
  double simulated = 0;
  for (auto _ : state) {
    auto r = backends::sim::simulate(prof, s);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    transfers += r->transfers;
    simulated = r->total_s;
  }
  state.counters["transfers_per_s"] =
      benchmark::Counter(static_cast<double>(transfers), benchmark::Counter::kIsRate);
  state.counters["transfers"] = static_cast<double>(s.tasks.size());
  state.counters["simulated_ms"] = simulated * 1e3;
  state.counters["profile_build_s"] = profile_s;
  state.counters["schedule_build_s"] = schedule_s;
}
BENCHMARK(BM_RingAllGatherMultinode)->Arg(64)->Arg(256)->Arg(1024)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
