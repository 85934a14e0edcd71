// The fused kernels when they are not built (no CUTLASS headers at configure time): every
// launch answers cudaErrorNotSupported and the host reports that the kernels are missing.
#include "compass/backends/cuda/device/fused/fused_kernels.hpp"

namespace compass::backends::cuda::device {

bool fused_sm90_built() {
  return false;
}
bool fused_sm80_built() {
  return false;
}
cudaError_t launch_fused_ag_sm90(const FusedAgArgs&, int, cudaStream_t) {
  return cudaErrorNotSupported;
}
cudaError_t launch_fused_ag_sm80(const FusedAgArgs&, cudaStream_t) {
  return cudaErrorNotSupported;
}
cudaError_t launch_fused_rs_sm90(const FusedRsArgs&, int, cudaStream_t) {
  return cudaErrorNotSupported;
}
cudaError_t launch_fused_rs_sm80(const FusedRsArgs&, cudaStream_t) {
  return cudaErrorNotSupported;
}

}  // namespace compass::backends::cuda::device
