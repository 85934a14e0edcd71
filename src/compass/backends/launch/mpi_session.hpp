#pragma once
// One MPI job as seen by this process: MPI_Init_thread on creation, MPI_Finalize on
// destruction. Built only with COMPASS_WITH_MPI; otherwise init() says MPI is unavailable.
// The rest of the program reaches MPI through the transports that use this session.

#include <memory>

#include "compass/core/result.hpp"

namespace compass::backends::launch {

/// Whether compass was built with an MPI library.
bool mpi_compiled_in();

class MpiSession {
 public:
  /// Initialises MPI (thread level "serialized": one thread talks to MPI at a time). Errors
  /// when MPI is not compiled in or already initialised.
  static Result<std::unique_ptr<MpiSession>> init();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// The rank among the processes on this node (OMPI_COMM_WORLD_LOCAL_RANK, else
  /// MPI_COMM_TYPE_SHARED).
  int local_rank() const { return local_rank_; }

  /// Ends every process of the job with `code` (MPI_Abort). For the command line after a
  /// failure has been reported: MPI_Finalize could wait forever for a peer that is gone.
  [[noreturn]] void abort_job(int code);

 private:
  MpiSession() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
};

}  // namespace compass::backends::launch
