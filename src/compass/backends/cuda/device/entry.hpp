#pragma once
// The entry points the device code (compass_cuda_impl, built only with COMPASS_WITH_CUDA)
// gives the host-side API in cuda_backend.cpp. Arguments are already checked by the caller.

#include <memory>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cuda/fused.hpp"

namespace compass::backends::cuda::device {

/// cudaGetDeviceCount with error handling; the error is "no CUDA device found" (with the CUDA
/// reason appended when the driver gave one).
Result<int> device_count();

/// Whether the fused kernels were compiled in (CUTLASS headers found at build time).
bool fused_kernels_built();

/// The kernel a checked run uses for its fused GEMM groups: chunked when asked for or when
/// the schedule has none; fused when asked for, where the GPUs of the grouped ranks are of
/// compute capability 8.0 or newer (else the error names the GPU and its architecture); when
/// nothing was asked for, fused where it can run, else chunked.
Result<KernelMode> choose_kernel(const schedule::Schedule& s, const RunOptions& options);

/// A schedule set up on the GPU(s) (defined in run.hpp, device code only).
class Run;
struct RunDeleter {
  void operator()(Run* run) const;
};
using RunPtr = std::unique_ptr<Run, RunDeleter>;

/// Device setup of a checked schedule; `s` and `options` must outlive the Run. On failure
/// nothing is left running.
Result<RunPtr> prepare(const schedule::Schedule& s, const RunOptions& options);
/// warmup + repeat timed iterations, then the --check; nothing is left running afterwards.
Result<Measurement> measure(Run& run, const schedule::Schedule& s, const RunOptions& options);
/// The GPUs, streams and dependencies of a prepared run.
const RunInfo& info(const Run& run);

/// Runs a checked standalone fused-kernel check on GPU 0.
Result<FusedCheckReport> fused_check(const FusedCheckOptions& options);

/// Measures one GPU.
Result<CalibrationResult> calibrate(const CalibrateOptions& options);

}  // namespace compass::backends::cuda::device
