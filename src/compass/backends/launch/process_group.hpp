#pragma once
// The processes of a one-process-per-rank run as a backend sees them between its own steps:
// who this process is, a bounded all-gather of small byte strings (NCCL's unique id, CUDA IPC
// handles, GPU identities) that is also a barrier, and whether another process has announced
// a failure. The command line implements it over the transport it bootstrapped (MPI or the
// TCP store); backends only use it.

#include <string>
#include <vector>

#include "compass/core/result.hpp"

namespace compass::backends::launch {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The rank among the processes of this machine (a process uses GPU local_rank % GPUs).
  virtual int local_rank() const = 0;
  /// Every process's bytes, index = rank; every process must call it. Fails after timeout_s
  /// naming a missing rank, or at once when another process announced a failure.
  virtual Result<std::vector<std::string>> all_gather(const std::string& mine,
                                                      double timeout_s) = 0;
  /// Never blocks: an error when another process announced a failure (naming it), else ok.
  virtual Status peers_ok() = 0;
  /// Tells every other process that this one failed with `what` (their next peers_ok or
  /// all_gather fails with it).
  virtual void announce_failure(const std::string& what) = 0;
};

}  // namespace compass::backends::launch
