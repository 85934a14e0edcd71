#pragma once
// One rank of an NCCL communicator across processes, with NCCL loaded by dlopen
// ("libnccl.so.2", whichever the loader finds: the CUDA toolkit's or the PyPI wheel's) so the
// binary starts without NCCL. The communicator is created non-blocking and every wait on it is
// polled with a bound; a communicator that failed or timed out is aborted, not destroyed, so
// a peer that is gone cannot hang this process.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "compass/backends/launch/process_group.hpp"
#include "compass/core/result.hpp"
#include "compass/core/dtype.hpp"

namespace compass::backends::cuda::device {

class NcclComm {
 public:
  /// Loads NCCL, has rank 0 make the unique id, shares it through `group` and joins the
  /// communicator of group.size() ranks on the current device, within timeout_s. Every wait
  /// also stops when another process of `group` announces a failure; `group` must outlive
  /// the communicator.
  static Result<std::unique_ptr<NcclComm>> create(launch::ProcessGroup& group, double timeout_s);
  /// ncclGetVersion of the library dlopen finds (the process group is not needed).
  static Result<int> loaded_version();
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  Status all_gather(const void* send, void* recv, std::int64_t count, DType t, cudaStream_t st);
  Status reduce_scatter(const void* send, void* recv, std::int64_t count, DType t,
                        cudaStream_t st);
  Status all_reduce(const void* send, void* recv, std::int64_t count, DType t, cudaStream_t st);
  /// After a failure elsewhere: the communicator is aborted instead of destroyed.
  void poison() { healthy_ = false; }

 private:
  struct Lib;
  NcclComm();
  Status wait(const std::string& what);
  Status check(int result, const std::string& what);

  std::unique_ptr<Lib> lib_;
  void* comm_ = nullptr;
  bool healthy_ = true;
  launch::ProcessGroup* group_ = nullptr;  // watched for failures during waits
  int rank_ = 0;
  double timeout_s_ = 60;
};

}  // namespace compass::backends::cuda::device
