// Placeholder host side, replaced when the CUDA backend lands.
#include "compass/backends/cuda/cuda_backend.hpp"

namespace compass::backends::cuda {

bool compiled_in() { return false; }
Status device_available() { return make_error("no CUDA device found"); }
Result<RunReport> run_schedule(const schedule::Schedule&, const RunOptions&) {
  return make_error("no CUDA device found");
}

}  // namespace compass::backends::cuda
