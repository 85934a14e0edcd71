// Host side of the one-process-per-GPU path: argument checks and dispatch to the device code
// (device/process_run.cpp), linked in only with COMPASS_WITH_CUDA.
#include "compass/backends/cuda/process_run.hpp"

#include <cmath>

#include "compass/backends/cuda/process_plan.hpp"
#if defined(COMPASS_WITH_CUDA)
#include "compass/backends/cuda/device/process_entry.hpp"
#endif

namespace compass::backends::cuda {

Status check_process_request(const schedule::Schedule& s, const ProcessRunOptions& options,
                             int group_size) {
  if (options.mode != LaunchMode::virtual_ranks)
    return make_error("with one process per GPU each process picks its own GPU (local rank % "
                      "visible GPUs); the multi-gpu mode is for one process");
  if (options.sync != SyncMode::events)
    return make_error("with one process per GPU, dependencies inside a process are events and "
                      "those between processes device flags; --sync flags is not available");
  if (options.kernel == KernelMode::fused)
    return make_error("the fused kernels do not run with one process per GPU yet; use the "
                      "chunked kernel");
  if (!(options.wait_timeout_s > 0) || !std::isfinite(options.wait_timeout_s))
    return make_error("the wait timeout must be a positive number of seconds, got {}",
                      options.wait_timeout_s);
  if (group_size != s.ranks())
    return make_error("{} processes were started but the schedule has {} ranks (start one "
                      "process per rank)",
                      group_size, s.ranks());
  ProcessRunOptions plain = options;
  plain.kernel = KernelMode::chunked;
  COMPASS_TRY(check_run_request(s, plain));
  if (uses_nccl(s)) {
    for (int r = 0; r < s.ranks(); ++r) COMPASS_TRY(nccl_call(s, r));
  }
  return Status::success();
}

struct ProcessPrepared::Impl {
  schedule::Schedule s;
  ProcessRunOptions options;
#if defined(COMPASS_WITH_CUDA)
  device::ProcessRunPtr run;
#endif
  RunInfo info;
};

ProcessPrepared::ProcessPrepared(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessPrepared::ProcessPrepared(ProcessPrepared&&) noexcept = default;
ProcessPrepared& ProcessPrepared::operator=(ProcessPrepared&&) noexcept = default;
ProcessPrepared::~ProcessPrepared() = default;

Result<ProcessPrepared> ProcessPrepared::create(const schedule::Schedule& s,
                                                const ProcessRunOptions& options,
                                                launch::ProcessGroup& group) {
  COMPASS_TRY(check_process_request(s, options, group.size()));
#if defined(COMPASS_WITH_CUDA)
  auto impl = std::make_unique<Impl>();
  impl->s = s;
  impl->options = options;
  impl->options.kernel = KernelMode::chunked;
  COMPASS_ASSIGN(impl->run, device::prepare_process(impl->s, impl->options, group));
  impl->info = device::info(*impl->run);
  return ProcessPrepared(std::move(impl));
#else
  return make_error("no CUDA device found");
#endif
}

Result<Measurement> ProcessPrepared::run(const backends::RunOptions& o) {
#if defined(COMPASS_WITH_CUDA)
  COMPASS_TRY(take_run_options(impl_->s, o, impl_->options));
  return device::measure(*impl_->run);
#else
  (void)o;
  return make_error("no CUDA device found");
#endif
}

const RunInfo& ProcessPrepared::info() const { return impl_->info; }

}  // namespace compass::backends::cuda
