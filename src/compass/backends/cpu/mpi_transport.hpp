#pragma once
// The CPU executor's transport over MPI, for `compass run --launch mpi`: one process per rank.
// Control messages (done / pull / abort) are small MPI_Isend's on one tag, probed with
// MPI_Iprobe; a transfer's bytes are one MPI_Isend / pre-posted MPI_Irecv pair per task (tag =
// base + task id) moving the strided region with an MPI vector datatype, straight from the
// source rows into the destination rows. docs/cpu-backend.md says why two-sided messages and
// not one-sided windows. Only the thread that calls poll() (and the collectives) calls MPI.

#include <memory>

#include "compass/backends/cpu/transport.hpp"
#include "compass/backends/launch/mpi_session.hpp"

namespace compass::backends::cpu {

/// A transport over MPI_COMM_WORLD of an initialised session (a duplicate of it, so our
/// messages never match anyone else's). Errors when MPI is not compiled in.
Result<std::shared_ptr<Transport>> make_mpi_transport(const launch::MpiSession& session);

}  // namespace compass::backends::cpu
