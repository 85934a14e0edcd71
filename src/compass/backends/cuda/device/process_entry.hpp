#pragma once
// The entry points of the one-process-per-GPU device code (device/process_run.cpp) for the
// host-side API in process_run.cpp. Arguments are already checked by the caller.

#include <memory>

#include "compass/backends/cuda/process_run.hpp"

namespace compass::backends::cuda::device {

/// One rank set up on this process's GPU (defined in device/process_run.cpp).
class ProcessRun;
struct ProcessRunDeleter {
  void operator()(ProcessRun* run) const;
};
using ProcessRunPtr = std::unique_ptr<ProcessRun, ProcessRunDeleter>;

/// Device setup of rank group.rank(); `s`, `options` and `group` must outlive the run. Every
/// process of the group calls it (it exchanges handles or NCCL's id).
Result<ProcessRunPtr> prepare_process(const schedule::Schedule& s,
                                      const ProcessRunOptions& options,
                                      launch::ProcessGroup& group);
/// warmup + repeat iterations (each started together by every process), then the check.
Result<Measurement> measure(ProcessRun& run);
const RunInfo& info(const ProcessRun& run);

}  // namespace compass::backends::cuda::device
