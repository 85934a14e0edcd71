#pragma once
// The fault record of the fused kernels in pinned host memory mapped into the device: the
// kernel writes it just before it traps, and the host can still read it afterwards (the
// CUDA context is lost by then, so device memory is not).
#include <cuda_runtime_api.h>

#include "compass/backends/cuda/device/cuda_util.hpp"
#include "compass/backends/cuda/fused_abi.hpp"

namespace compass::backends::cuda::device {

class MappedFault {
 public:
  MappedFault() = default;
  MappedFault(const MappedFault&) = delete;
  MappedFault& operator=(const MappedFault&) = delete;
  ~MappedFault() {
    if (host_ != nullptr) (void)cudaFreeHost(host_);
  }
  /// Allocates and clears the record (the current device must be set).
  Status init() {
    void* p = nullptr;
    COMPASS_CUDA(cudaHostAlloc(&p, sizeof(FusedFault), cudaHostAllocMapped), "the fault record");
    host_ = static_cast<FusedFault*>(p);
    *host_ = FusedFault{};
    void* d = nullptr;
    COMPASS_CUDA(cudaHostGetDevicePointer(&d, p, 0), "the fault record");
    device_ = static_cast<FusedFault*>(d);
    return Status::success();
  }
  bool initialised() const { return host_ != nullptr; }
  /// What the kernel wrote (code kFaultNone when nothing).
  FusedFault read() const {
    const volatile FusedFault* f = host_;
    FusedFault out;
    out.code = f->code;
    out.rank = f->rank;
    out.flag = f->flag;
    out.tile = f->tile;
    out.observed = f->observed;
    out.wanted = f->wanted;
    return out;
  }
  FusedFault* device() const { return device_; }

 private:
  FusedFault* host_ = nullptr;
  FusedFault* device_ = nullptr;
};

}  // namespace compass::backends::cuda::device
