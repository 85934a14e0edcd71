#pragma once
// The CUDA backend's host-side entry points. These compile without nvcc; when the backend
// is not compiled in, or no GPU is present, they return "no CUDA device found".

#include <string>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cuda {

/// Whether the device code was compiled in (COMPASS_WITH_CUDA).
bool compiled_in();
/// Ok when at least one CUDA device is usable; else the error "no CUDA device found".
Status device_available();

/// How ranks map onto GPUs.
enum class LaunchMode { virtual_ranks, multi_gpu };

struct RunOptions {
  LaunchMode mode = LaunchMode::virtual_ranks;
  int repeat = 5;
  int warmup = 1;
  bool check = false;
  unsigned seed = 1;
};

struct RunReport {
  std::vector<double> times_s;   ///< one per repeat, from CUDA events
  double median_s = 0, min_s = 0, max_s = 0;
  bool checked = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::string device;            ///< GPU name
};

/// Runs a schedule on the GPU(s); errors name the failing task or CUDA call.
Result<RunReport> run_schedule(const schedule::Schedule& s, const RunOptions& options);

}  // namespace compass::backends::cuda
