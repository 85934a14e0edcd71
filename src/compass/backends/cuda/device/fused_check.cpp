// Standalone runs of the fused kernels on GPU 0 (host code, compiled by the C++ compiler):
// buffers, tile plans, flags and counters, the release patterns, the cuBLASLt reference and
// the timing. docs/cuda-backend.md, "Fused kernels", describes the runs.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <optional>
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
#include "compass/workload/operator.hpp"

namespace compass::backends::cuda::device {

namespace {

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

// The check's operator: its M rows fall into `ranks` near-equal chunks (workload::row_share).
workload::OperatorSpec check_op(const FusedCheckOptions& o) {
  return workload::OperatorSpec{o.kind, o.m, o.n, o.k, o.ranks, o.dtype, {}};
}

// max |out - ref| / max |ref| and the NaN count of the comparisons into the report.
void record_error(const Compare& c, FusedCheckReport& rep) {
  rep.nan_count = c.nans;
  rep.max_rel_error = relative_error(c.max_abs, c.max_ref);
}

// cuBLASLt on GPU 0 for the references, and the GEMMs timed against the fused kernel.
struct LtReference {
  LtHandle lt;
  DeviceMemory ws;
  std::vector<LtGemm> timed;
};

Result<LtReference> lt_reference() {
  LtReference ref;
  COMPASS_ASSIGN(ref.lt, LtHandle::create(0));
  COMPASS_ASSIGN(ref.ws, alloc(kLtWorkspaceBytes, "the cuBLASLt workspace"));
  return ref;
}

// The reference's times: every timed GEMM, in order, once per iteration.
Status time_reference(const FusedCheckOptions& o, const LtReference& ref, cudaStream_t stream,
                      FusedCheckReport& rep) {
  COMPASS_ASSIGN(rep.reference_times_s, time_loop(o.warmup, o.repeat, stream, [&](int) -> Status {
                   for (const LtGemm& g : ref.timed) COMPASS_TRY(g.run(ref.ws.get(), stream));
                   return Status::success();
                 }));
  rep.reference_median_s = median_of(rep.reference_times_s);
  return Status::success();
}

// ---- AG-GEMM ---------------------------------------------------------------------------

// The AG pieces in arrival order (o.order, or 0, 1, ..., p-1): chunk c is the rows of its share.
std::vector<Piece> ag_pieces(const FusedCheckOptions& o) {
  const workload::OperatorSpec op = check_op(o);
  std::vector<int> order = o.order;
  if (order.empty()) {
    order.resize(static_cast<std::size_t>(o.ranks));
    std::iota(order.begin(), order.end(), 0);
  }
  std::vector<Piece> pieces;
  for (int c : order) {
    const workload::RowRange r = workload::row_share(op, c);
    pieces.push_back(Piece{r.off, r.len, c, {}});
  }
  return pieces;
}

// Device memory of the AG check: the input (src) and the gathered input the pieces are copied
// into (a), the weight, the output, the references, one flag per piece and the tile plan.
struct AgBuffers {
  DeviceMemory src, a, b, d, dref, ref32, flags;
  std::vector<const std::uint32_t*> flag_ptrs;  // piece i's flag in `flags`
  DeviceMemory flag_ptrs_dev, tiles_dev, waits_dev;
};

Result<AgBuffers> ag_buffers(const FusedCheckOptions& o, const AgTilePlan& plan) {
  const int p = o.ranks;
  const std::int64_t m = o.m, n = o.n, k = o.k, es = 2;
  AgBuffers buf;
  COMPASS_ASSIGN(buf.src, alloc(m * k * es, "the input"));
  COMPASS_ASSIGN(buf.a, alloc(m * k * es, "the gathered input"));
  COMPASS_ASSIGN(buf.b, alloc(k * n * es, "the weight"));
  COMPASS_ASSIGN(buf.d, alloc(m * n * es, "the output"));
  COMPASS_ASSIGN(buf.dref, alloc(m * n * es, "the reference output"));
  COMPASS_ASSIGN(buf.ref32, alloc(m * n * 4, "the FP32 reference"));
  COMPASS_ASSIGN(buf.flags, alloc(static_cast<std::int64_t>(p) * 4, "the flags"));
  COMPASS_CUDA(cudaMemset(buf.flags.get(), 0, static_cast<std::size_t>(p) * 4), "the flags");
  for (int i = 0; i < p; ++i)
    buf.flag_ptrs.push_back(static_cast<const std::uint32_t*>(buf.flags.get()) + i);
  COMPASS_ASSIGN(buf.flag_ptrs_dev, upload(buf.flag_ptrs, "the flag pointers"));
  COMPASS_ASSIGN(buf.tiles_dev, upload(plan.tiles, "the tile plan"));
  COMPASS_ASSIGN(buf.waits_dev, upload(plan.waits, "the tile waits"));
  return buf;
}

// The random input and weight, and the input already gathered (for preset flags).
Status fill_ag_inputs(const FusedCheckOptions& o, const AgBuffers& buf, cudaStream_t stream) {
  const ElemType et = elem_of(o.dtype);
  const std::int64_t m = o.m, n = o.n, k = o.k, es = 2;
  COMPASS_CUDA(launch_fill_uniform(buf.src.get(), m * k, et, o.seed, stream), "the input");
  COMPASS_CUDA(launch_fill_uniform(buf.b.get(), k * n, et, o.seed + 1, stream), "the weight");
  COMPASS_CUDA(cudaMemcpyAsync(buf.a.get(), buf.src.get(), static_cast<std::size_t>(m * k * es),
                               cudaMemcpyDeviceToDevice, stream),
               "the gathered input");
  return Status::success();
}

// The FP32 reference into buf.ref32 (run now), and the cuBLASLt GEMM in the dtype into
// buf.dref as the timed reference.
Status ag_reference(const FusedCheckOptions& o, const AgBuffers& buf, cudaStream_t stream,
                    LtReference& ref) {
  const std::int64_t m = o.m, n = o.n, k = o.k;
  GemmCall call{m, n,       k,           buf.src.get(), k, buf.b.get(), n, buf.ref32.get(),
                n, o.dtype, DType::fp32, false};
  COMPASS_ASSIGN(LtGemm ref_gemm,
                 LtGemm::prepare(ref.lt, call, kLtWorkspaceBytes, "the FP32 reference"));
  COMPASS_TRY(ref_gemm.run(ref.ws.get(), stream));
  call.c = buf.dref.get();
  call.out = o.dtype;
  COMPASS_ASSIGN(LtGemm timed_ref,
                 LtGemm::prepare(ref.lt, call, kLtWorkspaceBytes, "the cuBLASLt GEMM"));
  ref.timed.push_back(std::move(timed_ref));
  return Status::success();
}

FusedAgArgs ag_args(const FusedCheckOptions& o, const AgBuffers& buf, const AgTilePlan& plan,
                    const MappedFault& fault) {
  const std::int64_t m = o.m, n = o.n, k = o.k;
  FusedAgArgs args;
  args.type = elem_of(o.dtype);
  args.m = m, args.n = n, args.k = k;
  args.a = buf.a.get(), args.lda = k, args.b = buf.b.get(), args.ldb = n, args.d = buf.d.get(),
  args.ldd = n;
  args.tiles = static_cast<const AgTile*>(buf.tiles_dev.get());
  args.num_tiles = static_cast<int>(plan.tiles.size());
  args.waits = static_cast<const std::int32_t*>(buf.waits_dev.get());
  args.wait.flags = static_cast<const std::uint32_t* const*>(buf.flag_ptrs_dev.get());
  args.wait.timeout_ns = static_cast<long long>(o.timeout_s * 1e9);
  args.wait.fault = fault.device();
  args.wait.rank = 0;
  return args;
}

// How the AG check releases its pieces: in a seeded shuffle of the pieces (not their
// consumption order; without the last piece under FusedRelease::never), each after a pause of
// delay_s, by stream memory operations. With preset flags nothing is released.
struct AgRelease {
  std::vector<int> order;
  double delay_s = 0;  // read by a host function on the release stream: outlives the iterations
  StreamMemOps ops;
};

// The release of `iterations` iterations; with preset flags every iteration's target
// (1..iterations) is reached at once.
Result<AgRelease> ag_release(const FusedCheckOptions& o, const AgBuffers& buf, int iterations) {
  const int p = o.ranks;
  AgRelease rel;
  if (o.release != FusedRelease::preset) {
    COMPASS_ASSIGN(rel.ops, StreamMemOps::load());
  }
  if (o.release == FusedRelease::preset) {
    const std::vector<std::uint32_t> v(static_cast<std::size_t>(p),
                                       static_cast<std::uint32_t>(iterations));
    COMPASS_CUDA(cudaMemcpy(buf.flags.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice),
                 "the flags");
  }
  rel.order.resize(static_cast<std::size_t>(p));
  std::iota(rel.order.begin(), rel.order.end(), 0);
  std::mt19937 rng(o.seed);
  std::shuffle(rel.order.begin(), rel.order.end(), rng);
  if (o.release == FusedRelease::never)
    rel.order.erase(std::find(rel.order.begin(), rel.order.end(), p - 1));  // the last piece
  rel.delay_s = o.release_delay_s;
  return rel;
}

// The AG check's streams: the kernel runs on `compute`; `copy` poisons the gathered input once
// the previous kernel is done (`kernel_done`), and the next kernel waits for that (`poisoned`)
// while the pieces are released on `copy`.
struct AgStreams {
  Stream compute, copy;
  Event kernel_done, poisoned;
};

// Device-to-device copies on their own stream, enqueued so that they outlast the kernel that is
// launched next (the kernel's speed beside copy-engine traffic).
struct BackgroundCopies {
  DeviceMemory src, dst;
  std::int64_t bytes = 0;
  double copy_s = 0;  ///< one copy alone
  Stream stream;
};

Result<BackgroundCopies> background_copies(std::int64_t bytes) {
  BackgroundCopies bg;
  bg.bytes = bytes;
  COMPASS_ASSIGN(bg.src, alloc(bytes, "the background copy source"));
  COMPASS_ASSIGN(bg.dst, alloc(bytes, "the background copy destination"));
  COMPASS_ASSIGN(bg.stream, Stream::create(0, 0));
  COMPASS_ASSIGN(std::vector<double> t, time_loop(1, 3, bg.stream.get(), [&](int) -> Status {
                   COMPASS_CUDA(cudaMemcpyAsync(bg.dst.get(), bg.src.get(),
                                                static_cast<std::size_t>(bytes),
                                                cudaMemcpyDeviceToDevice, bg.stream.get()),
                                "the background copy");
                   return Status::success();
                 }));
  bg.copy_s = median_of(t);
  return bg;
}

Status enqueue_copies(const BackgroundCopies& bg, double duration_s) {
  const int copies = static_cast<int>(std::ceil(duration_s / std::max(bg.copy_s, 1e-6))) + 1;
  for (int i = 0; i < copies; ++i)
    COMPASS_CUDA(cudaMemcpyAsync(bg.dst.get(), bg.src.get(), static_cast<std::size_t>(bg.bytes),
                                 cudaMemcpyDeviceToDevice, bg.stream.get()),
                 "the background copy");
  return Status::success();
}

Status poison_gathered_input(const AgBuffers& buf, std::int64_t bytes, const AgStreams& st) {
  COMPASS_CUDA(cudaStreamWaitEvent(st.copy.get(), st.kernel_done.get(), 0), "the release stream");
  COMPASS_CUDA(cudaMemsetAsync(buf.a.get(), 0xff, static_cast<std::size_t>(bytes), st.copy.get()),
               "poisoning the input with NaN");
  COMPASS_CUDA(cudaEventRecord(st.poisoned.get(), st.copy.get()), "the release stream");
  COMPASS_CUDA(cudaStreamWaitEvent(st.compute.get(), st.poisoned.get(), 0), "the kernel stream");
  return Status::success();
}

// Copies the pieces into the gathered input in release order, each followed by its flag set to
// `epoch`.
Status release_pieces(AgRelease& rel, const std::vector<Piece>& pieces, const AgBuffers& buf,
                      std::int64_t row_bytes, cudaStream_t copy, std::uint32_t epoch) {
  for (int pi : rel.order) {
    const Piece& pc = pieces[static_cast<std::size_t>(pi)];
    if (rel.delay_s > 0)
      COMPASS_CUDA(cudaLaunchHostFunc(copy, sleep_on_host, &rel.delay_s), "the release delay");
    COMPASS_CUDA(cudaMemcpyAsync(static_cast<char*>(buf.a.get()) + pc.row * row_bytes,
                                 static_cast<char*>(buf.src.get()) + pc.row * row_bytes,
                                 static_cast<std::size_t>(pc.rows * row_bytes),
                                 cudaMemcpyDeviceToDevice, copy),
                 fmt::format("the copy of chunk {}", pc.chunk));
    COMPASS_TRY(rel.ops.check(
        rel.ops.write(copy,
                      reinterpret_cast<CUdeviceptr>(buf.flag_ptrs[static_cast<std::size_t>(pi)]),
                      epoch, CU_STREAM_WRITE_VALUE_DEFAULT),
        "cuStreamWriteValue32", fmt::format("the flag of chunk {}", pc.chunk)));
  }
  return Status::success();
}

Result<FusedCheckReport> run_ag(const FusedCheckOptions& o, const std::string& kernel,
                                FusedCheckReport rep) {
  const int p = o.ranks;
  const std::int64_t m = o.m, n = o.n, k = o.k, es = 2;
  const std::vector<Piece> pieces = ag_pieces(o);
  COMPASS_ASSIGN(AgTilePlan plan,
                 ag_tile_plan(m, n, fused_tile_shape(kernel == "sm90"), pieces, kFusedSwizzle));
  rep.tiles = static_cast<int>(plan.tiles.size());
  COMPASS_ASSIGN(AgBuffers buf, ag_buffers(o, plan));
  MappedFault fault;
  COMPASS_TRY(fault.init());

  AgStreams st;
  COMPASS_ASSIGN(st.compute, Stream::create(0, 0));
  COMPASS_ASSIGN(st.copy, Stream::create(0, -1));
  COMPASS_TRY(fill_ag_inputs(o, buf, st.compute.get()));
  COMPASS_ASSIGN(LtReference ref, lt_reference());
  COMPASS_TRY(ag_reference(o, buf, st.compute.get(), ref));
  COMPASS_TRY(time_reference(o, ref, st.compute.get(), rep));

  FusedAgArgs args = ag_args(o, buf, plan, fault);
  COMPASS_ASSIGN(DeviceInfo info, device_info(0));
  auto launch = [&](cudaStream_t s) -> cudaError_t {
    return kernel == "sm90" ? launch_fused_ag_sm90(args, info.sm_count, s)
                            : launch_fused_ag_sm80(args, s);
  };
  COMPASS_ASSIGN(AgRelease rel, ag_release(o, buf, o.warmup + o.repeat));
  COMPASS_ASSIGN(st.kernel_done, Event::create(0, false));
  COMPASS_ASSIGN(st.poisoned, Event::create(0, false));
  COMPASS_CUDA(cudaEventRecord(st.kernel_done.get(), st.compute.get()), "setup");

  const bool released = o.release != FusedRelease::preset;
  std::optional<BackgroundCopies> bg;
  if (o.beside_copies) {
    COMPASS_ASSIGN(bg, background_copies(std::int64_t{256} << 20));
  }
  auto iteration = [&](int i) -> Status {
    const auto epoch = static_cast<std::uint32_t>(i + 1);
    args.wait.target = ag_flag_target(epoch);
    if (released) COMPASS_TRY(poison_gathered_input(buf, m * k * es, st));
    // Enough copies to outlast the kernel by a margin (it runs about as long as cuBLASLt).
    if (bg) COMPASS_TRY(enqueue_copies(*bg, 1.5 * rep.reference_median_s + 1e-3));
    COMPASS_CUDA(launch(st.compute.get()), fmt::format("the fused AG-GEMM ({})", kernel));
    COMPASS_CUDA(cudaEventRecord(st.kernel_done.get(), st.compute.get()), "the kernel stream");
    if (released) COMPASS_TRY(release_pieces(rel, pieces, buf, k * es, st.copy.get(), epoch));
    return Status::success();
  };
  auto times = time_loop(o.warmup, o.repeat, st.compute.get(), iteration);
  if (const FusedFault f = fault.read(); f.code != kFaultNone) {
    const int piece = f.flag;
    const int chunk = piece >= 0 && piece < p ? pieces[static_cast<std::size_t>(piece)].chunk : -1;
    return make_error("{}", fused_fault_message(f, "fused AG-GEMM", o.timeout_s, chunk));
  }
  if (!times.ok()) return times.error();
  rep.times_s = *times;
  rep.median_s = median_of(rep.times_s);
  COMPASS_CUDA(cudaStreamSynchronize(st.copy.get()), "the release stream");
  if (bg) COMPASS_CUDA(cudaStreamSynchronize(bg->stream.get()), "the background copies");
  Compare c;
  COMPASS_TRY(compare_into(c, buf.d.get(), elem_of(o.dtype),
                           static_cast<const float*>(buf.ref32.get()), m, n, n, st.compute.get()));
  record_error(c, rep);
  return rep;
}

// ---- GEMM-RS ---------------------------------------------------------------------------

// One virtual rank of the RS check: its input and weight, the p partial slots of its own chunk
// (slot q from rank q), its output chunk and the first iteration's copy of it, its tile plan
// with the pieces' rows, slots and counters uploaded, and its kernel's arguments.
struct RsRank {
  DeviceMemory a, b, slots, y, first, tiles, rows, outs, ctrs;
  Stream stream;
  RsTilePlan plan;
  FusedRsArgs args;
};

// The GEMM-RS kernel of the check ("sm90" or "sm80") and the SMs of GPU 0 (sm90 is persistent).
struct RsKernel {
  bool sm90 = false;
  int sm_count = 0;
  cudaError_t launch(const FusedRsArgs& args, cudaStream_t stream) const {
    return sm90 ? launch_fused_rs_sm90(args, sm_count, stream) : launch_fused_rs_sm80(args, stream);
  }
};

// What the RS iterations share: the ranks, the chunk counters (chunk j's is counter + j), the
// tiles each rank contributes to each chunk, the stream memory operations and the events that
// fork the ranks' streams from rank 0's and join the owners' reductions back.
struct RsShared {
  StreamMemOps ops;
  RsKernel kernel;
  std::uint32_t* counter = nullptr;
  std::vector<RsRank> ranks;
  std::vector<std::vector<int>> tiles_per_chunk;  // [rank][chunk]
  Event fork;
  std::vector<Event> joins;  // [chunk]
};

// Rank 0's compute order (o.order, or p-1, ..., 0: the own chunk last).
std::vector<int> rs_order(const FusedCheckOptions& o) {
  std::vector<int> order0 = o.order;
  if (order0.empty())
    for (int i = o.ranks - 1; i >= 0; --i) order0.push_back(i);
  return order0;
}

// Rank r's stream and memory, its input and weight filled.
Status rs_rank_buffers(const FusedCheckOptions& o, int r, RsRank& rk) {
  const int p = o.ranks;
  const ElemType et = elem_of(o.dtype);
  const std::int64_t m = o.m, n = o.n, kr = o.k / p, es = 2;
  const std::int64_t rows = workload::row_share(check_op(o), r).len;
  COMPASS_ASSIGN(rk.stream, Stream::create(0, 0));
  COMPASS_ASSIGN(rk.a, alloc(m * kr * es, "an input"));
  COMPASS_ASSIGN(rk.b, alloc(kr * n * es, "a weight"));
  COMPASS_ASSIGN(rk.slots,
                 alloc(static_cast<std::int64_t>(p) * rows * n * es, "the partial slots"));
  COMPASS_ASSIGN(rk.y, alloc(rows * n * es, "an output"));
  COMPASS_ASSIGN(rk.first, alloc(rows * n * es, "the first output"));
  COMPASS_CUDA(launch_fill_uniform(rk.a.get(), m * kr, et, o.seed + 10 + r, rk.stream.get()),
               "an input");
  COMPASS_CUDA(launch_fill_uniform(rk.b.get(), kr * n, et, o.seed + 100 + r, rk.stream.get()),
               "a weight");
  return Status::success();
}

FusedRsArgs rs_args(const FusedCheckOptions& o, const RsRank& rk) {
  const std::int64_t m = o.m, n = o.n, kr = o.k / o.ranks;
  FusedRsArgs a;
  a.type = elem_of(o.dtype);
  a.m = m, a.n = n, a.k = kr;
  a.a = rk.a.get(), a.lda = kr, a.b = rk.b.get(), a.ldb = n;
  a.tiles = static_cast<const RsTile*>(rk.tiles.get());
  a.num_tiles = static_cast<int>(rk.plan.tiles.size());
  a.num_pieces = o.ranks;
  a.piece_row = static_cast<const std::int64_t*>(rk.rows.get());
  a.piece_out = static_cast<void* const*>(rk.outs.get());
  a.ldd = n;
  a.piece_counter = static_cast<std::uint32_t* const*>(rk.ctrs.get());
  return a;
}

// Rank r's pieces and plan: it computes chunk (order0[i] + r) mod p at position i, its whole
// rows, into slot r of the chunk's owner. Returns the tiles it contributes to each chunk.
Result<std::vector<int>> plan_rs_rank(const FusedCheckOptions& o, const std::vector<int>& order0,
                                      int r, RsShared& sh) {
  const workload::OperatorSpec op = check_op(o);
  const int p = o.ranks;
  const std::int64_t m = o.m, n = o.n, es = 2;
  RsRank& rk = sh.ranks[static_cast<std::size_t>(r)];
  std::vector<Piece> pieces;
  std::vector<std::int64_t> rows;
  std::vector<void*> outs;
  std::vector<std::uint32_t*> ctrs;
  for (int c0 : order0) {
    const int j = (c0 + r) % p;
    const workload::RowRange share = workload::row_share(op, j);
    pieces.push_back(Piece{share.off, share.len, j, {}});
    rows.push_back(share.off);
    outs.push_back(static_cast<char*>(sh.ranks[static_cast<std::size_t>(j)].slots.get()) +
                   static_cast<std::int64_t>(r) * share.len * n * es);
    ctrs.push_back(sh.counter + j);
  }
  COMPASS_ASSIGN(rk.plan, rs_tile_plan(m, n, fused_tile_shape(sh.kernel.sm90), pieces, kFusedSwizzle));
  COMPASS_ASSIGN(auto per_chunk, rs_tiles_per_chunk(rk.plan, pieces, p));
  COMPASS_ASSIGN(rk.tiles, upload(rk.plan.tiles, "a tile plan"));
  COMPASS_ASSIGN(rk.rows, upload(rows, "the piece rows"));
  COMPASS_ASSIGN(rk.outs, upload(outs, "the piece slots"));
  COMPASS_ASSIGN(rk.ctrs, upload(ctrs, "the piece counters"));
  rk.args = rs_args(o, rk);
  return per_chunk;
}

// The FP32 reference into ref32: the sum of the p rank GEMMs (run now); the timed reference:
// the p GEMMs in the dtype, each into dref.
Status rs_reference(const FusedCheckOptions& o, const std::vector<RsRank>& ranks,
                    const DeviceMemory& ref32, const DeviceMemory& dref, LtReference& ref) {
  const int p = o.ranks;
  const std::int64_t m = o.m, n = o.n, kr = o.k / p;
  cudaStream_t s0 = ranks[0].stream.get();
  for (int r = 0; r < p; ++r) {
    const RsRank& rk = ranks[static_cast<std::size_t>(r)];
    GemmCall call{m, n,           kr, rk.a.get(), kr,          rk.b.get(),
                  n, ref32.get(), n,  o.dtype,    DType::fp32, r > 0};
    COMPASS_ASSIGN(LtGemm g,
                   LtGemm::prepare(ref.lt, call, kLtWorkspaceBytes, "the FP32 reference"));
    COMPASS_TRY(g.run(ref.ws.get(), s0));
    COMPASS_CUDA(cudaStreamSynchronize(s0), "the FP32 reference");
  }
  for (int r = 0; r < p; ++r) {
    const RsRank& rk = ranks[static_cast<std::size_t>(r)];
    GemmCall call{m, n, kr, rk.a.get(), kr, rk.b.get(), n, dref.get(), n, o.dtype, o.dtype, false};
    COMPASS_ASSIGN(LtGemm g,
                   LtGemm::prepare(ref.lt, call, kLtWorkspaceBytes, "the cuBLASLt GEMMs"));
    ref.timed.push_back(std::move(g));
  }
  return Status::success();
}

// Chunk j's owner waits until the chunk's counter reaches st.counter_target, sums the p partial
// slots in st.rank_order into its output and, for j > 0, joins rank 0's stream. With
// `missing_tile` the sum then waits for one tile more, in the kernel with the clock timeout
// (after the stream's wait, so it does not hold SMs the GEMM-RS tiles still need): it traps.
Status reduce_rs_chunk(const FusedCheckOptions& o, RsShared& sh, int j, const ReductionStep& st,
                       bool missing_tile, const MappedFault& fault) {
  const int p = o.ranks;
  const std::int64_t n = o.n, es = 2;
  const std::int64_t rows = workload::row_share(check_op(o), j).len;
  RsRank& rk = sh.ranks[static_cast<std::size_t>(j)];
  COMPASS_TRY(
      sh.ops.check(sh.ops.wait(rk.stream.get(), reinterpret_cast<CUdeviceptr>(sh.counter + j),
                               st.counter_target, CU_STREAM_WAIT_VALUE_GEQ),
                   "cuStreamWaitValue32", fmt::format("the counter of chunk {}", j)));
  std::vector<const void*> parts;
  for (int q : st.rank_order)
    parts.push_back(static_cast<const char*>(rk.slots.get()) +
                    static_cast<std::int64_t>(q) * rows * n * es);
  if (missing_tile) {
    CounterWait w;
    w.counter = sh.counter + j;
    w.target = st.counter_target + 1;
    w.timeout_ns = static_cast<long long>(o.timeout_s * 1e9);
    w.fault = fault.device();
    w.rank = j;
    w.chunk = j;
    COMPASS_CUDA(launch_sum_ordered_wait_2d(rk.y.get(), n, parts.data(), p, n, rows, n,
                                            elem_of(o.dtype), w, rk.stream.get()),
                 fmt::format("the reduction of chunk {}", j));
  } else {
    COMPASS_CUDA(launch_sum_ordered_2d(rk.y.get(), n, parts.data(), p, n, rows, n,
                                       elem_of(o.dtype), rk.stream.get()),
                 fmt::format("the reduction of chunk {}", j));
  }
  if (j > 0) {
    cudaStream_t s0 = sh.ranks[0].stream.get();
    COMPASS_CUDA(cudaEventRecord(sh.joins[static_cast<std::size_t>(j)].get(), rk.stream.get()),
                 "the join");
    COMPASS_CUDA(cudaStreamWaitEvent(s0, sh.joins[static_cast<std::size_t>(j)].get(), 0),
                 "the join");
  }
  return Status::success();
}

// Iteration i of the RS check: every rank's fused kernel, forked from rank 0's stream, then each
// chunk's reduction by its owner (under FusedRelease::never the last chunk's waits for a tile
// that never comes).
Status rs_iteration(const FusedCheckOptions& o, RsShared& sh, int i, const MappedFault& fault) {
  const int p = o.ranks;
  const auto epoch = static_cast<std::uint32_t>(i + 1);
  COMPASS_ASSIGN(auto red, rs_reduction_plan(sh.tiles_per_chunk, epoch));
  cudaStream_t s0 = sh.ranks[0].stream.get();
  COMPASS_CUDA(cudaEventRecord(sh.fork.get(), s0), "the fork");
  for (int r = 0; r < p; ++r) {
    RsRank& rk = sh.ranks[static_cast<std::size_t>(r)];
    if (r > 0) COMPASS_CUDA(cudaStreamWaitEvent(rk.stream.get(), sh.fork.get(), 0), "the fork");
    COMPASS_CUDA(sh.kernel.launch(rk.args, rk.stream.get()),
                 fmt::format("the fused GEMM-RS of rank {}", r));
  }
  for (int j = 0; j < p; ++j)
    COMPASS_TRY(reduce_rs_chunk(o, sh, j, red[static_cast<std::size_t>(j)],
                                o.release == FusedRelease::never && j == p - 1, fault));
  return Status::success();
}

// Bits of iteration i against the first: iteration 0 keeps a copy of every output chunk, later
// ones count their differing bytes into `diff`.
Status compare_bits(const FusedCheckOptions& o, const std::vector<RsRank>& ranks, int i,
                    const DeviceMemory& diff) {
  const std::int64_t n = o.n, es = 2;
  const workload::OperatorSpec op = check_op(o);
  cudaStream_t s0 = ranks[0].stream.get();
  for (int j = 0; j < o.ranks; ++j) {
    const RsRank& rk = ranks[static_cast<std::size_t>(j)];
    const auto bytes = static_cast<std::size_t>(workload::row_share(op, j).len * n * es);
    if (i == 0)
      COMPASS_CUDA(cudaMemcpyAsync(rk.first.get(), rk.y.get(), bytes, cudaMemcpyDeviceToDevice, s0),
                   "a copy");
    else
      COMPASS_CUDA(
          launch_count_differences(rk.first.get(), rk.y.get(), static_cast<std::int64_t>(bytes),
                                   static_cast<unsigned long long*>(diff.get()), s0),
          "the bit comparison");
  }
  COMPASS_CUDA(cudaStreamSynchronize(s0), "the bit comparison");
  return Status::success();
}

Result<FusedCheckReport> run_rs(const FusedCheckOptions& o, const std::string& kernel,
                                FusedCheckReport rep) {
  const workload::OperatorSpec op = check_op(o);
  const int p = o.ranks;
  const std::int64_t m = o.m, n = o.n, es = 2;
  const std::vector<int> order0 = rs_order(o);

  RsShared sh;
  COMPASS_ASSIGN(sh.ops, StreamMemOps::load());
  COMPASS_ASSIGN(const DeviceInfo info, device_info(0));
  sh.kernel = RsKernel{kernel == "sm90", info.sm_count};
  MappedFault fault;
  COMPASS_TRY(fault.init());
  COMPASS_ASSIGN(LtReference ref, lt_reference());
  COMPASS_ASSIGN(DeviceMemory ref32, alloc(m * n * 4, "the FP32 reference"));
  COMPASS_ASSIGN(DeviceMemory dref, alloc(m * n * es, "the reference output"));
  COMPASS_ASSIGN(DeviceMemory counters,
                 alloc(static_cast<std::int64_t>(p) * 4, "the chunk counters"));
  COMPASS_CUDA(cudaMemset(counters.get(), 0, static_cast<std::size_t>(p) * 4),
               "the chunk counters");
  sh.counter = static_cast<std::uint32_t*>(counters.get());
  sh.ranks.resize(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    COMPASS_TRY(rs_rank_buffers(o, r, sh.ranks[static_cast<std::size_t>(r)]));
  for (int r = 0; r < p; ++r) {
    COMPASS_ASSIGN(auto per_chunk, plan_rs_rank(o, order0, r, sh));
    sh.tiles_per_chunk.push_back(per_chunk);
  }
  rep.tiles = static_cast<int>(sh.ranks[0].plan.tiles.size());

  cudaStream_t s0 = sh.ranks[0].stream.get();
  COMPASS_TRY(rs_reference(o, sh.ranks, ref32, dref, ref));
  COMPASS_TRY(time_reference(o, ref, s0, rep));

  COMPASS_ASSIGN(DeviceMemory diff, alloc(8, "the difference count"));
  COMPASS_CUDA(cudaMemset(diff.get(), 0, 8), "the difference count");
  COMPASS_ASSIGN(sh.fork, Event::create(0, false));
  for (int r = 0; r < p; ++r) {
    COMPASS_ASSIGN(Event e, Event::create(0, false));
    sh.joins.push_back(std::move(e));
  }
  std::vector<double> times;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    auto t = time_loop(0, 1, s0, [&](int) { return rs_iteration(o, sh, i, fault); });
    if (const FusedFault f = fault.read(); f.code != kFaultNone)
      return make_error("{}", fused_fault_message(f, "GEMM-RS ordered sum", o.timeout_s, f.flag));
    if (!t.ok()) return t.error();
    if (i >= o.warmup) times.push_back((*t)[0]);
    COMPASS_TRY(compare_bits(o, sh.ranks, i, diff));
  }
  unsigned long long differing = 0;
  COMPASS_CUDA(cudaMemcpy(&differing, diff.get(), 8, cudaMemcpyDeviceToHost),
               "the difference count");
  rep.bit_identical = differing == 0;
  rep.times_s = times;
  rep.median_s = median_of(times);
  Compare c;
  for (int j = 0; j < p; ++j) {
    const workload::RowRange share = workload::row_share(op, j);
    COMPASS_TRY(compare_into(c, sh.ranks[static_cast<std::size_t>(j)].y.get(), elem_of(o.dtype),
                             static_cast<const float*>(ref32.get()) + share.off * n, share.len, n,
                             n, s0));
  }
  record_error(c, rep);
  return rep;
}

}  // namespace

Result<FusedCheckReport> fused_check(const FusedCheckOptions& o) {
  COMPASS_TRY(device_count());
  COMPASS_CUDA(cudaSetDevice(0), "GPU 0");
  COMPASS_ASSIGN(DeviceInfo info, device_info(0));
  COMPASS_ASSIGN(std::string kernel, pick_fused_kernel(o.kernel, info));
  FusedCheckReport rep;
  rep.device = info.name;
  rep.kernel = fused_kernel_label(kernel);
  rep.tolerance = check_tolerance(o.dtype);
  if (o.kind == workload::OpKind::ag_gemm) return run_ag(o, kernel, std::move(rep));
  return run_rs(o, kernel, std::move(rep));
}

Result<std::string> pick_fused_kernel(std::string_view requested, const DeviceInfo& info) {
  FusedKernelTarget t;
  t.sm90_built = fused_sm90_built();
  t.sm80_built = fused_sm80_built();
  t.cc = std::atoi(info.arch.c_str() + 3);
  t.name = info.name;
  t.arch = info.arch;
  return fused_kernel_for(requested, t);
}

TileShape fused_tile_shape(bool sm90) {
  return sm90 ? TileShape{kSm90TileM, kSm90TileN} : TileShape{kSm80TileM, kSm80TileN};
}

std::string fused_kernel_label(std::string_view kernel) {
  return kernel == "sm90" ? "sm90 (CUTLASS 3.x TMA + WGMMA, persistent)"
                          : "sm80 (CUTLASS 2.x mma.sync)";
}

bool fused_kernels_built() { return fused_sm80_built(); }

}  // namespace compass::backends::cuda::device
