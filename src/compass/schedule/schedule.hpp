#pragma once
// The schedule: the one contract between planning and execution. A plain-data task graph for
// one operator on p ranks. Each task occupies one serial resource of one rank (its compute
// stream or one of its copy engines); a resource runs its tasks in the order they appear in
// Schedule::tasks, each after all of its dependencies have finished. Buffers are named per
// rank, and every task names the exact 2-D regions (row-major, in elements) it reads and
// writes, so a schedule says which bytes move where and which output rows each GEMM makes.
// The simulator, the CPU executor and the CUDA executor all run this structure.

#include <cstdint>
#include <string>
#include <vector>

#include "compass/schedule/strategy.hpp"
#include "compass/workload/operator.hpp"

namespace compass::hardware {
struct Profile;
}  // namespace compass::hardware

namespace compass::schedule {

enum class BufferRole { input, weight, output, scratch };

/// A row-major matrix owned by one rank.
struct Buffer {
  std::string name;  ///< "x", "w", "y", "xg" (gathered input), "part" (partial), "recv", ...
  int rank = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  BufferRole role = BufferRole::scratch;
  bool operator==(const Buffer&) const = default;
};

/// A rectangle of one buffer: rows [row, row + rows) x cols [col, col + cols).
struct Region {
  int buffer = -1;  ///< index into Schedule::buffers (the owning rank is the buffer's)
  std::int64_t row = 0;
  std::int64_t rows = 0;
  std::int64_t col = 0;
  std::int64_t cols = 0;
  bool operator==(const Region&) const = default;
  std::int64_t elements() const { return rows * cols; }
};

enum class ResourceKind { compute, copy_engine };

/// A serial execution resource of one rank.
struct Resource {
  int rank = 0;
  ResourceKind kind = ResourceKind::compute;
  int index = 0;  ///< copy engine number (0 for compute)
  bool operator==(const Resource&) const = default;
};

enum class TaskKind {
  transfer,  ///< dst (on a peer, or local) := src; runs on a copy engine of the sender
  gemm,      ///< dst (+)= a * b, a is [m, k], b is [k, n], dst is [m, n]
  add,       ///< dst += src (reduction of a received partial)
  copy,      ///< dst := src on the same rank
};

/// How a backend starts a task, beyond the task's own work: what the simulator charges it and
/// what an executor issues for it. The generators set it (schedule::assign_launches).
enum class Launch {
  kernel,         ///< a kernel of its own (one GEMM kernel): a kernel launch
  fused_kernel,   ///< the launch of a fused kernel: the first GEMM piece of a rank's fused GEMM
  flag_wait,      ///< inside a running fused kernel, after waiting on an arrival flag (the
                  ///< later GEMM pieces, and the adds of received partials)
  collective,     ///< the launch of an NCCL-style collective kernel (its first step's transfer)
  in_collective,  ///< a later step or a reduction inside a running collective kernel: nothing
  copy,           ///< a copy issued on its own (a copy-engine push or a local copy)
};

struct Task {
  int id = 0;             ///< == index in Schedule::tasks
  TaskKind kind = TaskKind::gemm;
  Resource resource;
  std::vector<int> deps;  ///< ids of tasks (any rank) that must finish first
  Region src;             ///< transfer/copy/add source; gemm: A
  Region b;               ///< gemm: B (unused otherwise)
  Region dst;             ///< transfer/copy destination; gemm: C; add: accumulator
  bool accumulate = false;  ///< gemm: C += A*B instead of C = A*B
  int channel = -1;       ///< transfers: ring/channel (0 first ring, 1 second ring), -1 none
  int step = -1;          ///< algorithm step, for labels and traces
  int chunk = -1;         ///< chunk (or part) number, for labels and traces
  /// gemm: fused GEMM group, or -1. The GEMM tasks of one rank with the same group number are
  /// one fused kernel on a backend that has one: a single GEMM over their rows that consumes
  /// their A rows piece by piece, in list order, each after the piece's producers. Backends
  /// without fused kernels (CPU executor, simulator, --kernel chunked) run the tasks one by
  /// one, which is the same computation chunk by chunk.
  int fused = -1;
  Launch launch = Launch::kernel;  ///< how it is started (not in the JSON; see assign_launches)
  std::string name;       ///< human label, e.g. "r3 ag step2 chunk5 ring1"
  bool operator==(const Task&) const = default;
};

struct Schedule {
  workload::OperatorSpec op;
  Strategy strategy;
  std::vector<int> gpus;      ///< GPU ordinal of each rank (size p)
  int copy_engines = 1;       ///< copy engines per rank the schedule uses
  std::vector<Buffer> buffers;
  std::vector<Task> tasks;
  bool operator==(const Schedule&) const = default;

  int ranks() const { return static_cast<int>(gpus.size()); }
  /// The rank that owns a region's buffer.
  int owner(const Region& r) const { return buffers.at(r.buffer).rank; }
  /// Index of buffer `name` of `rank`, or -1.
  int find_buffer(int rank, const std::string& name) const;
};

/// Sets every task's launch from the strategy, the task's kind and its place in the list:
/// fused strategies (schedule::is_fused) run each rank's GEMMs as one fused kernel (the first
/// GEMM task of the rank launches it, the others wait on flags), push data with copies and add
/// received partials after a flag wait; sequential and decompose:d launch one kernel per GEMM
/// and NCCL-style collectives, whose step-0 (or unstepped) transfers launch the collective
/// kernel and whose later steps and reductions run inside it. Transfers within one rank and
/// copy tasks are copies. The generators and schedule_from_json call it; a schedule built by
/// hand calls it too, or sets each launch itself.
void assign_launches(Schedule& s);

/// What starting a task launched `l` costs under `p`'s overheads: kernel and fused_kernel
/// kernel_launch_s, flag_wait flag_wait_s, collective collective_launch_s, in_collective
/// nothing, copy copy_launch_s (hardware::copy_issue_s). The simulator and the model's timeline
/// both charge this.
double launch_cost_s(const hardware::Profile& p, Launch l);

/// A GEMM task that is a piece of a fused kernel (launched fused_kernel or flag_wait): its
/// rank's pieces of the same N and K share one GEMM's waves (hardware::fused_chunk_compute_s),
/// and it runs beside copy-engine transfers.
bool in_fused_kernel(const Task& t);

/// "task 3 ('r0 gemm s1 c1')" ("task 3" when the task has no name): how errors name a task.
std::string task_label(const Task& t);

/// Bytes a task moves (transfer/copy/add) given the operator's dtype; 0 for gemm.
std::int64_t task_bytes(const Schedule& s, const Task& t);
/// FLOPs of a gemm task (2 m n k); 0 otherwise.
double task_flops(const Task& t, const Schedule& s);

/// The serial resources of a schedule, each with the tasks it runs in the order it runs them
/// (the order of Schedule::tasks). A compute resource is one per rank (its index counts as 0).
struct ResourceLanes {
  std::vector<Resource> resources;      ///< in order of first use
  std::vector<std::vector<int>> tasks;  ///< task ids of resources[i], in run order
  std::vector<int> lane_of;             ///< per task id: its index into resources (-1: skipped)
};
/// The lanes of every resource, or of rank `only_rank`'s resources when it is not negative.
ResourceLanes resource_lanes(const Schedule& s, int only_rank = -1);

/// The order in which a backend can issue the tasks: each after its deps and after the tasks
/// before it on its resource, the lowest id first among the ready ones. Needs every dep to be
/// a task id. Error, naming a task that waits forever, when the deps and the resources' orders
/// form a cycle (the schedule would deadlock).
Result<std::vector<int>> issue_order(const Schedule& s);

/// Structural checks: ids, deps in range and acyclic, regions inside their buffers, transfers
/// on copy engines, gemm shapes consistent. Errors name the task.
Status validate(const Schedule& s);

/// JSON (documented in docs/schedule.md); schedule_from_json(schedule_to_json(s)) == s.
std::string schedule_to_json(const Schedule& s);
Result<Schedule> schedule_from_json(const std::string& text);

std::string_view to_string(TaskKind k);
std::string_view to_string(ResourceKind k);
std::string_view to_string(BufferRole r);
std::string_view to_string(Launch l);

}  // namespace compass::schedule
