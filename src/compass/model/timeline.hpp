#pragma once
// A timeline evaluation of a generated Schedule under the model's cost rules, task by task: the
// oracle the closed-form estimates (estimate.hpp) are tested against. Each resource runs its
// tasks in schedule order (schedule::resource_lanes), a task starts when its deps have finished
// and its resource is free, and every task is priced by the rule the model and the simulator
// share (hardware/task_costs.hpp, hardware/gemm_cost.hpp); transfers share link directions
// max-min (hardware::sharing), GEMMs slow down while their rank's copy engines move data.
// Rules: docs/model.md, "Timeline oracle".

#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/model/estimate.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::model {

/// When every task ran, and the last end.
struct Timeline {
  double makespan_s = 0;
  std::vector<double> start_s;  ///< per task id: when its resource took it
  std::vector<double> end_s;    ///< per task id: when it finished
};

/// Runs `s` on `p` (GPU s.gpus[r] for rank r) under `knobs`. Errors: an invalid schedule, a
/// schedule whose deps and resource orders deadlock (schedule::issue_order), GPUs the profile
/// lacks, transfers over a route with no bandwidth.
Result<Timeline> evaluate_timeline(const hardware::Profile& p, const schedule::Schedule& s,
                                   const ModelKnobs& knobs = {});

}  // namespace compass::model
