#pragma once
// One process per GPU for the CUDA backend (`compass run --backend cuda --launch mpi|env`):
// this process runs one rank of the schedule on one GPU (local rank % visible GPUs), the other
// ranks run in other processes. The sequential strategy's collective is one NCCL call; every
// other strategy moves its chunks with copy-engine copies between buffers mapped through CUDA
// IPC, and a dependency on another process's task waits on a flag in this process's memory
// that the producer's stream writes (process_plan.hpp). Every wait is bounded: an error names
// this rank and the task or collective it waited for. Plain C++; without CUDA, or without a
// GPU, create() answers "no CUDA device found".

#include <memory>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/launch/process_group.hpp"

namespace compass::backends::cuda {

/// The options of one process: the CUDA backend's run options (mode virtual, kernel chunked,
/// sync events: cross-process dependencies are always flags) and a bound on every wait.
struct ProcessRunOptions : RunOptions {
  /// Bound on every wait: NCCL's initialisation, each exchange, each iteration's completion.
  double wait_timeout_s = 60;
  /// Testing: the process that owns this task fails when it issues it (-1: none).
  int fail_task = -1;
};

/// The checks that need no GPU: check_run_request, a group of s.ranks() processes, a positive
/// wait timeout, the virtual launch mode (the process picks its own GPU), events, the chunked
/// kernel, and for the sequential strategy the NCCL call (nccl_call). Errors say what to use.
Status check_process_request(const schedule::Schedule& s, const ProcessRunOptions& options,
                             int group_size);

/// One rank of a schedule prepared in this process (the backend contract's prepare step:
/// buffers, the other ranks' buffers through CUDA IPC or an NCCL communicator, streams, GEMM
/// plans, inputs); run() is the repeatable step. The Measurement holds this process's times
/// (each from the iteration's start on this GPU until this rank's last task) and, with
/// --check, this rank's output against a cuBLASLt reference of the whole operator built from
/// every rank's regenerated inputs; the caller combines the ranks.
class ProcessPrepared {
 public:
  /// check_process_request, then device setup; every process of `group` must call it for the
  /// same schedule. `group` must outlive the result.
  static Result<ProcessPrepared> create(const schedule::Schedule& s,
                                        const ProcessRunOptions& options,
                                        launch::ProcessGroup& group);
  /// o.warmup + o.repeat iterations, each started together by every process, then the check
  /// when o.check (o.seed: the seed given to create()).
  Result<Measurement> run(const backends::RunOptions& o);
  const RunInfo& info() const;

  ProcessPrepared(ProcessPrepared&&) noexcept;
  ProcessPrepared& operator=(ProcessPrepared&&) noexcept;
  ~ProcessPrepared();

 private:
  struct Impl;
  explicit ProcessPrepared(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace compass::backends::cuda
