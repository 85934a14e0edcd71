#pragma once
// Standalone runs of the fused GEMM kernels on one GPU, for the GPU tests and benchmarks:
// one AG-GEMM whose A pieces are released by flags (preset, late in a scrambled order from
// another stream, or one never), or one GEMM-RS over p virtual ranks whose owners sum the
// partials in fixed rank order; each compared with cuBLASLt and timed beside it. The
// argument checks and the fault message are plain C++ (tested without a GPU).

#include <string>
#include <string_view>
#include <vector>

#include "compass/backends/cuda/fused_abi.hpp"
#include "compass/core/dtype.hpp"
#include "compass/core/result.hpp"
#include "compass/workload/operator.hpp"

namespace compass::backends::cuda {

/// How the pieces of a standalone AG-GEMM are released.
///  - preset: every flag is already set when the kernel starts (kernel overhead vs cuBLASLt);
///  - late_scrambled: A is poisoned with NaN, then another stream copies the pieces in and
///    sets their flags one by one, in a scrambled order, each after a delay: a tile that reads
///    before its flag produces NaN;
///  - never: the last piece's flag is never set: the kernel must end in the timeout error.
enum class FusedRelease { preset, late_scrambled, never };

std::string_view to_string(FusedRelease r);

/// What decides which fused kernel runs on a GPU: the kernels the binary was built with and
/// the GPU (compute capability, e.g. 90; name and architecture for the messages).
struct FusedKernelTarget {
  bool sm90_built = false;
  bool sm80_built = false;
  int cc = 0;
  std::string name;
  std::string arch;  ///< e.g. "sm_90"
};

/// The fused kernel, the same for AG-GEMM and GEMM-RS: "sm90" (CUTLASS 3.x, TMA + WGMMA,
/// persistent) when asked for or, with "auto", on an sm_90 GPU when it was built; else "sm80"
/// (CUTLASS 2.x) on compute capability 8.0 or newer. `requested` is "auto", "sm90" or "sm80".
/// The error says why none can run (not built, sm90 asked for off sm_90, architecture too old).
Result<std::string> fused_kernel_for(std::string_view requested, const FusedKernelTarget& t);

struct FusedCheckOptions {
  workload::OpKind kind = workload::OpKind::ag_gemm;  ///< ag_gemm or gemm_rs
  std::int64_t m = 4096, n = 4096, k = 4096;          ///< the whole GEMM (RS: K over all ranks)
  int ranks = 8;                                      ///< pieces (AG) / virtual ranks (RS)
  DType dtype = DType::bf16;                          ///< bf16 or fp16; FP32 accumulate
  /// AG: the arrival order of the chunks (empty: 0, 1, ..., p-1). RS: rank 0's compute
  /// order (empty: the ring order p-1, p-2, ..., 0 — the own chunk last); rank r uses it
  /// shifted by r.
  std::vector<int> order;
  /// AG: all three. GEMM-RS: preset (the owners' sums wait for the counters) or never (the
  /// owner of the last chunk waits for one tile more than the ranks store: the timed counter
  /// wait must end in the timeout error).
  FusedRelease release = FusedRelease::preset;
  /// AG with preset flags only: another stream keeps device-to-device copies running through
  /// every timed kernel (the kernel's speed beside copy-engine traffic).
  bool beside_copies = false;
  std::string kernel = "auto";  ///< auto, sm90 or sm80
  int repeat = 5;
  int warmup = 1;
  double timeout_s = 2.0;         ///< a flag wait longer than this traps
  double release_delay_s = 2e-4;  ///< late_scrambled: pause before each piece
  unsigned seed = 1;
};

struct FusedCheckReport {
  std::string device;
  std::string kernel;           ///< "sm90 (CUTLASS 3.x TMA + WGMMA)" or "sm80 (CUTLASS 2.x)"
  int tiles = 0;                ///< tiles per kernel
  double max_rel_error = 0;     ///< max |out - ref| / max |ref|, ref = cuBLASLt FP32
  double tolerance = 0;         ///< check_tolerance(dtype)
  std::int64_t nan_count = 0;   ///< NaN elements in the output (any is a failure)
  bool bit_identical = true;    ///< every timed iteration gave the first one's bits
  std::vector<double> times_s;  ///< fused, per timed iteration
  double median_s = 0;
  std::vector<double> reference_times_s;  ///< cuBLASLt, same shapes (RS: the p rank GEMMs)
  double reference_median_s = 0;
  bool passed() const { return nan_count == 0 && max_rel_error <= tolerance && bit_identical; }
};

/// The checks that need no GPU: shapes >= 1, n and k (RS: k / ranks) multiples of 8, M >= ranks,
/// 1 <= ranks <= 64, an order that is a permutation of 0..ranks-1, bf16/fp16, a known kernel,
/// repeat >= 1, warmup >= 0, timeout > 0, for gemm_rs k divisible by ranks and release
/// preset or never, and beside_copies only for ag_gemm with preset flags.
Status check_fused_request(const FusedCheckOptions& o);

/// Runs the standalone check on GPU 0. Errors: no GPU, kernels not built, a kernel that does
/// not support the GPU, CUDA failures, and a flag timeout (fused_fault_message).
Result<FusedCheckReport> fused_check(const FusedCheckOptions& o);

/// The error for a kernel that trapped on a flag timeout: names the rank, the chunk (`chunk`:
/// the chunk of piece f.flag, looked up by the caller), the piece's flag, its value and the
/// value waited for. `what` is "fused AG-GEMM" etc. A fault without a tile (tile < 0) is a
/// GEMM-RS owner's sum that waited on its chunk's tile counter.
std::string fused_fault_message(const FusedFault& f, std::string_view what, double timeout_s,
                                int chunk);

}  // namespace compass::backends::cuda
