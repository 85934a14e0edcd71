#pragma once
// What one process does in a one-process-per-GPU run of the CUDA backend (`compass run
// --backend cuda --launch mpi|env`), planned as plain C++ so it is tested without a GPU. The
// process runs the tasks of one rank. Two paths:
//  - nccl: the sequential strategy's collective is one NCCL call (all-gather before the GEMM
//    of ag_gemm, reduce-scatter after the GEMMs of gemm_rs, an in-place all-reduce after the
//    GEMMs of gemm_ar) instead of the schedule's copy-engine ring (nccl_call below);
//  - ipc: every other strategy runs its own tasks as the one-process executor does (streams,
//    cuBLASLt, copies), with the other ranks' buffers mapped through CUDA IPC. A dependency on
//    a task of the same process is an event; one on a task of another process is a 32-bit
//    flag in the waiting process's memory (slot = the producer's task id), which the
//    producer's stream writes after the producer (process_plan below).

#include <cstdint>
#include <string>
#include <vector>

#include "compass/backends/cuda/stream_plan.hpp"
#include "compass/core/result.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cuda {

/// The NCCL collective that replaces a sequential schedule's ring on one rank.
struct NcclCall {
  enum class Kind { all_gather, reduce_scatter, all_reduce };
  Kind kind = Kind::all_gather;
  int send = -1;            ///< buffer index (this rank's)
  int recv = -1;            ///< buffer index (this rank's; == send for the in-place all-reduce)
  std::int64_t count = 0;   ///< elements per rank (NCCL's sendcount / recvcount / count)
  bool gemms_first = false; ///< the GEMMs run before the collective (gemm_rs, gemm_ar)
  std::vector<int> gemms;   ///< this rank's GEMM tasks, in list order
};

/// "all-gather", "reduce-scatter", "all-reduce".
std::string_view to_string(NcclCall::Kind k);

/// The NCCL call of rank `rank` for a sequential schedule (decompose:1) of p >= 2 ranks, read
/// from its buffers and GEMMs: ag_gemm all-gathers "x" into "xg" (rank-major blocks) and
/// multiplies "xg"; gemm_rs multiplies into "part" [M, N] and reduce-scatters it into "y"
/// (equal row blocks: NCCL's reduce-scatter has no uneven counts); gemm_ar multiplies into "y"
/// and all-reduces it in place. Errors name the strategy, buffer or shape that does not fit.
Result<NcclCall> nccl_call(const schedule::Schedule& s, int rank);

/// Whether rank `rank` of `s` takes the NCCL path: the sequential strategy on two or more ranks.
bool uses_nccl(const schedule::Schedule& s);

/// The IPC path of one rank.
struct ProcessPlan {
  int rank = 0;
  StreamPlan plan;           ///< the whole schedule mapped onto streams (virtual ranks)
  std::vector<int> streams;  ///< the indices of plan.streams that belong to `rank`
  std::vector<int> issues;   ///< the indices of plan.issues of `rank`'s tasks, in issue order
  /// Per event of plan.event_task: true when its producer runs in another process than some
  /// consumer that waits on it, i.e. the wait is a flag. Local waits stay events.
  std::vector<bool> remote_producer;
  /// Per task (index = task id): the other ranks whose tasks wait on it (only filled for
  /// `rank`'s tasks): after it, its stream writes the iteration into slot `task id` of each
  /// of their flag arrays.
  std::vector<std::vector<int>> signals;
  /// Per task of another rank that `rank` waits on (index = task id): true. Used to name the
  /// dependency that never arrived when a wait times out.
  std::vector<bool> awaited;
};

/// The IPC plan of rank `rank` (0 <= rank < s.ranks()); errors as make_stream_plan's.
Result<ProcessPlan> make_process_plan(const schedule::Schedule& s, int rank);

/// Two ranks on one GPU are allowed by NCCL only from 2.30 on, with
/// NCCL_MULTI_RANK_GPU_ENABLE=1. `gpu_ids` holds every rank's GPU identity (the PCI bus id);
/// `nccl_version` is ncclGetVersion's code; `multi_rank_enabled` whether the variable is "1".
/// The error names the ranks that share a GPU and what to change.
Status check_nccl_gpu_sharing(const std::vector<std::string>& gpu_ids, int nccl_version,
                              bool multi_rank_enabled);

/// Packs fixed-size records (CUDA IPC handles) into one byte string for an all-gather.
std::string pack_records(const std::vector<std::string>& records);
/// Splits what pack_records made into `count` records of `size` bytes; the error names
/// `from_rank` and the sizes when the bytes do not fit.
Result<std::vector<std::string>> unpack_records(const std::string& bytes, std::size_t size,
                                                std::size_t count, int from_rank);

}  // namespace compass::backends::cuda
