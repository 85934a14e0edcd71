// Which MPI mechanism should carry the CPU executor's transfers between processes? Measures,
// between two ranks, one transfer of a strided region (rows x cols FP32 out of a wider matrix,
// as the schedules' chunks are) followed by the completion signal the consumer waits for:
//   sendrecv: MPI_Isend of an MPI vector type into a pre-posted MPI_Irecv; the receiver sees
//             completion when the receive completes (no separate signal).
//   rma:      MPI_Put into the receiver's window (passive target, MPI_Win_lock_all), then
//             MPI_Win_flush, then a zero-byte notification message the receiver waits for
//             (MPI-3 has no notified put, so a signal must follow the flush).
// Each iteration is a round trip (the receiver answers with a zero-byte message once the data
// is usable), so the time covers the whole hand-off. Prints the median over the iterations.
// Usage: mpirun -np 2 bench_mpi_transfer [iterations]

// The C API only: keep Open MPI and MPICH from pulling in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_mpi_transfer: run with exactly 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  const int iterations = argc > 1 ? std::max(3, std::atoi(argv[1])) : 50;
  const int ld = 4096;  // the matrix is 4096 floats wide; the region is its first `cols`
  if (rank == 0)
    std::printf("%-10s %-10s %14s %14s %8s\n", "rows", "cols", "sendrecv_us", "rma_us", "ratio");
  for (int cols : {64, 512, 2048}) {
    for (int rows : {16, 256, 2048}) {
      std::vector<float> buf(static_cast<std::size_t>(rows) * ld, 1.0f);
      MPI_Datatype region;
      MPI_Type_vector(rows, cols, ld, MPI_FLOAT, &region);
      MPI_Type_commit(&region);
      MPI_Win win;
      MPI_Win_create(buf.data(), static_cast<MPI_Aint>(buf.size() * sizeof(float)), sizeof(float),
                     MPI_INFO_NULL, MPI_COMM_WORLD, &win);
      MPI_Win_lock_all(0, win);
      std::vector<double> two_sided, one_sided;
      for (int it = 0; it < iterations + 2; ++it) {
        // Two-sided.
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == 0) {
          MPI_Send(buf.data(), 1, region, 1, 1, MPI_COMM_WORLD);
          MPI_Recv(nullptr, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Request req;
          MPI_Irecv(buf.data(), 1, region, 0, 1, MPI_COMM_WORLD, &req);
          MPI_Wait(&req, MPI_STATUS_IGNORE);
          MPI_Send(nullptr, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
        const double t_two = MPI_Wtime() - t0;
        // One-sided put + flush + notification.
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        if (rank == 0) {
          MPI_Put(buf.data(), 1, region, 1, 0, 1, region, win);
          MPI_Win_flush(1, win);
          MPI_Send(nullptr, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
          MPI_Recv(nullptr, 0, MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(nullptr, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Win_sync(win);
          MPI_Send(nullptr, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
        }
        const double t_one = MPI_Wtime() - t0;
        if (it >= 2) {
          two_sided.push_back(t_two);
          one_sided.push_back(t_one);
        }
      }
      MPI_Win_unlock_all(win);
      MPI_Win_free(&win);
      MPI_Type_free(&region);
      if (rank == 0) {
        const double a = median(two_sided) * 1e6, b = median(one_sided) * 1e6;
        std::printf("%-10d %-10d %14.1f %14.1f %8.2f\n", rows, cols, a, b, b / a);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
