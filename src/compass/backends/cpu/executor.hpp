#pragma once
// The CPU executor: runs any schedule for real. Ranks are threads of one process; every serial
// resource of a rank (its compute stream and each copy engine) is one thread that executes its
// tasks in schedule order, each after all its dependencies have finished. GEMMs go through
// OpenBLAS (FP32), transfers through a TransferEngine (plain memcpy by default), adds and
// copies are loops. docs/cpu-backend.md explains threads, determinism and failure handling.

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "compass/backends/cpu/operator_data.hpp"
#include "compass/backends/cpu/transfer_engine.hpp"
#include "compass/backends/cpu/transport.hpp"
#include "compass/core/result.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cpu {

/// Whether the CPU backend is compiled in: always (it needs only threads and BLAS); asked
/// the same way as the other backends.
bool compiled_in();

struct ExecutorOptions {
  /// BLAS threads per GEMM call (OpenBLAS's setting is process-wide). 1 keeps the ranks'
  /// GEMMs independent and the results bit-deterministic.
  int blas_threads_per_rank = 1;
  /// Bound on any one wait for dependencies, in seconds; 0 = automatic: 30 s plus the time the
  /// whole schedule would take at 1 GFLOP/s and 100 MB/s, so a slow but healthy run never
  /// trips it.
  double wait_timeout_s = 0;
  /// Memory limit for the workspace in bytes; 0 = 75% of MemAvailable.
  std::int64_t memory_limit_bytes = 0;
  /// Transfers go through this engine; null = a MemcpyTransferEngine.
  std::shared_ptr<TransferEngine> transfer_engine;
  /// Null: every rank is a thread of this process. Otherwise this process runs only rank
  /// transport->rank(), holds only that rank's buffers, and reaches the other ranks (one per
  /// process) through the transport (transport.hpp).
  std::shared_ptr<Transport> transport;
  /// A GEMM runs as pieces of whole row blocks (multiples of kGemmPieceRowAlign rows, at least
  /// kGemmPieceMinMnk multiply-adds) of about this many FLOPs, checking between pieces whether
  /// the run was stopped, so a failing rank stops the others within one piece rather than one
  /// whole GEMM. Pieces write disjoint rows of the output and each is the same BLAS call on a
  /// sub-matrix, so results do not change. 0 = every GEMM in one call.
  double gemm_piece_flops = 1 << 30;

  // Fault injection, for tests.
  int fail_task_id = -1;   ///< this task throws when it starts
  int delay_task_id = -1;  ///< this task sleeps delay_s (abortably) before it runs
  double delay_s = 0;
  /// When set, counts GEMM pieces: every piece run, and those that finished after the run was
  /// stopped (the ones in flight at the stop: at most one per rank, since no piece starts
  /// once the stop is seen).
  struct PieceCounts {
    std::atomic<std::int64_t> run{0};
    std::atomic<std::int64_t> after_stop{0};
  };
  PieceCounts* piece_counts = nullptr;
};

/// GEMM pieces start at row offsets that are multiples of this. OpenBLAS's result for an
/// output row depends on the row's position in its column-major N blocking (three times the
/// kernel's unroll); 192 is a multiple of every such period up to 3 x 64, so a piece starting
/// there computes its rows exactly as the whole call does
/// (`Executor.GemmPiecesGiveBitIdenticalResults` checks it on the machine at hand).
inline constexpr std::int64_t kGemmPieceRowAlign = 192;
/// Every GEMM piece has at least this many multiply-adds (rows x N x K): BLAS libraries take
/// other code paths (small-matrix and direct kernels, with another summation order) below a
/// few million, and a piece must compute exactly what the whole call would.
inline constexpr double kGemmPieceMinMnk = 33554432.0;  // 2^25

/// The per-rank buffers of one schedule, bound to an operator's data: buffers named "x" (role
/// input) and "w" (role weight) hold rank r's blocks of X and W; every other buffer (outputs
/// and scratch) starts at zero on every run, so a schedule may accumulate into scratch.
class Workspace {
 public:
  /// Checks that the schedule is for data.op (kind, M, N, K, tp) and that each rank has "x",
  /// "w" and "y" buffers of the shapes its blocks need, checks the total size against the
  /// memory limit, then allocates. Errors name the buffer or the sizes.
  static Result<Workspace> create(const schedule::Schedule& s, const OperatorData& data,
                                  const ExecutorOptions& options = {});

  /// Bytes the workspace of `s` allocates (every buffer in FP32).
  static std::int64_t bytes_needed(const schedule::Schedule& s);

  /// Copies the inputs in and zeroes every other buffer.
  void reset(const OperatorData& in);

  float* data(int buffer) { return buffers_.at(static_cast<std::size_t>(buffer)).data(); }
  const float* data(int buffer) const {
    return buffers_.at(static_cast<std::size_t>(buffer)).data();
  }
  /// Row stride (= columns) of a buffer.
  std::int64_t ld(int buffer) const { return cols_.at(static_cast<std::size_t>(buffer)); }
  /// Index of rank r's output buffer "y".
  int output_buffer(int rank) const { return y_.at(static_cast<std::size_t>(rank)); }
  int ranks() const { return static_cast<int>(y_.size()); }
  /// Every buffer's contents, for bit-exact comparisons between runs (buffers of ranks held by
  /// other processes are empty).
  const std::vector<std::vector<float>>& buffers() const { return buffers_; }
  /// The rank whose buffers this process holds, or -1 when it holds every rank's.
  int local_rank() const { return local_rank_; }
  /// Whether rank r's buffers live in this process.
  bool holds(int rank) const { return local_rank_ < 0 || rank == local_rank_; }

 private:
  std::vector<std::vector<float>> buffers_;
  int local_rank_ = -1;
  std::vector<std::int64_t> cols_;
  std::vector<int> x_, w_, y_;  // per rank
};

/// What one execution did.
struct RunStats {
  double wall_s = 0;  ///< from releasing the threads to the last task's completion
  int tasks = 0;
  int threads = 0;                  ///< one per (rank, resource) with tasks
  double gemm_flops = 0;            ///< 2 m n k summed over gemm tasks
  std::int64_t transfer_bytes = 0;  ///< FP32 bytes moved by transfer tasks
};

/// Structural checks the executor relies on for memory safety and progress: ids, deps,
/// resources, regions inside their buffers, operand shapes, and no cycle in dependencies plus
/// resource order (which would deadlock). Errors name the rank and the task.
Status check_executable(const schedule::Schedule& s);

/// Runs `s` once on the workspace (call ws.reset() first for fresh inputs). On failure (a task
/// throws, BLAS rejects a call, a wait exceeds the bound) every thread stops promptly, all are
/// joined, and the error names the rank and task: "rank 2 task 17 'name': ...".
Result<RunStats> run(const schedule::Schedule& s, Workspace& ws,
                     const ExecutorOptions& options = {});

/// Compares the output "y" of every rank the workspace holds with the reference.
ErrorStats compare_outputs(const schedule::Schedule& s, const Workspace& ws,
                           const HostMatrix<double>& reference);

/// "rank R task I 'name'", the prefix of every error about a task.
std::string task_label(const schedule::Schedule& s, int task_id);

}  // namespace compass::backends::cpu
