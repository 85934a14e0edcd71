// GPU calibration: GEMM time table (cuBLASLt BF16), copy bandwidths, launch overheads and the
// slowdown of a GEMM beside copy-engine and SM-driven copies. See docs/cuda-backend.md.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "compass/backends/cuda/device/cuda_util.hpp"
#include "compass/backends/cuda/device/entry.hpp"
#include "compass/backends/cuda/device/kernels.hpp"
#include "compass/backends/cuda/device/lt_gemm.hpp"

#if defined(COMPASS_HAVE_NCCL_HEADER)
#include <nccl.h>
#endif

namespace compass::backends::cuda::device {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The buffers and handles the measurements share.
struct Bench {
  int device = 0;
  bool quick = false;
  Stream a, b;  // a: GEMMs; b: the concurrent copy or kernel
  Event start_a, stop_a, start_b, stop_b;
  LtHandle lt;
  DeviceMemory ws, ga, gb, gc;  // GEMM workspace and operands (bf16)
  DeviceMemory src, dst;        // copy buffers
  std::int64_t copy_bytes = 0;
};

// Seconds per GEMM, by CUDA events over a loop sized to last about `target_s`.
Result<double> time_gemm(Bench& bench, const LtGemm& g, double target_s) {
  COMPASS_CUDA(cudaSetDevice(bench.device), "GEMM timing");
  for (int i = 0; i < 2; ++i) COMPASS_TRY(g.run(bench.ws.get(), bench.a.get()));
  COMPASS_CUDA(cudaEventRecord(bench.start_a.get(), bench.a.get()), "GEMM timing");
  COMPASS_TRY(g.run(bench.ws.get(), bench.a.get()));
  COMPASS_CUDA(cudaEventRecord(bench.stop_a.get(), bench.a.get()), "GEMM timing");
  COMPASS_ASSIGN(double once, elapsed_s(bench.start_a, bench.stop_a));
  const int reps = std::clamp(static_cast<int>(target_s / std::max(once, 1e-6)), 3, 200);
  COMPASS_CUDA(cudaEventRecord(bench.start_a.get(), bench.a.get()), "GEMM timing");
  for (int i = 0; i < reps; ++i) COMPASS_TRY(g.run(bench.ws.get(), bench.a.get()));
  COMPASS_CUDA(cudaEventRecord(bench.stop_a.get(), bench.a.get()), "GEMM timing");
  COMPASS_ASSIGN(double total, elapsed_s(bench.start_a, bench.stop_a));
  return total / reps;
}

Result<LtGemm> prepare_gemm(Bench& bench, const GemmShape& sh) {
  GemmCall call;
  call.m = sh.m;
  call.n = sh.n;
  call.k = sh.k;
  call.a = bench.ga.get();
  call.lda = sh.k;
  call.b = bench.gb.get();
  call.ldb = sh.n;
  call.c = bench.gc.get();
  call.ldc = sh.n;
  call.in = call.out = DType::bf16;
  return LtGemm::prepare(bench.lt, call, kLtWorkspaceBytes,
                         fmt::format("calibration GEMM m {} n {} k {}", sh.m, sh.n, sh.k));
}

// Seconds per device-to-device copy of bench.copy_bytes on stream b.
Result<double> time_copy(Bench& bench, int reps) {
  COMPASS_CUDA(cudaSetDevice(bench.device), "copy timing");
  const auto bytes = static_cast<size_t>(bench.copy_bytes);
  COMPASS_CUDA(cudaMemcpyAsync(bench.dst.get(), bench.src.get(), bytes, cudaMemcpyDeviceToDevice,
                               bench.b.get()),
               "the copy bandwidth test");
  COMPASS_CUDA(cudaEventRecord(bench.start_b.get(), bench.b.get()), "copy timing");
  for (int i = 0; i < reps; ++i) {
    COMPASS_CUDA(cudaMemcpyAsync(bench.dst.get(), bench.src.get(), bytes, cudaMemcpyDeviceToDevice,
                                 bench.b.get()),
                 "the copy bandwidth test");
  }
  COMPASS_CUDA(cudaEventRecord(bench.stop_b.get(), bench.b.get()), "copy timing");
  COMPASS_ASSIGN(double total, elapsed_s(bench.start_b, bench.stop_b));
  return total / reps;
}

// Host-side cost of issuing `count` operations back to back (the GPU drains them meanwhile).
template <typename Issue>
Result<double> time_issue(Bench& bench, int count, Issue issue, std::string_view what) {
  COMPASS_CUDA(cudaSetDevice(bench.device), what);
  for (int i = 0; i < 100; ++i) COMPASS_CUDA(issue(), what);
  COMPASS_CUDA(cudaStreamSynchronize(bench.b.get()), what);
  const auto t0 = Clock::now();
  for (int i = 0; i < count; ++i) COMPASS_CUDA(issue(), what);
  COMPASS_CUDA(cudaStreamSynchronize(bench.b.get()), what);
  return seconds_since(t0) / count;
}

// GEMM time beside work that `start_beside(duration_s)` enqueues on stream b for about
// `duration_s`, divided by the GEMM time alone.
template <typename Beside>
Result<double> gemm_slowdown(Bench& bench, const LtGemm& g, double gemm_s, int reps,
                             Beside start_beside) {
  COMPASS_CUDA(cudaSetDevice(bench.device), "interference");
  COMPASS_CUDA(cudaDeviceSynchronize(), "interference");
  // The concurrent work is enqueued first and outlasts the GEMMs by a margin.
  COMPASS_TRY(start_beside(1.5 * gemm_s * reps + 1e-3));
  COMPASS_CUDA(cudaEventRecord(bench.start_a.get(), bench.a.get()), "interference");
  for (int i = 0; i < reps; ++i) COMPASS_TRY(g.run(bench.ws.get(), bench.a.get()));
  COMPASS_CUDA(cudaEventRecord(bench.stop_a.get(), bench.a.get()), "interference");
  COMPASS_ASSIGN(double total, elapsed_s(bench.start_a, bench.stop_a));
  COMPASS_CUDA(cudaDeviceSynchronize(), "interference");
  return total / reps / gemm_s;
}

#if defined(COMPASS_HAVE_NCCL_HEADER)
// NCCL is loaded at run time (see CMakeLists.txt); only these entry points are used.
struct Nccl {
  void* lib = nullptr;
  decltype(&ncclCommInitAll) init_all = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  ~Nccl() {
    if (lib != nullptr) dlclose(lib);
  }
};

// Host time of one 4-byte all-reduce over all visible GPUs (issue + completion, small enough
// that bandwidth plays no part), or a note saying why it was not measured.
Result<double> collective_launch(int ndev, int reps) {
  Nccl n;
  n.lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (n.lib == nullptr) return make_error("libnccl.so.2 could not be loaded: {}", dlerror());
  n.init_all = reinterpret_cast<decltype(n.init_all)>(dlsym(n.lib, "ncclCommInitAll"));
  n.all_reduce = reinterpret_cast<decltype(n.all_reduce)>(dlsym(n.lib, "ncclAllReduce"));
  n.group_start = reinterpret_cast<decltype(n.group_start)>(dlsym(n.lib, "ncclGroupStart"));
  n.group_end = reinterpret_cast<decltype(n.group_end)>(dlsym(n.lib, "ncclGroupEnd"));
  n.destroy = reinterpret_cast<decltype(n.destroy)>(dlsym(n.lib, "ncclCommDestroy"));
  if (!n.init_all || !n.all_reduce || !n.group_start || !n.group_end || !n.destroy) {
    return make_error("libnccl.so.2 lacks an NCCL entry point");
  }
  ndev = std::min(ndev, 8);
  std::vector<ncclComm_t> comms(ndev);
  std::vector<int> devs(ndev);
  for (int i = 0; i < ndev; ++i) devs[i] = i;
  if (n.init_all(comms.data(), ndev, devs.data()) != ncclSuccess) {
    return make_error("ncclCommInitAll failed over {} GPUs", ndev);
  }
  struct CommGuard {
    Nccl& n;
    std::vector<ncclComm_t>& c;
    ~CommGuard() {
      for (ncclComm_t x : c) (void)n.destroy(x);
    }
  } guard{n, comms};
  std::vector<DeviceMemory> bufs;
  std::vector<Stream> streams;
  for (int i = 0; i < ndev; ++i) {
    COMPASS_ASSIGN(DeviceMemory m, DeviceMemory::allocate(i, 256, "NCCL buffer"));
    bufs.push_back(std::move(m));
    COMPASS_ASSIGN(Stream s, Stream::create(i, 0));
    streams.push_back(std::move(s));
  }
  auto once = [&]() -> Status {
    if (n.group_start() != ncclSuccess) return make_error("ncclGroupStart failed");
    for (int i = 0; i < ndev; ++i) {
      if (n.all_reduce(bufs[i].get(), bufs[i].get(), 1, ncclFloat, ncclSum, comms[i],
                       streams[i].get()) != ncclSuccess) {
        return make_error("ncclAllReduce failed on GPU {}", i);
      }
    }
    if (n.group_end() != ncclSuccess) return make_error("ncclGroupEnd failed");
    return Status::success();
  };
  auto sync = [&]() -> Status {
    for (int i = 0; i < ndev; ++i) {
      COMPASS_CUDA(cudaSetDevice(i), "NCCL timing");
      COMPASS_CUDA(cudaStreamSynchronize(streams[i].get()), "NCCL timing");
    }
    return Status::success();
  };
  for (int i = 0; i < 10; ++i) COMPASS_TRY(once());
  COMPASS_TRY(sync());
  const auto t0 = Clock::now();
  for (int i = 0; i < reps; ++i) COMPASS_TRY(once());
  COMPASS_TRY(sync());
  return seconds_since(t0) / reps;
}
#endif

// Streams, events and the cuBLASLt handle of `bench` on its device.
Status open_bench(Bench& bench) {
  const int dev = bench.device;
  COMPASS_ASSIGN(bench.a, Stream::create(dev, 0));
  COMPASS_ASSIGN(bench.b, Stream::create(dev, 0));
  COMPASS_ASSIGN(bench.start_a, Event::create(dev, true));
  COMPASS_ASSIGN(bench.stop_a, Event::create(dev, true));
  COMPASS_ASSIGN(bench.start_b, Event::create(dev, true));
  COMPASS_ASSIGN(bench.stop_b, Event::create(dev, true));
  COMPASS_ASSIGN(bench.lt, LtHandle::create(dev));
  return Status::success();
}

// Elements the GEMM operand buffers hold: A [m, k], B [k, n], C [m, n].
struct OperandCapacity {
  std::int64_t a = 0, b = 0, c = 0;

  void include(const GemmShape& sh) {
    a = std::max(a, sh.m * sh.k);
    b = std::max(b, sh.k * sh.n);
    c = std::max(c, sh.m * sh.n);
  }
  bool holds(const GemmShape& sh) const {
    return sh.m * sh.k <= a && sh.k * sh.n <= b && sh.m * sh.n <= c;
  }
};

// The GEMM table: allocates the workspace and operands for the largest shape, fills the inputs
// and times every shape (about `target_s` each). Returns what the operands hold.
Result<OperandCapacity> measure_gemm_table(Bench& bench, const std::vector<GemmShape>& shapes,
                                           double target_s, CalibrationResult& out) {
  const int dev = bench.device;
  OperandCapacity cap;
  for (const GemmShape& sh : shapes) cap.include(sh);
  COMPASS_ASSIGN(bench.ws, DeviceMemory::allocate(dev, kLtWorkspaceBytes, "cuBLASLt workspace"));
  COMPASS_ASSIGN(bench.ga, DeviceMemory::allocate(dev, cap.a * 2, "calibration A"));
  COMPASS_ASSIGN(bench.gb, DeviceMemory::allocate(dev, cap.b * 2, "calibration B"));
  COMPASS_ASSIGN(bench.gc, DeviceMemory::allocate(dev, cap.c * 2, "calibration C"));
  COMPASS_CUDA(launch_fill_uniform(bench.ga.get(), cap.a, ElemType::bf16, 11, bench.a.get()),
               "calibration inputs");
  COMPASS_CUDA(launch_fill_uniform(bench.gb.get(), cap.b, ElemType::bf16, 12, bench.a.get()),
               "calibration inputs");
  for (const GemmShape& sh : shapes) {
    COMPASS_ASSIGN(LtGemm g, prepare_gemm(bench, sh));
    COMPASS_ASSIGN(double t, time_gemm(bench, g, target_s));
    out.gemm.push_back({DType::bf16, sh.m, sh.n, sh.k, t});
    out.best_bf16_flops = std::max(out.best_bf16_flops, 2.0 * sh.m * sh.n * sh.k / t);
  }
  return cap;
}

// Device-to-device copy bandwidth: allocates the copy buffers (bench.copy_bytes each) and
// returns the seconds per copy.
Result<double> measure_copy(Bench& bench, bool quick, CalibrationResult& out) {
  const int dev = bench.device;
  COMPASS_ASSIGN(bench.src, DeviceMemory::allocate(dev, bench.copy_bytes, "copy source"));
  COMPASS_ASSIGN(bench.dst, DeviceMemory::allocate(dev, bench.copy_bytes, "copy destination"));
  COMPASS_CUDA(
      cudaMemsetAsync(bench.src.get(), 1, static_cast<size_t>(bench.copy_bytes), bench.b.get()),
      "copy source");
  COMPASS_ASSIGN(const double copy_s, time_copy(bench, quick ? 5 : 20));
  out.copy_bandwidth_bytes_per_s = static_cast<double>(bench.copy_bytes) / copy_s;
  return copy_s;
}

// Turns on peer access from bench.device to `peer`, or notes that the driver stages the copy.
Status enable_peer_access(const Bench& bench, int peer, CalibrationResult& out) {
  const int dev = bench.device;
  int can = 0;
  COMPASS_CUDA(cudaDeviceCanAccessPeer(&can, dev, peer), "peer copy test");
  if (can) {
    COMPASS_CUDA(cudaSetDevice(dev), "peer copy test");
    const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else {
      COMPASS_CUDA(e, "peer copy test");
    }
  } else {
    out.notes.push_back(
        fmt::format("GPU {} cannot access GPU {} directly: the peer copy is "
                    "staged by the driver",
                    dev, peer));
  }
  return Status::success();
}

// Bandwidth of copies from bench.device to another GPU (GPU 1, or GPU 0 from GPU 1+).
Status measure_peer_copy(Bench& bench, bool quick, CalibrationResult& out) {
  const int dev = bench.device;
  const int peer = dev == 0 ? 1 : 0;
  COMPASS_TRY(enable_peer_access(bench, peer, out));
  COMPASS_ASSIGN(DeviceMemory pdst, DeviceMemory::allocate(peer, bench.copy_bytes, "peer copy"));
  COMPASS_CUDA(cudaSetDevice(dev), "peer copy test");
  const int reps = quick ? 3 : 10;
  COMPASS_CUDA(cudaMemcpyPeerAsync(pdst.get(), peer, bench.src.get(), dev,
                                   static_cast<size_t>(bench.copy_bytes), bench.b.get()),
               "the peer copy test");
  COMPASS_CUDA(cudaEventRecord(bench.start_b.get(), bench.b.get()), "peer copy timing");
  for (int i = 0; i < reps; ++i) {
    COMPASS_CUDA(cudaMemcpyPeerAsync(pdst.get(), peer, bench.src.get(), dev,
                                     static_cast<size_t>(bench.copy_bytes), bench.b.get()),
                 "the peer copy test");
  }
  COMPASS_CUDA(cudaEventRecord(bench.stop_b.get(), bench.b.get()), "peer copy timing");
  COMPASS_ASSIGN(double t, elapsed_s(bench.start_b, bench.stop_b));
  out.peer_bandwidth_bytes_per_s = static_cast<double>(bench.copy_bytes) * reps / t;
  return Status::success();
}

// Host-side issue cost of a small kernel and a small copy, and with more than one GPU the
// NCCL overhead (or a note saying why it was not measured).
Status measure_launch_overheads(Bench& bench, int ndev, bool quick, CalibrationResult& out) {
  const int launches = quick ? 1000 : 5000;
  COMPASS_ASSIGN(
      out.kernel_launch_s,
      time_issue(
          bench, launches, [&] { return launch_empty(bench.b.get()); }, "the kernel launch test"));
  COMPASS_ASSIGN(out.copy_launch_s, time_issue(
                                        bench, launches,
                                        [&] {
                                          return cudaMemcpyAsync(bench.dst.get(), bench.src.get(),
                                                                 256, cudaMemcpyDeviceToDevice,
                                                                 bench.b.get());
                                        },
                                        "the copy launch test"));
  if (ndev > 1) {
#if defined(COMPASS_HAVE_NCCL_HEADER)
    Result<double> coll = collective_launch(ndev, quick ? 100 : 500);
    if (coll.ok()) {
      out.collective_launch_s = *coll;
    } else {
      out.notes.push_back("NCCL overhead not measured: " + coll.error().message);
    }
#else
    out.notes.push_back("NCCL overhead not measured: built without nccl.h");
#endif
  }
  return Status::success();
}

// A GEMM `g` of `gemm_s` seconds and a copy of `copy_s` seconds alone: the interference tests
// run them against each other.
struct InterferencePair {
  const LtGemm& g;
  double gemm_s = 0;
  double copy_s = 0;
};

// The SM copy kernel of the interference test: a NCCL-like footprint of 16 blocks.
constexpr int kSmCopyBlocks = 16;

// Slowdown of the GEMM beside copy-engine copies.
Result<double> gemm_beside_copies(Bench& bench, const InterferencePair& pair, int reps) {
  return gemm_slowdown(bench, pair.g, pair.gemm_s, reps, [&](double duration_s) -> Status {
    const int copies = static_cast<int>(std::ceil(duration_s / pair.copy_s)) + 1;
    for (int i = 0; i < copies; ++i) {
      COMPASS_CUDA(
          cudaMemcpyAsync(bench.dst.get(), bench.src.get(), static_cast<size_t>(bench.copy_bytes),
                          cudaMemcpyDeviceToDevice, bench.b.get()),
          "the copy-engine interference test");
    }
    return Status::success();
  });
}

// Slowdown of the GEMM beside the SM copy kernel, sized by one pass of it alone.
Result<double> gemm_beside_sm_copy(Bench& bench, const InterferencePair& pair, int reps) {
  COMPASS_CUDA(cudaEventRecord(bench.start_b.get(), bench.b.get()), "SM copy timing");
  COMPASS_CUDA(launch_sm_copy(bench.dst.get(), bench.src.get(), bench.copy_bytes, kSmCopyBlocks, 1,
                              bench.b.get()),
               "the SM copy test");
  COMPASS_CUDA(cudaEventRecord(bench.stop_b.get(), bench.b.get()), "SM copy timing");
  COMPASS_ASSIGN(const double pass_s, elapsed_s(bench.start_b, bench.stop_b));
  return gemm_slowdown(bench, pair.g, pair.gemm_s, reps, [&](double duration_s) -> Status {
    const int passes = static_cast<int>(std::ceil(duration_s / pass_s)) + 1;
    COMPASS_CUDA(launch_sm_copy(bench.dst.get(), bench.src.get(), bench.copy_bytes, kSmCopyBlocks,
                                passes, bench.b.get()),
                 "the SM copy interference test");
    return Status::success();
  });
}

// Slowdown of the copy beside GEMMs: GEMMs first (on a), then timed copies (on b).
Result<double> copy_beside_gemms(Bench& bench, const InterferencePair& pair, bool quick) {
  COMPASS_CUDA(cudaDeviceSynchronize(), "interference");
  const int copy_reps = quick ? 5 : 10;
  const int gemms =
      static_cast<int>(std::ceil((1.5 * pair.copy_s * copy_reps + 1e-3) / pair.gemm_s)) + 1;
  for (int i = 0; i < gemms; ++i) COMPASS_TRY(pair.g.run(bench.ws.get(), bench.a.get()));
  COMPASS_CUDA(cudaEventRecord(bench.start_b.get(), bench.b.get()), "interference");
  for (int i = 0; i < copy_reps; ++i) {
    COMPASS_CUDA(
        cudaMemcpyAsync(bench.dst.get(), bench.src.get(), static_cast<size_t>(bench.copy_bytes),
                        cudaMemcpyDeviceToDevice, bench.b.get()),
        "the copy beside GEMMs");
  }
  COMPASS_CUDA(cudaEventRecord(bench.stop_b.get(), bench.b.get()), "interference");
  COMPASS_ASSIGN(double t, elapsed_s(bench.start_b, bench.stop_b));
  COMPASS_CUDA(cudaDeviceSynchronize(), "interference");
  return t / copy_reps / pair.copy_s;
}

// A large square GEMM beside (1) copy-engine copies, (2) an SM copy kernel; and the copy beside
// GEMMs. Skipped when the GEMM operands do not hold the large GEMM.
Status measure_interference(Bench& bench, const OperandCapacity& cap, double gemm_target_s,
                            double copy_s, bool quick, CalibrationResult& out) {
  const GemmShape big = quick ? GemmShape{4096, 4096, 4096} : GemmShape{8192, 8192, 8192};
  if (!cap.holds(big)) return Status::success();
  COMPASS_ASSIGN(LtGemm g, prepare_gemm(bench, big));
  COMPASS_ASSIGN(const double gemm_s, time_gemm(bench, g, gemm_target_s));
  const InterferencePair pair{g, gemm_s, copy_s};
  const int reps = quick ? 10 : 30;
  COMPASS_ASSIGN(out.gemm_slowdown_copy_engine, gemm_beside_copies(bench, pair, reps));
  COMPASS_ASSIGN(out.gemm_slowdown_sm_copy, gemm_beside_sm_copy(bench, pair, reps));
  COMPASS_ASSIGN(out.comm_slowdown_beside_gemm, copy_beside_gemms(bench, pair, quick));
  return Status::success();
}

// The fused AG-GEMM kernel with every flag preset against cuBLASLt on one square GEMM (its
// overhead), then beside copy-engine copies (its slowdown). The standalone check
// (fused_check) runs on GPU 0 and verifies the result against cuBLASLt; where the kernels are
// not built, the GPU cannot run them or the result is wrong, a note says so and the profile
// keeps its defaults.
void measure_fused(int device, bool quick, CalibrationResult& out) {
  if (device != 0) {
    out.notes.push_back("fused kernel not measured: the standalone fused check runs on GPU 0");
    return;
  }
  FusedCheckOptions f;
  f.kind = workload::OpKind::ag_gemm;
  f.m = f.n = f.k = quick ? 4096 : 8192;
  f.ranks = 8;
  f.repeat = quick ? 5 : 20;
  f.warmup = 2;
  Result<FusedCheckReport> alone = device::fused_check(f);
  if (!alone.ok()) {
    out.notes.push_back("fused kernel not measured: " + alone.error().message);
    return;
  }
  if (!alone->passed() || !(alone->reference_median_s > 0)) {
    out.notes.push_back(fmt::format(
        "fused kernel not measured: its result differs from cuBLASLt (error {:.3g}, {} NaN)",
        alone->max_rel_error, alone->nan_count));
    return;
  }
  out.fused_kernel = alone->kernel;
  out.fused_gemm_overhead = alone->median_s / alone->reference_median_s;
  f.beside_copies = true;
  Result<FusedCheckReport> beside = device::fused_check(f);
  if (!beside.ok() || !beside->passed()) {
    out.notes.push_back("fused kernel beside copies not measured: " +
                        (beside.ok() ? std::string("its result differs from cuBLASLt")
                                     : beside.error().message));
    return;
  }
  out.fused_slowdown_copy_engine = beside->median_s / alone->median_s;
  out.notes.push_back(fmt::format("fused kernel {} on {}^3 BF16, {} chunks, flags preset",
                                  alone->kernel, f.m, f.ranks));
}

}  // namespace

Result<CalibrationResult> calibrate(const CalibrateOptions& options) {
  const auto t0 = Clock::now();
  COMPASS_ASSIGN(const int ndev, device_count());
  if (options.device >= ndev) {
    return make_error("device {} does not exist ({} CUDA device{} visible)", options.device, ndev,
                      ndev == 1 ? "" : "s");
  }
  CalibrationResult out;
  COMPASS_ASSIGN(DeviceInfo info, device_info(options.device));
  out.device = info.name;
  out.arch = info.arch;
  out.sm_count = info.sm_count;
  out.device_count = ndev;

  Bench bench;
  bench.device = options.device;
  bench.quick = options.quick;
  COMPASS_TRY(open_bench(bench));

  const double gemm_target_s = options.quick ? 5e-3 : 20e-3;
  COMPASS_ASSIGN(
      const OperandCapacity cap,
      measure_gemm_table(bench, calibration_gemm_shapes(options.quick), gemm_target_s, out));

  bench.copy_bytes = options.quick ? (256ll << 20) : (512ll << 20);
  COMPASS_ASSIGN(const double copy_s, measure_copy(bench, options.quick, out));
  if (ndev > 1) {
    COMPASS_TRY(measure_peer_copy(bench, options.quick, out));
  } else {
    out.notes.push_back("one GPU visible: peer copy bandwidth and NCCL overhead not measured");
  }

  COMPASS_TRY(measure_launch_overheads(bench, ndev, options.quick, out));
  COMPASS_TRY(measure_interference(bench, cap, gemm_target_s, copy_s, options.quick, out));
  measure_fused(options.device, options.quick, out);
  COMPASS_CUDA(cudaSetDevice(bench.device), "calibration");
  out.notes.push_back(
      fmt::format("SM copy interference probe: {} blocks x 512 threads copying "
                  "{} MiB",
                  kSmCopyBlocks, bench.copy_bytes >> 20));
  COMPASS_CUDA(cudaDeviceSynchronize(), "calibration");
  out.elapsed_s = seconds_since(t0);
  return out;
}

}  // namespace compass::backends::cuda::device
