// The fused kernels against cuBLASLt on one GPU (needs a GPU; every case reports an error
// without one). AG-GEMM with all flags preset (no waiting: the kernel's overhead over a plain
// GEMM), and GEMM-RS over 8 virtual ranks with the ordered reduction (the timed loop covers the
// eight kernels and the eight owners' sums; the reference, the same eight GEMMs), each per
// kernel (sm90 = CUTLASS 3.x TMA + WGMMA, sm80 = CUTLASS 2.x). Counters: fused_s and cublaslt_s (medians of the
// kernel's own timed loop), speed = cublaslt_s / fused_s (1 = as fast as cuBLASLt),
// max_rel_error.
//   bench_fused --benchmark_format=json
#include <benchmark/benchmark.h>

#include <string>

#include "compass/backends/cuda/fused.hpp"

namespace {

using compass::backends::cuda::FusedCheckOptions;

void run(benchmark::State& state, FusedCheckOptions o) {
  o.repeat = 10;
  o.warmup = 2;
  for (auto _ : state) {
    auto r = compass::backends::cuda::fused_check(o);
    if (!r.ok()) {
      state.SkipWithError(r.error().message.c_str());
      return;
    }
    state.SetIterationTime(r->median_s);
    state.counters["fused_s"] = r->median_s;
    state.counters["cublaslt_s"] = r->reference_median_s;
    state.counters["speed"] = r->reference_median_s / r->median_s;
    state.counters["max_rel_error"] = r->max_rel_error;
    state.counters["passed"] = r->passed() ? 1 : 0;
    state.counters["tiles"] = r->tiles;
    state.SetLabel(r->kernel + " on " + r->device);
  }
}

void ag(benchmark::State& state, const std::string& kernel) {
  FusedCheckOptions o;
  o.kind = compass::workload::OpKind::ag_gemm;
  o.m = state.range(0), o.n = state.range(1), o.k = state.range(2);
  o.ranks = 8;
  o.kernel = kernel;
  run(state, o);
}

void rs(benchmark::State& state, const std::string& kernel) {
  FusedCheckOptions o;
  o.kind = compass::workload::OpKind::gemm_rs;
  o.m = state.range(0), o.n = state.range(1), o.k = state.range(2);
  o.ranks = 8;
  o.kernel = kernel;
  run(state, o);
}

// Shapes: M x N x K of the GEMM one rank runs. 8192-class squares, and the per-rank shapes of
// a 4096-wide model on 8 GPUs: AG-GEMM QKV (N = 3 * 4096 / 8) and FC1 (N = 4 * 4096 / 8) at
// K = 4096; GEMM-RS projection and FC2 at N = 4096 (K here is the full K over 8 ranks).
void ag_shapes(benchmark::internal::Benchmark* b) {
  for (std::int64_t m : {8192, 16384}) b->Args({m, 8192, 8192});
  for (std::int64_t m : {4096, 16384}) {
    b->Args({m, 1536, 4096});
    b->Args({m, 2048, 4096});
  }
  b->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

void rs_shapes(benchmark::internal::Benchmark* b) {
  b->Args({8192, 8192, 8192});
  for (std::int64_t m : {4096, 16384}) {
    b->Args({m, 4096, 4096});
    b->Args({m, 4096, 16384});
  }
  b->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(ag, sm90, std::string("sm90"))->Apply(ag_shapes);
BENCHMARK_CAPTURE(ag, sm80, std::string("sm80"))->Apply(ag_shapes);
BENCHMARK_CAPTURE(rs, sm90, std::string("sm90"))->Apply(rs_shapes);
BENCHMARK_CAPTURE(rs, sm80, std::string("sm80"))->Apply(rs_shapes);

}  // namespace

BENCHMARK_MAIN();
