#pragma once
// The step model held to the job simulation: the search's candidates simulated on SimGrid,
// re-ranked by simulated iteration time, with the model's error on each.

#include <vector>

#include "compass/backends/sim/job_sim.hpp"
#include "compass/core/result.hpp"
#include "compass/job/search.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/study/share.hpp"

namespace compass::study {

/// One candidate: the model's and the simulation's iteration time under one of its prices (a
/// TP overlap setting, or its launch).
struct SimulatedLayout {
  job::Candidate candidate;
  double model_s = 0;
  double sim_s = 0;
  double error = 0;  ///< (model - sim) / sim
  long flows = 0;    ///< SimGrid communications of the simulation
};

struct RefineReport {
  job::Pricing under = job::Pricing::launch;
  std::vector<SimulatedLayout> rows;  ///< by simulated iteration time, shortest first
  int model_best = 0;                 ///< index in rows of the model's best candidate
  double mape = 0;                    ///< mean |error| over rows
  double max_abs_error = 0;
  /// How much longer the model's best runs in simulation than the simulated best (0: the same).
  double regret = 0;
};

/// Where the simulated iteration takes its TP operators' durations from.
enum class TpOpTimes {
  /// The step model's: each operator's estimate under the overlap setting (the default; the
  /// simulation then judges the pipeline schedule, the sends and the DP collectives).
  priced,
  /// Each distinct TP operator's schedule simulated alone on one node (the operator simulator,
  /// `compass simulate`), its time put in place of the estimate before the step is priced.
  simulated,
};

/// "priced" or "simulated".
const char* to_string(TpOpTimes t);

/// How the candidates are simulated.
struct JobSimSettings {
  backends::sim::JobSimScope scope = backends::sim::JobSimScope::replica;
  TpOpTimes tp_ops = TpOpTimes::priced;
};

/// Whether candidates priced `under` can be simulated as `settings` say. Simulated TP operators
/// run the schedules of Compass's or Megatron-LM's choices; a launch's TE settings and TE's
/// defaults (bulk overlap of two operators) are priced, not schedules the operator simulator
/// runs. Errors: that, in one line.
Status check_job_sim(job::Pricing under, const JobSimSettings& settings);

/// `lp` with every TP operator's estimate under `c` replaced by the simulated time of its
/// schedule on `node` (its GEMM work kept, so the rest counts as TP exposure); a plan with TP 1
/// is returned as it is. Errors: `c` is te-default (TE's bulk overlap of two operators is priced,
/// not a schedule the simulator runs), a build without SimGrid, a schedule that cannot be
/// generated or simulated (the operator and strategy named).
Result<plan::LayerPlan> with_simulated_tp_ops(const hardware::Profile& node, plan::LayerPlan lp,
                                              plan::Config c);

/// One candidate's simulation, as it travels between processes.
struct LayoutSimulation {
  double sim_s = 0;  ///< simulated iteration time
  long flows = 0;    ///< SimGrid communications
};

/// Simulates the candidates of `share` as priced `under` (with `options`) as `settings` say;
/// the others are left zero. With simulated TP operators each distinct layer plan is made and
/// simulated once per call. Errors: check_job_sim's, a build without SimGrid, a simulation
/// error (the layout is named).
Result<std::vector<LayoutSimulation>> simulate_layouts(
    const job::Cluster& cluster, const workload::ModelConfig& m,
    const std::vector<job::Candidate>& candidates, job::Pricing under,
    const job::StepOptions& options = {}, const Share& share = {},
    const JobSimSettings& settings = {});

/// The candidates ranked by their simulations (index = candidate), with the model's errors.
/// Errors: no candidates, or a different number of simulations.
Result<RefineReport> rank_by_simulation(const std::vector<job::Candidate>& candidates,
                                        const std::vector<LayoutSimulation>& simulations,
                                        job::Pricing under);

/// Simulates each candidate as priced `under` (with `options`, the searcher's) and ranks them
/// by simulated time. Errors: no candidates, a build without SimGrid, a simulation error
/// (the layout is named).
Result<RefineReport> refine_by_simulation(const job::Cluster& cluster,
                                          const workload::ModelConfig& m,
                                          const std::vector<job::Candidate>& candidates,
                                          job::Pricing under, const job::StepOptions& options = {});

}  // namespace compass::study
