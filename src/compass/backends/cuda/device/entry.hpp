#pragma once
// The entry points the device code (compass_cuda_impl, built only with COMPASS_WITH_CUDA)
// gives the host-side API in cuda_backend.cpp. Arguments are already checked by the caller.

#include "compass/backends/cuda/cuda_backend.hpp"

namespace compass::backends::cuda::device {

/// cudaGetDeviceCount with error handling; the error is "no CUDA device found" (with the CUDA
/// reason appended when the driver gave one).
Result<int> device_count();
/// Runs a checked schedule.
Result<RunReport> run(const schedule::Schedule& s, const RunOptions& options);
/// Measures one GPU.
Result<CalibrationResult> calibrate(const CalibrateOptions& options);

}  // namespace compass::backends::cuda::device
