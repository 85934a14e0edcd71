// Standalone runs of the fused kernels on GPU 0 (host code, compiled by the C++ compiler):
// buffers, tile plans, flags and counters, the release patterns, the cuBLASLt reference and
// the timing. docs/cuda-backend.md, "Fused kernels", describes the runs.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "compass/backends/cuda/device/cuda_util.hpp"
#include "compass/backends/cuda/device/entry.hpp"
#include "compass/backends/cuda/device/fused/fused_kernels.hpp"
#include "compass/backends/cuda/device/kernels.hpp"
#include "compass/backends/cuda/device/lt_gemm.hpp"
#include "compass/backends/cuda/device/mapped_fault.hpp"
#include "compass/backends/cuda/device/run.hpp"
#include "compass/backends/cuda/fused_plan.hpp"

namespace compass::backends::cuda::device {

namespace {

// Bands of this many M tiles are swept along N inside one piece.
constexpr int kSwizzle = 4;

ElemType elem_of(DType t) {
  return t == DType::fp16 ? ElemType::f16 : ElemType::bf16;
}

template <typename T>
Result<DeviceMemory> upload(const std::vector<T>& v, std::string_view what) {
  COMPASS_ASSIGN(
      DeviceMemory mem,
      DeviceMemory::allocate(
          0, static_cast<std::int64_t>(std::max<std::size_t>(1, v.size()) * sizeof(T)), what));
  if (!v.empty())
    COMPASS_CUDA(cudaMemcpy(mem.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
                 what);
  return mem;
}

Result<DeviceMemory> alloc(std::int64_t bytes, std::string_view what) {
  return DeviceMemory::allocate(0, std::max<std::int64_t>(bytes, 16), what);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

void CUDART_CB sleep_on_host(void* seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(*static_cast<double*>(seconds)));
}

// Which kernel runs: sm90 (AG only, sm_90 GPUs) or sm80 (compute capability 8.0 and up).
Result<std::string> pick_kernel(const FusedCheckOptions& o, const DeviceInfo& info) {
  const int cc = std::atoi(info.arch.c_str() + 3);
  const bool ag = o.kind == workload::OpKind::ag_gemm;
  if (!fused_sm80_built())
    return make_error(
        "the fused kernels were not built (no CUTLASS headers when compass was configured: "
        "pip install nvidia-cutlass, then reconfigure)");
  if (o.kernel == "sm90" || (o.kernel == "auto" && ag && cc == 90 && fused_sm90_built())) {
    if (cc != 90)
      return make_error("the sm90 fused kernel needs an sm_90 GPU; this is {} {}", info.name,
                        info.arch);
    if (!fused_sm90_built()) return make_error("the sm90 fused kernel was not built");
    return std::string("sm90");
  }
  if (cc < 80)
    return make_error("the fused kernels need compute capability 8.0 or newer; {} is {}", info.name,
                      info.arch);
  return std::string("sm80");
}

std::string kernel_label(const std::string& k) {
  return k == "sm90" ? "sm90 (CUTLASS 3.x TMA + WGMMA, persistent)" : "sm80 (CUTLASS 2.x mma.sync)";
}

// max |out - ref| / max |ref| and the NaN count of a dtype output against an FP32 reference.
struct Compare {
  double max_abs = 0, max_ref = 0;
  std::int64_t nans = 0;
};

Status compare_into(Compare& c, const void* out, ElemType t, const float* ref_dev,
                    std::int64_t rows, std::int64_t cols, std::int64_t ld_ref,
                    cudaStream_t stream) {
  COMPASS_ASSIGN(DeviceMemory f, alloc(rows * cols * 4, "the comparison buffer"));
  COMPASS_CUDA(launch_to_float_2d(out, cols, rows, cols, t, static_cast<float*>(f.get()), stream),
               "the output conversion");
  std::vector<float> got(static_cast<std::size_t>(rows * cols)), want(got.size());
  COMPASS_CUDA(cudaStreamSynchronize(stream), "the output conversion");
  COMPASS_CUDA(cudaMemcpy(got.data(), f.get(), got.size() * 4, cudaMemcpyDeviceToHost),
               "the output");
  COMPASS_CUDA(cudaMemcpy2D(want.data(), cols * 4, ref_dev, ld_ref * 4, cols * 4, rows,
                            cudaMemcpyDeviceToHost),
               "the reference");
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) {
      ++c.nans;
      continue;
    }
    c.max_abs = std::max(c.max_abs, static_cast<double>(std::fabs(got[i] - want[i])));
    c.max_ref = std::max(c.max_ref, static_cast<double>(std::fabs(want[i])));
  }
  return Status::success();
}

// Times `iterations` calls of `issue(i)` between events on `stream`; one time per call.
template <typename Issue>
Result<std::vector<double>> time_loop(int warmup, int repeat, cudaStream_t stream, Issue issue) {
  COMPASS_ASSIGN(Event start, Event::create(0, true));
  COMPASS_ASSIGN(Event stop, Event::create(0, true));
  std::vector<double> times;
  for (int i = 0; i < warmup + repeat; ++i) {
    COMPASS_CUDA(cudaEventRecord(start.get(), stream), "timing");
    COMPASS_TRY(issue(i));
    COMPASS_CUDA(cudaEventRecord(stop.get(), stream), "timing");
    COMPASS_CUDA(cudaEventSynchronize(stop.get()), "timing");
    COMPASS_ASSIGN(double t, elapsed_s(start, stop));
    if (i >= warmup) times.push_back(t);
  }
  return times;
}

// ---- AG-GEMM ---------------------------------------------------------------------------

Result<FusedCheckReport> run_ag(const FusedCheckOptions& o, const std::string& kernel,
                                FusedCheckReport rep) {
  const int p = o.ranks;
  const ElemType et = elem_of(o.dtype);
  const std::int64_t m = o.m, n = o.n, k = o.k, es = 2;
  std::vector<int> order = o.order;
  if (order.empty()) {
    order.resize(static_cast<std::size_t>(p));
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<Piece> pieces;
  for (int c : order) {
    const std::int64_t a = m * c / p, b = m * (c + 1) / p;
    pieces.push_back(Piece{a, b - a, c, {}});
  }
  const TileShape tile =
      kernel == "sm90" ? TileShape{kSm90TileM, kSm90TileN} : TileShape{kSm80TileM, kSm80TileN};
  COMPASS_ASSIGN(AgTilePlan plan, ag_tile_plan(m, n, tile, pieces, kSwizzle));
  rep.tiles = static_cast<int>(plan.tiles.size());

  COMPASS_ASSIGN(DeviceMemory src, alloc(m * k * es, "the input"));
  COMPASS_ASSIGN(DeviceMemory a, alloc(m * k * es, "the gathered input"));
  COMPASS_ASSIGN(DeviceMemory b, alloc(k * n * es, "the weight"));
  COMPASS_ASSIGN(DeviceMemory d, alloc(m * n * es, "the output"));
  COMPASS_ASSIGN(DeviceMemory dref, alloc(m * n * es, "the reference output"));
  COMPASS_ASSIGN(DeviceMemory ref32, alloc(m * n * 4, "the FP32 reference"));
  COMPASS_ASSIGN(DeviceMemory flags, alloc(static_cast<std::int64_t>(p) * 4, "the flags"));
  COMPASS_CUDA(cudaMemset(flags.get(), 0, static_cast<std::size_t>(p) * 4), "the flags");
  std::vector<const std::uint32_t*> flag_ptrs;
  for (int i = 0; i < p; ++i)
    flag_ptrs.push_back(static_cast<const std::uint32_t*>(flags.get()) + i);
  COMPASS_ASSIGN(DeviceMemory flag_ptrs_dev, upload(flag_ptrs, "the flag pointers"));
  COMPASS_ASSIGN(DeviceMemory tiles_dev, upload(plan.tiles, "the tile plan"));
  COMPASS_ASSIGN(DeviceMemory waits_dev, upload(plan.waits, "the tile waits"));
  MappedFault fault;
  COMPASS_TRY(fault.init());

  COMPASS_ASSIGN(Stream compute, Stream::create(0, 0));
  COMPASS_ASSIGN(Stream copy, Stream::create(0, -1));
  COMPASS_CUDA(launch_fill_uniform(src.get(), m * k, et, o.seed, compute.get()), "the input");
  COMPASS_CUDA(launch_fill_uniform(b.get(), k * n, et, o.seed + 1, compute.get()), "the weight");
  COMPASS_CUDA(cudaMemcpyAsync(a.get(), src.get(), static_cast<std::size_t>(m * k * es),
                               cudaMemcpyDeviceToDevice, compute.get()),
               "the gathered input");

  // The reference and its time.
  COMPASS_ASSIGN(LtHandle lt, LtHandle::create(0));
  COMPASS_ASSIGN(DeviceMemory ws, alloc(kLtWorkspaceBytes, "the cuBLASLt workspace"));
  GemmCall call{m, n, k, src.get(), k, b.get(), n, ref32.get(), n, o.dtype, DType::fp32, false};
  COMPASS_ASSIGN(LtGemm ref_gemm,
                 LtGemm::prepare(lt.get(), call, kLtWorkspaceBytes, "the FP32 reference"));
  COMPASS_TRY(ref_gemm.run(ws.get(), compute.get()));
  call.c = dref.get();
  call.out = o.dtype;
  COMPASS_ASSIGN(LtGemm timed_ref,
                 LtGemm::prepare(lt.get(), call, kLtWorkspaceBytes, "the cuBLASLt GEMM"));
  COMPASS_ASSIGN(rep.reference_times_s, time_loop(o.warmup, o.repeat, compute.get(), [&](int) {
                   return timed_ref.run(ws.get(), compute.get());
                 }));
  rep.reference_median_s = median_of(rep.reference_times_s);

  FusedAgArgs args;
  args.type = et;
  args.m = m, args.n = n, args.k = k;
  args.a = a.get(), args.lda = k, args.b = b.get(), args.ldb = n, args.d = d.get(), args.ldd = n;
  args.tiles = static_cast<const AgTile*>(tiles_dev.get());
  args.num_tiles = static_cast<int>(plan.tiles.size());
  args.waits = static_cast<const std::int32_t*>(waits_dev.get());
  args.wait.flags = static_cast<const std::uint32_t* const*>(flag_ptrs_dev.get());
  args.wait.timeout_ns = static_cast<long long>(o.timeout_s * 1e9);
  args.wait.fault = fault.device();
  args.wait.rank = 0;
  COMPASS_ASSIGN(DeviceInfo info, device_info(0));
  auto launch = [&](cudaStream_t st) -> cudaError_t {
    return kernel == "sm90" ? launch_fused_ag_sm90(args, info.sm_count, st)
                            : launch_fused_ag_sm80(args, st);
  };

  const int iterations = o.warmup + o.repeat;
  StreamMemOps ops;
  if (o.release != FusedRelease::preset) {
    COMPASS_ASSIGN(ops, StreamMemOps::load());
  }
  if (o.release == FusedRelease::preset) {
    // Every iteration's target (1..iterations) is already reached.
    const std::vector<std::uint32_t> v(static_cast<std::size_t>(p),
                                       static_cast<std::uint32_t>(iterations));
    COMPASS_CUDA(cudaMemcpy(flags.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice),
                 "the flags");
  }
  // The release order: a seeded shuffle of the pieces (not their consumption order).
  std::vector<int> release(static_cast<std::size_t>(p));
  std::iota(release.begin(), release.end(), 0);
  std::mt19937 rng(o.seed);
  std::shuffle(release.begin(), release.end(), rng);
  if (o.release == FusedRelease::never)
    release.erase(std::find(release.begin(), release.end(), p - 1));  // the last piece
  double delay = o.release_delay_s;
  COMPASS_ASSIGN(Event kernel_done, Event::create(0, false));
  COMPASS_ASSIGN(Event poisoned, Event::create(0, false));
  COMPASS_CUDA(cudaEventRecord(kernel_done.get(), compute.get()), "setup");

  auto iteration = [&](int i) -> Status {
    const auto epoch = static_cast<std::uint32_t>(i + 1);
    args.wait.target = ag_flag_target(epoch);
    if (o.release != FusedRelease::preset) {
      // Poison A after the previous kernel is done, then release piece by piece.
      COMPASS_CUDA(cudaStreamWaitEvent(copy.get(), kernel_done.get(), 0), "the release stream");
      COMPASS_CUDA(cudaMemsetAsync(a.get(), 0xff, static_cast<std::size_t>(m * k * es), copy.get()),
                   "poisoning the input with NaN");
      COMPASS_CUDA(cudaEventRecord(poisoned.get(), copy.get()), "the release stream");
      COMPASS_CUDA(cudaStreamWaitEvent(compute.get(), poisoned.get(), 0), "the kernel stream");
    }
    COMPASS_CUDA(launch(compute.get()), fmt::format("the fused AG-GEMM ({})", kernel));
    COMPASS_CUDA(cudaEventRecord(kernel_done.get(), compute.get()), "the kernel stream");
    if (o.release != FusedRelease::preset)
      for (int pi : release) {
        const Piece& pc = pieces[static_cast<std::size_t>(pi)];
        if (delay > 0)
          COMPASS_CUDA(cudaLaunchHostFunc(copy.get(), sleep_on_host, &delay), "the release delay");
        COMPASS_CUDA(cudaMemcpyAsync(static_cast<char*>(a.get()) + pc.row * k * es,
                                     static_cast<char*>(src.get()) + pc.row * k * es,
                                     static_cast<std::size_t>(pc.rows * k * es),
                                     cudaMemcpyDeviceToDevice, copy.get()),
                     fmt::format("the copy of chunk {}", pc.chunk));
        COMPASS_TRY(ops.check(
            ops.write(copy.get(),
                      reinterpret_cast<CUdeviceptr>(flag_ptrs[static_cast<std::size_t>(pi)]), epoch,
                      CU_STREAM_WRITE_VALUE_DEFAULT),
            "cuStreamWriteValue32", fmt::format("the flag of chunk {}", pc.chunk)));
      }
    return Status::success();
  };
  auto times = time_loop(o.warmup, o.repeat, compute.get(), iteration);
  if (const FusedFault f = fault.read(); f.code != kFaultNone) {
    const int piece = f.flag;
    const int chunk = piece >= 0 && piece < p ? pieces[static_cast<std::size_t>(piece)].chunk : -1;
    return make_error("{}", fused_fault_message(f, "fused AG-GEMM", o.timeout_s, chunk));
  }
  if (!times.ok()) return times.error();
  rep.times_s = *times;
  rep.median_s = median_of(rep.times_s);
  COMPASS_CUDA(cudaStreamSynchronize(copy.get()), "the release stream");
  Compare c;
  COMPASS_TRY(
      compare_into(c, d.get(), et, static_cast<const float*>(ref32.get()), m, n, n, compute.get()));
  rep.nan_count = c.nans;
  rep.max_rel_error = c.max_ref > 0 ? c.max_abs / c.max_ref : c.max_abs;
  return rep;
}

// ---- GEMM-RS ---------------------------------------------------------------------------

Result<FusedCheckReport> run_rs(const FusedCheckOptions& o, FusedCheckReport rep) {
  const int p = o.ranks;
  const ElemType et = elem_of(o.dtype);
  const std::int64_t m = o.m, n = o.n, kr = o.k / p, es = 2;
  std::vector<int> order0 = o.order;
  if (order0.empty())
    for (int i = p - 1; i >= 0; --i) order0.push_back(i);
  auto chunk_row = [&](int j) { return m * j / p; };
  auto chunk_rows = [&](int j) { return m * (j + 1) / p - m * j / p; };

  COMPASS_ASSIGN(StreamMemOps ops, StreamMemOps::load());
  COMPASS_ASSIGN(LtHandle lt, LtHandle::create(0));
  COMPASS_ASSIGN(DeviceMemory ws, alloc(kLtWorkspaceBytes, "the cuBLASLt workspace"));
  COMPASS_ASSIGN(DeviceMemory ref32, alloc(m * n * 4, "the FP32 reference"));
  COMPASS_ASSIGN(DeviceMemory dref, alloc(m * n * es, "the reference output"));
  COMPASS_ASSIGN(DeviceMemory counters,
                 alloc(static_cast<std::int64_t>(p) * 4, "the chunk counters"));
  COMPASS_CUDA(cudaMemset(counters.get(), 0, static_cast<std::size_t>(p) * 4),
               "the chunk counters");
  auto* counter = static_cast<std::uint32_t*>(counters.get());

  struct Rank {
    DeviceMemory a, b, slots, y, first, tiles, rows, outs, ctrs;
    Stream stream;
    RsTilePlan plan;
    FusedRsArgs args;
  };
  std::vector<Rank> ranks(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    Rank& rk = ranks[static_cast<std::size_t>(r)];
    COMPASS_ASSIGN(rk.stream, Stream::create(0, 0));
    COMPASS_ASSIGN(rk.a, alloc(m * kr * es, "an input"));
    COMPASS_ASSIGN(rk.b, alloc(kr * n * es, "a weight"));
    COMPASS_ASSIGN(rk.slots, alloc(static_cast<std::int64_t>(p) * chunk_rows(r) * n * es,
                                   "the partial slots"));
    COMPASS_ASSIGN(rk.y, alloc(chunk_rows(r) * n * es, "an output"));
    COMPASS_ASSIGN(rk.first, alloc(chunk_rows(r) * n * es, "the first output"));
    COMPASS_CUDA(launch_fill_uniform(rk.a.get(), m * kr, et, o.seed + 10 + r, rk.stream.get()),
                 "an input");
    COMPASS_CUDA(launch_fill_uniform(rk.b.get(), kr * n, et, o.seed + 100 + r, rk.stream.get()),
                 "a weight");
  }
  // Pieces and plans: rank r computes chunk (order0[i] + r) mod p at position i, its whole
  // rows, into slot r of the chunk's owner.
  std::vector<std::vector<int>> tiles_per_chunk;
  for (int r = 0; r < p; ++r) {
    Rank& rk = ranks[static_cast<std::size_t>(r)];
    std::vector<Piece> pieces;
    std::vector<std::int64_t> rows;
    std::vector<void*> outs;
    std::vector<std::uint32_t*> ctrs;
    for (int c0 : order0) {
      const int j = (c0 + r) % p;
      pieces.push_back(Piece{chunk_row(j), chunk_rows(j), j, {}});
      rows.push_back(chunk_row(j));
      outs.push_back(static_cast<char*>(ranks[static_cast<std::size_t>(j)].slots.get()) +
                     static_cast<std::int64_t>(r) * chunk_rows(j) * n * es);
      ctrs.push_back(counter + j);
    }
    COMPASS_ASSIGN(rk.plan, rs_tile_plan(m, n, {kSm80TileM, kSm80TileN}, pieces, kSwizzle));
    COMPASS_ASSIGN(auto per_chunk, rs_tiles_per_chunk(rk.plan, pieces, p));
    tiles_per_chunk.push_back(per_chunk);
    COMPASS_ASSIGN(rk.tiles, upload(rk.plan.tiles, "a tile plan"));
    COMPASS_ASSIGN(rk.rows, upload(rows, "the piece rows"));
    COMPASS_ASSIGN(rk.outs, upload(outs, "the piece slots"));
    COMPASS_ASSIGN(rk.ctrs, upload(ctrs, "the piece counters"));
    FusedRsArgs& a = rk.args;
    a.type = et;
    a.m = m, a.n = n, a.k = kr;
    a.a = rk.a.get(), a.lda = kr, a.b = rk.b.get(), a.ldb = n;
    a.tiles = static_cast<const RsTile*>(rk.tiles.get());
    a.num_tiles = static_cast<int>(rk.plan.tiles.size());
    a.piece_row = static_cast<const std::int64_t*>(rk.rows.get());
    a.piece_out = static_cast<void* const*>(rk.outs.get());
    a.ldd = n;
    a.piece_counter = static_cast<std::uint32_t* const*>(rk.ctrs.get());
  }
  rep.tiles = static_cast<int>(ranks[0].plan.tiles.size());

  // The reference: the sum of the p rank GEMMs in FP32; timed: the p GEMMs in the dtype.
  cudaStream_t s0 = ranks[0].stream.get();
  for (int r = 0; r < p; ++r) {
    const Rank& rk = ranks[static_cast<std::size_t>(r)];
    GemmCall call{m, n,           kr, rk.a.get(), kr,          rk.b.get(),
                  n, ref32.get(), n,  o.dtype,    DType::fp32, r > 0};
    COMPASS_ASSIGN(LtGemm g,
                   LtGemm::prepare(lt.get(), call, kLtWorkspaceBytes, "the FP32 reference"));
    COMPASS_TRY(g.run(ws.get(), s0));
    COMPASS_CUDA(cudaStreamSynchronize(s0), "the FP32 reference");
  }
  std::vector<LtGemm> timed;
  for (int r = 0; r < p; ++r) {
    const Rank& rk = ranks[static_cast<std::size_t>(r)];
    GemmCall call{m, n, kr, rk.a.get(), kr, rk.b.get(), n, dref.get(), n, o.dtype, o.dtype, false};
    COMPASS_ASSIGN(LtGemm g,
                   LtGemm::prepare(lt.get(), call, kLtWorkspaceBytes, "the cuBLASLt GEMMs"));
    timed.push_back(std::move(g));
  }
  COMPASS_ASSIGN(rep.reference_times_s, time_loop(o.warmup, o.repeat, s0, [&](int) -> Status {
                   for (const LtGemm& g : timed) COMPASS_TRY(g.run(ws.get(), s0));
                   return Status::success();
                 }));
  rep.reference_median_s = median_of(rep.reference_times_s);

  COMPASS_ASSIGN(DeviceMemory diff, alloc(8, "the difference count"));
  COMPASS_CUDA(cudaMemset(diff.get(), 0, 8), "the difference count");
  COMPASS_ASSIGN(Event fork, Event::create(0, false));
  std::vector<Event> joins;
  for (int r = 0; r < p; ++r) {
    COMPASS_ASSIGN(Event e, Event::create(0, false));
    joins.push_back(std::move(e));
  }
  auto iteration = [&](int i) -> Status {
    const auto epoch = static_cast<std::uint32_t>(i + 1);
    COMPASS_ASSIGN(auto red, rs_reduction_plan(tiles_per_chunk, epoch));
    COMPASS_CUDA(cudaEventRecord(fork.get(), s0), "the fork");
    for (int r = 0; r < p; ++r) {
      Rank& rk = ranks[static_cast<std::size_t>(r)];
      if (r > 0) COMPASS_CUDA(cudaStreamWaitEvent(rk.stream.get(), fork.get(), 0), "the fork");
      COMPASS_CUDA(launch_fused_rs_sm80(rk.args, rk.stream.get()),
                   fmt::format("the fused GEMM-RS of rank {}", r));
    }
    for (int j = 0; j < p; ++j) {
      Rank& rk = ranks[static_cast<std::size_t>(j)];
      const ReductionStep& st = red[static_cast<std::size_t>(j)];
      COMPASS_TRY(ops.check(ops.wait(rk.stream.get(), reinterpret_cast<CUdeviceptr>(counter + j),
                                     st.counter_target, CU_STREAM_WAIT_VALUE_GEQ),
                            "cuStreamWaitValue32", fmt::format("the counter of chunk {}", j)));
      std::vector<const void*> parts;
      for (int q : st.rank_order)
        parts.push_back(static_cast<const char*>(rk.slots.get()) +
                        static_cast<std::int64_t>(q) * chunk_rows(j) * n * es);
      COMPASS_CUDA(launch_sum_ordered_2d(rk.y.get(), n, parts.data(), p, n, chunk_rows(j), n, et,
                                         rk.stream.get()),
                   fmt::format("the reduction of chunk {}", j));
      if (j > 0) {
        COMPASS_CUDA(cudaEventRecord(joins[static_cast<std::size_t>(j)].get(), rk.stream.get()),
                     "the join");
        COMPASS_CUDA(cudaStreamWaitEvent(s0, joins[static_cast<std::size_t>(j)].get(), 0),
                     "the join");
      }
    }
    return Status::success();
  };
  std::vector<double> times;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    COMPASS_ASSIGN(auto t, time_loop(0, 1, s0, [&](int) { return iteration(i); }));
    if (i >= o.warmup) times.push_back(t[0]);
    // Bits of every iteration against the first.
    for (int j = 0; j < p; ++j) {
      Rank& rk = ranks[static_cast<std::size_t>(j)];
      const auto bytes = static_cast<std::size_t>(chunk_rows(j) * n * es);
      if (i == 0)
        COMPASS_CUDA(
            cudaMemcpyAsync(rk.first.get(), rk.y.get(), bytes, cudaMemcpyDeviceToDevice, s0),
            "a copy");
      else
        COMPASS_CUDA(
            launch_count_differences(rk.first.get(), rk.y.get(), static_cast<std::int64_t>(bytes),
                                     static_cast<unsigned long long*>(diff.get()), s0),
            "the bit comparison");
    }
    COMPASS_CUDA(cudaStreamSynchronize(s0), "the bit comparison");
  }
  unsigned long long differing = 0;
  COMPASS_CUDA(cudaMemcpy(&differing, diff.get(), 8, cudaMemcpyDeviceToHost),
               "the difference count");
  rep.bit_identical = differing == 0;
  rep.times_s = times;
  rep.median_s = median_of(times);
  Compare c;
  for (int j = 0; j < p; ++j)
    COMPASS_TRY(compare_into(c, ranks[static_cast<std::size_t>(j)].y.get(), et,
                             static_cast<const float*>(ref32.get()) + chunk_row(j) * n,
                             chunk_rows(j), n, n, s0));
  rep.nan_count = c.nans;
  rep.max_rel_error = c.max_ref > 0 ? c.max_abs / c.max_ref : c.max_abs;
  return rep;
}

}  // namespace

Result<FusedCheckReport> fused_check(const FusedCheckOptions& o) {
  COMPASS_TRY(device_count());
  COMPASS_CUDA(cudaSetDevice(0), "GPU 0");
  COMPASS_ASSIGN(DeviceInfo info, device_info(0));
  COMPASS_ASSIGN(std::string kernel, pick_kernel(o, info));
  FusedCheckReport rep;
  rep.device = info.name;
  rep.kernel = kernel_label(kernel);
  rep.tolerance = check_tolerance(o.dtype);
  if (o.kind == workload::OpKind::ag_gemm) return run_ag(o, kernel, std::move(rep));
  return run_rs(o, std::move(rep));
}

}  // namespace compass::backends::cuda::device
