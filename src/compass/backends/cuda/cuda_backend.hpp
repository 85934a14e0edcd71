#pragma once
// The CUDA backend's host-side entry points. These compile without nvcc; when the backend
// is not compiled in, or no GPU is present, they return "no CUDA device found".

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compass/backends/backend.hpp"
#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/measure/calibration.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cuda {

/// Whether the device code was compiled in (COMPASS_WITH_CUDA).
bool compiled_in();
/// Ok when at least one CUDA device is usable; else the error "no CUDA device found".
Status device_available();

/// How ranks map onto GPUs.
enum class LaunchMode { virtual_ranks, multi_gpu };

/// "virtual" / "multi-gpu".
std::string_view to_string(LaunchMode m);
/// Parses the names above; the error names the bad text.
Result<LaunchMode> parse_launch_mode(std::string_view s);

/// How a task waits for a producer on another stream.
///  - events: cudaEventRecord after the producer, cudaStreamWaitEvent before the consumer.
///  - flags: stream memory operations on device flags: the producer's stream writes the
///    iteration number into a 32-bit flag in device memory (cuStreamWriteValue32) and the
///    consumer's stream waits until the flag reaches it (cuStreamWaitValue32, >=). Flags are
///    never reset: each timed iteration writes a larger number. This is the mechanism a fused
///    kernel uses to signal a remote rank, here driven from the host for the same schedule.
enum class SyncMode { events, flags };

/// "events" / "flags".
std::string_view to_string(SyncMode m);
/// Parses the names above; the error names the bad text.
Result<SyncMode> parse_sync_mode(std::string_view s);

/// How the GEMMs of a fused GEMM group (schedule::Task::fused) run.
///  - fused: one fused CUTLASS kernel per rank and group (sm_90: TMA + WGMMA persistent;
///    compute capability 8.x: CUTLASS 2.x). AG-GEMM tiles wait inside the kernel on the device
///    flags of the transfers that deliver their rows; GEMM-RS tiles are stored into the owners'
///    slots and counted on the chunk counters the owners' sums wait for. Every dependency of
///    such a run goes through device flags, whatever `sync` says.
///  - chunked: every GEMM of the group is its own cuBLASLt call, as without groups.
enum class KernelMode { fused, chunked };

/// "fused" / "chunked".
std::string_view to_string(KernelMode m);
/// Parses the names above; the error names the bad text.
Result<KernelMode> parse_kernel_mode(std::string_view s);
/// Whether the fused kernels were compiled into this binary (CUDA and the CUTLASS headers
/// found when it was configured).
bool fused_kernels_built();

/// The CUDA backend's run options: the shared ones (repeat, warmup, check, seed), how ranks
/// map onto GPUs and streams wait for each other, and how fused GEMM groups compute.
struct RunOptions : backends::RunOptions {
  LaunchMode mode = LaunchMode::virtual_ranks;
  /// Debugging aid: wait for every task to finish before issuing the next (no overlap, so a
  /// --check that passes only with it points at a missing dependency). Also set by the
  /// environment variable COMPASS_CUDA_SERIALIZE=1.
  bool serialize = false;
  SyncMode sync = SyncMode::events;
  /// Unset: fused where it can run (kernels built, bf16 or fp16, a schedule with fused GEMM
  /// groups, GPUs of compute capability 8.0 or newer), else chunked. Set to fused, a run
  /// where the fused kernel cannot run is an error.
  std::optional<KernelMode> kernel;
  /// A fused kernel's flag wait longer than this traps, and the run fails naming the rank,
  /// the chunk and the flag (a missing release must fail, not hang).
  double fused_timeout_s = 10.0;
};

/// The generator options a run with `options` needs: fused GEMM groups unless the chunked
/// kernel is asked for, or the fused kernels are not built and none was asked for.
schedule::GenerateOptions generate_options(const RunOptions& options);

/// What a prepared run is made of on the GPU(s).
struct RunInfo {
  std::string device;  ///< GPU name(s), e.g. "NVIDIA H200" or "NVIDIA H200 x8"
  int streams = 0;     ///< CUDA streams the schedule was mapped onto
  int events = 0;      ///< cross-stream dependencies (events or flags)
  std::string sync;    ///< "events" or "flags"
  std::string kernel = "chunked";  ///< "chunked" or the fused kernel that runs the groups
};

/// A schedule set up on the GPU(s) (the backend contract's prepare step: buffers, streams,
/// events or flags, GEMM plans, inputs); run() is the cheap, repeatable step. The check
/// (Measurement::check) compares with a cuBLASLt reference with the tolerance of
/// check_tolerance(); a failed check is not an error: the caller decides.
class Prepared {
 public:
  /// check_run_request, then device setup (inputs from options.seed). Errors name the failing
  /// task or CUDA call; "no CUDA device found" without one.
  static Result<Prepared> create(const schedule::Schedule& s, const RunOptions& options);
  /// o.warmup + o.repeat timed runs (CUDA events), then the check when o.check. The inputs
  /// were made at create(): o.seed must be the seed given there.
  Result<Measurement> run(const backends::RunOptions& o);
  const RunInfo& info() const;

  Prepared(Prepared&&) noexcept;
  Prepared& operator=(Prepared&&) noexcept;
  ~Prepared();

 private:
  struct Impl;
  explicit Prepared(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One prepared run's measurement and what it ran on.
struct RunReport {
  Measurement measurement;
  RunInfo info;
};

/// Prepared::create then run(options), for one-off runs.
Result<RunReport> run_schedule(const schedule::Schedule& s, const RunOptions& options);

/// Argument checks of run_schedule that need no GPU: repeat >= 1, warmup >= 0, a supported
/// dtype (fp32, fp16, bf16), a structurally valid schedule that maps onto streams without
/// deadlock, with --check the per-rank x, w, y buffers the reference needs, and with the
/// fused kernel asked for: kernels built, bf16 or fp16, and fused GEMM groups the kernel can
/// run (check_kernel_request). The GPU's architecture is checked when the run is prepared.
Status check_run_request(const schedule::Schedule& s, const RunOptions& options);

/// The fused-kernel part of check_run_request: a positive timeout, and with
/// `options.kernel == fused` the kernels built, a bf16 or fp16 operator and a schedule with
/// valid fused GEMM groups (schedule::GenerateOptions::fused_gemm; only the fusions
/// fuse:all2all, fuse:ring and fuse:double-ring have them). With the kernel unset, groups
/// that would run fused must be valid. Each error says what to use instead.
Status check_kernel_request(const schedule::Schedule& s, const RunOptions& options);

/// Moves a run's options (repeat, warmup, check) into the options a schedule was prepared with;
/// errors: bad counts, a seed other than the prepared one (the inputs exist already), a check
/// the schedule has no reference blocks for.
Status take_run_options(const schedule::Schedule& s, const backends::RunOptions& o,
                        RunOptions& prepared);

/// The relative error (backends::relative_error) --check accepts per dtype.
double check_tolerance(DType t);

// ---- Calibration ------------------------------------------------------------------------

struct CalibrateOptions {
  bool quick = false;  ///< fewer shapes and repeats (about a quarter of the time)
  int device = 0;      ///< the GPU measured (peer copies and NCCL use all visible GPUs)
};

using workload::GemmShape;  ///< one GEMM shape [m, k] x [k, n]

/// The GEMM shapes measured: for each (n, k) of a fixed list of per-rank TP shapes and each
/// token count M, the M/d rows of the chunked GEMMs that decomposition into d = 1, 2, 4, 8
/// parts produces (deduplicated, sorted). Quick mode uses a subset.
std::vector<GemmShape> calibration_gemm_shapes(bool quick);

/// What calibrate() measures (its meaning for the model: measure/calibration.hpp).
using CalibrationResult = measure::GpuCalibration;

/// Measures the GPU `options.device` (about 1-3 minutes on an H200; quick: well under 1).
Result<CalibrationResult> calibrate(const CalibrateOptions& options);

/// `base` with the calibration written in (measure/calibration.hpp).
using measure::apply_calibration;

}  // namespace compass::backends::cuda
