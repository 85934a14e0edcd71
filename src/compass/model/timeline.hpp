#pragma once
// A timeline evaluation of a Schedule under the model's cost rules (docs/model.md, "Timeline
// oracle"). A schedule that is a strategy's program lowered (a fused program read back with
// schedule::program_of, or the sequential / decompose:d program whose lowering it is) is
// followed as the estimate follows that program, so the two are equal. Any other schedule,
// and every schedule under evaluate_task_timeline, runs task by task: each resource runs its
// tasks in schedule order (schedule::resource_lanes), a task starts when its deps have finished
// and its resource is free, and every task is priced by the rule the model and the simulator
// share (hardware/task_costs.hpp, hardware/gemm_cost.hpp); transfers share link directions
// max-min (hardware::sharing), GEMMs slow down while their rank's copy engines move data.

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

/// `s` task by task, never read back as a program: the check of a program's follower against
/// every task's own events. Same errors as evaluate_timeline.
Result<Timeline> evaluate_task_timeline(const hardware::Profile& p, const schedule::Schedule& s,
                                        const ModelKnobs& knobs = {});

}  // namespace compass::model
