#pragma once
// The schedule-to-stream mapping of the CUDA executor, as plain C++ so it is tested without a
// GPU. Every (rank, resource) of the schedule becomes one CUDA stream on the rank's device;
// a task runs on its resource's stream; a dependency between tasks on different streams
// becomes a CUDA event recorded after the producer and waited on by the consumer's stream
// (also across ranks and devices: one process owns every stream). Same-stream dependencies
// need nothing because a stream runs in issue order.

#include <vector>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cuda/fused_plan.hpp"
#include "compass/core/result.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cuda {

/// One CUDA stream.
struct StreamSpec {
  int rank = 0;
  schedule::ResourceKind kind = schedule::ResourceKind::compute;
  int index = 0;       ///< copy engine number (0 for compute)
  int device = 0;      ///< CUDA device ordinal the stream lives on
  /// Copy-engine streams get the device's highest priority, compute streams the lowest: the
  /// DMA copies themselves ignore priorities, but the small kernels that feed or drain
  /// communication (adds of received partials placed on a copy resource, future SM-driven
  /// copies) must not queue behind a long GEMM's blocks, which is what delays the next
  /// transfer and exposes communication.
  bool high_priority = false;
  bool operator==(const StreamSpec&) const = default;
};

/// How one task is issued from the host.
struct TaskIssue {
  int task = 0;                  ///< task id
  int stream = 0;                ///< index into StreamPlan::streams
  std::vector<int> wait_events;  ///< events the stream waits on before the task
  int record_event = -1;         ///< event recorded after the task (-1: none needed)
  bool operator==(const TaskIssue&) const = default;
};

struct StreamPlan {
  std::vector<StreamSpec> streams;
  std::vector<int> event_task;   ///< the producer task of each event
  std::vector<TaskIssue> issues; ///< in host issue order
  std::vector<int> devices;      ///< distinct devices used, ascending
};

/// The device of `rank`: 0 for virtual ranks, s.gpus[rank] for multi-GPU.
int rank_device(const schedule::Schedule& s, LaunchMode mode, int rank);

/// Maps a schedule onto streams and events. The issue order is a topological order of the
/// dependencies that keeps each resource's tasks in list order (ties go to the lower task id),
/// so an event is always recorded before any stream waits on it. Waits are pruned: of several
/// producers on one stream only the last in that stream's order is waited on. Errors (naming
/// the tasks): out-of-range ids, deps or ranks, and schedules that deadlock, e.g. a task that
/// depends on a task listed after it on the same resource.
Result<StreamPlan> make_stream_plan(const schedule::Schedule& s, LaunchMode mode);

/// The dependency flags (event indices) that release each of `pieces` (a fused group's, in
/// order) for a kernel issued on stream `kernel_stream`: per piece and per other stream holding
/// producers of it, the event of the producer issued last on that stream (the stream finishes
/// the earlier ones first). Producers on the kernel's stream need none. Errors name a producer
/// that is not in the plan or that is issued last on its stream but records no event.
Result<std::vector<std::vector<int>>> piece_flags(const schedule::Schedule& s,
                                                  const StreamPlan& plan, int kernel_stream,
                                                  const std::vector<Piece>& pieces);

/// Where rank r's local input, weight and output sit in the global X [M, K], W [K, N] and
/// Y [M, N] of the operator (the --check reference is built from these).
struct ReferenceBlocks {
  int x = -1, w = -1, y = -1;          ///< buffer indices
  std::int64_t x_row = 0, x_col = 0;   ///< top-left of the x block in X
  std::int64_t w_row = 0, w_col = 0;   ///< top-left of the w block in W
  std::int64_t y_row = 0, y_col = 0;   ///< top-left of the y block in Y
};

/// The blocks of every rank (workload::input_block, weight_block, output_block) with the
/// buffers that hold them. Errors name a missing buffer or a shape that does not match the
/// operator.
Result<std::vector<ReferenceBlocks>> reference_blocks(const schedule::Schedule& s);

}  // namespace compass::backends::cuda
