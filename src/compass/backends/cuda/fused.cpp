// Argument checks and messages of the standalone fused-kernel runs (plain C++), and the
// dispatch to the device code when it is compiled in.
#include "compass/backends/cuda/fused.hpp"

#include <algorithm>

#include "compass/backends/cuda/cuda_backend.hpp"
#if defined(COMPASS_WITH_CUDA)
#include "compass/backends/cuda/device/entry.hpp"
#endif

namespace compass::backends::cuda {

std::string_view to_string(FusedRelease r) {
  switch (r) {
    case FusedRelease::preset:
      return "preset";
    case FusedRelease::late_scrambled:
      return "late-scrambled";
    case FusedRelease::never:
      return "never";
  }
  return "?";
}

Status check_fused_request(const FusedCheckOptions& o) {
  const bool ag = o.kind == workload::OpKind::ag_gemm;
  if (!ag && o.kind != workload::OpKind::gemm_rs)
    return make_error("fused check: operator must be ag_gemm or gemm_rs");
  if (o.ranks < 1 || o.ranks > 64)
    return make_error("fused check: ranks must be 1..64, got {}", o.ranks);
  if (o.m < o.ranks || o.n < 1 || o.k < 1)
    return make_error("fused check: shape {} x {} x {} needs M >= ranks ({}) and N, K >= 1", o.m,
                      o.n, o.k, o.ranks);
  if (o.dtype != DType::bf16 && o.dtype != DType::fp16)
    return make_error("fused check: dtype {} is not supported (bf16 or fp16)",
                      compass::to_string(o.dtype));
  if (!ag && o.k % o.ranks != 0)
    return make_error("fused check: K = {} is not divisible by {} ranks", o.k, o.ranks);
  const std::int64_t k_rank = ag ? o.k : o.k / o.ranks;
  if (o.n % 8 != 0 || k_rank % 8 != 0)
    return make_error(
        "fused check: N ({}) and the per-rank K ({}) must be multiples of 8 "
        "(16-byte rows for the kernels' vector loads)",
        o.n, k_rank);
  if (!o.order.empty()) {
    std::vector<int> sorted = o.order;
    std::sort(sorted.begin(), sorted.end());
    bool perm = static_cast<int>(sorted.size()) == o.ranks;
    for (int i = 0; perm && i < o.ranks; ++i) perm = sorted[static_cast<std::size_t>(i)] == i;
    if (!perm)
      return make_error("fused check: the order must list each chunk 0..{} once", o.ranks - 1);
  }
  if (o.kernel != "auto" && o.kernel != "sm90" && o.kernel != "sm80")
    return make_error("fused check: kernel '{}' is not one of: auto, sm90, sm80", o.kernel);
  if (!ag && o.release == FusedRelease::late_scrambled)
    return make_error("fused check: release {} applies to ag_gemm only", to_string(o.release));
  if (o.beside_copies && (!ag || o.release != FusedRelease::preset))
    return make_error("fused check: beside_copies needs ag_gemm with preset flags");
  if (o.repeat < 1) return make_error("fused check: repeat must be >= 1, got {}", o.repeat);
  if (o.warmup < 0) return make_error("fused check: warmup must be >= 0, got {}", o.warmup);
  if (!(o.timeout_s > 0)) return make_error("fused check: timeout must be > 0 s");
  if (!(o.release_delay_s >= 0)) return make_error("fused check: release delay must be >= 0 s");
  return Status::success();
}

Result<std::string> fused_kernel_for(std::string_view requested, const FusedKernelTarget& t) {
  if (!t.sm80_built)
    return make_error(
        "the fused kernels were not built (configure with -DCOMPASS_FUSED_KERNELS=ON and the "
        "CUTLASS headers, e.g. tools/setup.sh --fused)");
  if (requested == "sm90" || (requested == "auto" && t.cc == 90 && t.sm90_built)) {
    if (t.cc != 90)
      return make_error("the sm90 fused kernel needs an sm_90 GPU; this is {} {}", t.name, t.arch);
    if (!t.sm90_built) return make_error("the sm90 fused kernel was not built");
    return std::string("sm90");
  }
  if (t.cc < 80)
    return make_error("the fused kernels need compute capability 8.0 or newer; {} is {}", t.name,
                      t.arch);
  return std::string("sm80");
}

std::string fused_fault_message(const FusedFault& f, std::string_view what, double timeout_s,
                                int chunk) {
  if (f.code != kFaultFlagTimeout)
    return fmt::format("{}: the kernel failed without recording a fault (code {})", what, f.code);
  if (f.tile < 0)  // a GEMM-RS owner's sum waiting on its chunk's tile counter
    return fmt::format(
        "{}: rank {} waited more than {:g} s for chunk {} (its tile counter, flag {}): the "
        "counter is {}, the sum needs at least {} (every rank's tiles of the chunk in every "
        "iteration so far); the kernel trapped and the CUDA context is lost",
        what, f.rank, timeout_s, chunk, f.flag, f.observed, f.wanted);
  return fmt::format(
      "{}: rank {} waited more than {:g} s for chunk {} (flag {}, tile {} in the kernel's "
      "order): the flag is {}, the kernel needs at least {}; the kernel trapped and the CUDA "
      "context is lost",
      what, f.rank, timeout_s, chunk, f.flag, f.tile, f.observed, f.wanted);
}

Result<FusedCheckReport> fused_check(const FusedCheckOptions& o) {
  COMPASS_TRY(check_fused_request(o));
#if defined(COMPASS_WITH_CUDA)
  return device::fused_check(o);
#else
  return make_error("no CUDA device found");
#endif
}

}  // namespace compass::backends::cuda
