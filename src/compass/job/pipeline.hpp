#pragma once
// Pipeline schedules as task lists: 1F1B (PipeDream-Flush, Megatron-LM's default) and
// interleaved 1F1B (Megatron-LM's virtual pipeline), in the order each stage runs its forward
// and backward passes, with the sends between stages as dependency lags.

#include <array>
#include <optional>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/job/events.hpp"

namespace compass::job {

/// A pipeline's shape and per-micro-batch work. Virtual stage v = chunk * stages + stage runs
/// on resource `stage`; with chunks == 1 that is plain 1F1B.
struct PipelineSpec {
  int stages = 1;
  int chunks = 1;  ///< model chunks per stage (interleaving when > 1)
  int microbatches = 1;
  std::vector<double> forward_s;   ///< per virtual stage, one micro-batch
  std::vector<double> backward_s;  ///< per virtual stage (recomputation included)
  std::vector<double> send_s;      ///< per boundary v -> v+1 (activations; gradients back)
};

/// What one task of a pipeline list is.
struct PipelineTaskInfo {
  int stage = 0;
  int chunk = 0;
  int microbatch = 0;
  bool forward = true;
};

struct PipelineTasks {
  TaskList list;                       ///< resources = stages
  std::vector<PipelineTaskInfo> info;  ///< per task
};

/// The task list of one iteration. Errors: sizes not positive, vectors of the wrong length,
/// negative times, chunks > 1 with micro-batches not a multiple of stages.
Result<PipelineTasks> pipeline_tasks(const PipelineSpec& spec);

/// Task lists for a caller that prices many pipelines: the list of the last shape (stages,
/// chunks, micro-batches) is kept and only its times are set again for the next spec of that
/// shape (the search prices every layout under three settings). tasks(spec) equals
/// pipeline_tasks(spec), with the same errors.
class PipelineCache {
 public:
  /// `spec`'s task list, valid until the next call.
  Result<const PipelineTasks*> tasks(const PipelineSpec& spec);

 private:
  std::optional<PipelineTasks> kept_;
  std::array<int, 3> shape_{};
};

}  // namespace compass::job
