// Host side of the CUDA backend: argument checks and dispatch. Plain C++; the device code is
// linked in only when COMPASS_WITH_CUDA is defined.
#include "compass/backends/cuda/cuda_backend.hpp"

#include <algorithm>
#include <cmath>

#include "compass/backends/cuda/fused_plan.hpp"
#include "compass/backends/cuda/stream_plan.hpp"
#if defined(COMPASS_WITH_CUDA)
#include "compass/backends/cuda/device/entry.hpp"
#endif

namespace compass::backends::cuda {

namespace {
constexpr const char* kNoDevice = "no CUDA device found";
}

bool compiled_in() {
#if defined(COMPASS_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

Status device_available() {
#if defined(COMPASS_WITH_CUDA)
  COMPASS_TRY(device::device_count());
  return Status::success();
#else
  // Same message as a CUDA build on a machine without a GPU: callers need not tell them apart
  // (compiled_in() does).
  return make_error("{}", kNoDevice);
#endif
}

std::string_view to_string(LaunchMode m) {
  return m == LaunchMode::virtual_ranks ? "virtual" : "multi-gpu";
}

Result<LaunchMode> parse_launch_mode(std::string_view s) {
  if (s == "virtual") return LaunchMode::virtual_ranks;
  if (s == "multi-gpu") return LaunchMode::multi_gpu;
  return make_error("launch mode '{}' is not one of: virtual, multi-gpu", s);
}

std::string_view to_string(SyncMode m) { return m == SyncMode::events ? "events" : "flags"; }

Result<SyncMode> parse_sync_mode(std::string_view s) {
  if (s == "events") return SyncMode::events;
  if (s == "flags") return SyncMode::flags;
  return make_error("sync mode '{}' is not one of: events, flags", s);
}

std::string_view to_string(KernelMode m) { return m == KernelMode::fused ? "fused" : "chunked"; }

Result<KernelMode> parse_kernel_mode(std::string_view s) {
  if (s == "fused") return KernelMode::fused;
  if (s == "chunked") return KernelMode::chunked;
  return make_error("kernel '{}' is not one of: fused, chunked", s);
}

bool fused_kernels_built() {
#if defined(COMPASS_WITH_CUDA)
  return device::fused_kernels_built();
#else
  return false;
#endif
}

schedule::GenerateOptions generate_options(const RunOptions& options) {
  schedule::GenerateOptions g;
  g.fused_gemm = options.kernel ? *options.kernel == KernelMode::fused : fused_kernels_built();
  return g;
}

double check_tolerance(DType t) {
  switch (t) {
    case DType::bf16: return 2e-2;  // 8 significant bits; partial sums are rounded to bf16
    case DType::fp16: return 5e-3;  // 11 significant bits
    case DType::fp32: return 1e-4;  // differing summation order only
    case DType::fp8: break;
  }
  return 0.1;
}

Status check_run_request(const schedule::Schedule& s, const RunOptions& options) {
  COMPASS_TRY(check_options(options));
  if (s.op.dtype == DType::fp8) {
    return make_error("dtype {} is not supported by the CUDA backend (use bf16, fp16 or fp32)",
                      compass::to_string(s.op.dtype));
  }
  COMPASS_TRY(schedule::validate(s));
  COMPASS_TRY(make_stream_plan(s, options.mode));
  COMPASS_TRY(check_kernel_request(s, options));
  if (options.check) COMPASS_TRY(reference_blocks(s));
  return Status::success();
}

Status check_kernel_request(const schedule::Schedule& s, const RunOptions& options) {
  if (!(options.fused_timeout_s > 0))
    return make_error("the fused kernel timeout must be > 0 s, got {}", options.fused_timeout_s);
  if (options.kernel == KernelMode::chunked) return Status::success();
  const bool asked = options.kernel == KernelMode::fused;
  if (!fused_kernels_built()) {
    if (!asked) return Status::success();
    return make_error(
        "the fused kernels are not built into this binary ({}); use the chunked kernel",
        compiled_in() ? "configure with -DCOMPASS_FUSED_KERNELS=ON and the CUTLASS headers, "
                        "e.g. tools/setup.sh --fused"
                      : "it was built without CUDA");
  }
  COMPASS_ASSIGN(const std::vector<FusedGroup> groups, fused_groups(s));
  if (!asked) return Status::success();
  if (groups.empty())
    return make_error(
        "{} of {} has no fused GEMM groups for the fused kernel (only the fusions "
        "fuse:all2all, fuse:ring and fuse:double-ring have them); use the chunked kernel",
        schedule::to_string(s.strategy), workload::to_string(s.op.kind));
  if (s.op.dtype != DType::bf16 && s.op.dtype != DType::fp16)
    return make_error("the fused kernels take bf16 or fp16, not {}; use the chunked kernel",
                      compass::to_string(s.op.dtype));
  if (Status st = check_fused_shapes(s, groups); !st.ok())
    return make_error("{}; use the chunked kernel", st.error().message);
  return Status::success();
}

struct Prepared::Impl {
  schedule::Schedule s;
  RunOptions options;
#if defined(COMPASS_WITH_CUDA)
  device::RunPtr run;
#endif
  RunInfo info;
};

Prepared::Prepared(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Prepared::Prepared(Prepared&&) noexcept = default;
Prepared& Prepared::operator=(Prepared&&) noexcept = default;
Prepared::~Prepared() = default;

Result<Prepared> Prepared::create(const schedule::Schedule& s, const RunOptions& options) {
  COMPASS_TRY(check_run_request(s, options));
#if defined(COMPASS_WITH_CUDA)
  auto impl = std::make_unique<Impl>();
  impl->s = s;
  impl->options = options;
  COMPASS_ASSIGN(const KernelMode kernel, device::choose_kernel(s, options));
  impl->options.kernel = kernel;
  // The fused kernels wait on device flags: every dependency of such a run goes through them.
  if (kernel == KernelMode::fused) impl->options.sync = SyncMode::flags;
  COMPASS_ASSIGN(impl->run, device::prepare(impl->s, impl->options));
  impl->info = device::info(*impl->run);
  return Prepared(std::move(impl));
#else
  return make_error("{}", kNoDevice);
#endif
}

Status take_run_options(const schedule::Schedule& s, const backends::RunOptions& o,
                        RunOptions& prepared) {
  COMPASS_TRY(check_options(o));
  if (o.seed != prepared.seed)
    return make_error("the inputs were made with seed {} when the run was prepared, not {}",
                      prepared.seed, o.seed);
  if (o.check && !prepared.check) COMPASS_TRY(reference_blocks(s));
  prepared.repeat = o.repeat;
  prepared.warmup = o.warmup;
  prepared.check = o.check;
  return Status::success();
}

Result<Measurement> Prepared::run(const backends::RunOptions& o) {
#if defined(COMPASS_WITH_CUDA)
  COMPASS_TRY(take_run_options(impl_->s, o, impl_->options));
  return device::measure(*impl_->run, impl_->s, impl_->options);
#else
  (void)o;
  return make_error("{}", kNoDevice);
#endif
}

const RunInfo& Prepared::info() const { return impl_->info; }

Result<RunReport> run_schedule(const schedule::Schedule& s, const RunOptions& options) {
  COMPASS_ASSIGN(Prepared p, Prepared::create(s, options));
  COMPASS_ASSIGN(Measurement m, p.run(options));
  return RunReport{std::move(m), p.info()};
}

std::vector<GemmShape> calibration_gemm_shapes(bool quick) {
  // Per-rank (n, k) of TP operators on 8, 4 and 2 GPUs (the paper grid, docs/workload.md): AG-GEMM QKV
  // and FC1 of a 4096-wide model (n = N/p, k = h), GEMM-RS projection and FC2 (n = h,
  // k = K/p), and a square 8192 for the large-GEMM throughput.
  std::vector<std::pair<std::int64_t, std::int64_t>> nk = {
      {1536, 4096}, {6144, 4096}, {2048, 4096}, {8192, 4096},
      {4096, 512},  {4096, 2048}, {4096, 2048 * 4 / 2}, {8192, 8192}};
  std::vector<std::int64_t> tokens = {2048, 4096, 8192, 16384};
  std::vector<int> parts = {1, 2, 4, 8};
  if (quick) {
    nk = {{1536, 4096}, {4096, 2048}, {8192, 8192}};
    tokens = {4096, 16384};
  }
  std::vector<GemmShape> shapes;
  for (auto [n, k] : nk) {
    for (std::int64_t m : tokens) {
      for (int d : parts) shapes.push_back({m / d, n, k});
    }
  }
  std::sort(shapes.begin(), shapes.end(), [](const GemmShape& a, const GemmShape& b) {
    return std::tie(a.n, a.k, a.m) < std::tie(b.n, b.k, b.m);
  });
  shapes.erase(std::unique(shapes.begin(), shapes.end()), shapes.end());
  return shapes;
}

Result<CalibrationResult> calibrate(const CalibrateOptions& options) {
  if (options.device < 0) return make_error("device must be >= 0, got {}", options.device);
#if defined(COMPASS_WITH_CUDA)
  return device::calibrate(options);
#else
  return make_error("{}", kNoDevice);
#endif
}


}  // namespace compass::backends::cuda
