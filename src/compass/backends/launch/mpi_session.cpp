#include "compass/backends/launch/mpi_session.hpp"

#include <cstdlib>

#if COMPASS_WITH_MPI
// The C API only: keep Open MPI and MPICH from pulling in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace compass::backends::launch {

bool mpi_compiled_in() {
#if COMPASS_WITH_MPI
  return true;
#else
  return false;
#endif
}

#if COMPASS_WITH_MPI

Result<std::unique_ptr<MpiSession>> MpiSession::init() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) return make_error("MPI is already initialised in this process");
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return make_error("MPI_Init_thread failed");
  std::unique_ptr<MpiSession> s(new MpiSession());
  if (provided < MPI_THREAD_SERIALIZED)
    return make_error("the MPI library provides thread level {}, compass needs serialized",
                      provided);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &s->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &s->size_);
  if (const char* l = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    s->local_rank_ = std::atoi(l);
  } else {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &s->local_rank_);
    MPI_Comm_free(&node);
  }
  return s;
}

MpiSession::~MpiSession() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

void MpiSession::abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this only satisfies [[noreturn]]
}

#else

Result<std::unique_ptr<MpiSession>> MpiSession::init() {
  return make_error("compass was built without MPI: --launch mpi is unavailable (install an MPI "
                    "library, e.g. Debian's libopenmpi-dev, and rebuild)");
}

MpiSession::~MpiSession() = default;

void MpiSession::abort_job(int /*code*/) { std::abort(); }

#endif

}  // namespace compass::backends::launch
