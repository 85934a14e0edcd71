#pragma once
// The step model held to the job simulation: the search's candidates simulated on SimGrid,
// re-ranked by simulated iteration time, with the model's error on each.

#include <vector>

#include "compass/backends/sim/job_sim.hpp"
#include "compass/core/result.hpp"
#include "compass/job/search.hpp"
#include "compass/study/share.hpp"

namespace compass::study {

/// One candidate: the model's and the simulation's iteration time under one TP overlap setting.
struct SimulatedLayout {
  job::Candidate candidate;
  double model_s = 0;
  double sim_s = 0;
  double error = 0;  ///< (model - sim) / sim
  long flows = 0;    ///< SimGrid communications of the simulation
};

struct RefineReport {
  plan::Config overlap = plan::Config::compass;
  std::vector<SimulatedLayout> rows;  ///< by simulated iteration time, shortest first
  int model_best = 0;                 ///< index in rows of the model's best candidate
  double mape = 0;                    ///< mean |error| over rows
  double max_abs_error = 0;
  /// How much longer the model's best runs in simulation than the simulated best (0: the same).
  double regret = 0;
};

/// One candidate's simulation, as it travels between processes.
struct LayoutSimulation {
  double sim_s = 0;  ///< simulated iteration time
  long flows = 0;    ///< SimGrid communications
};

/// Simulates the candidates of `share` under `overlap` (priced with `options`) over `scope`; the
/// others are left zero. Errors: a build without SimGrid, a simulation error (the layout is
/// named).
Result<std::vector<LayoutSimulation>> simulate_layouts(
    const job::Cluster& cluster, const workload::ModelConfig& m,
    const std::vector<job::Candidate>& candidates, plan::Config overlap,
    const job::StepOptions& options = {}, const Share& share = {},
    backends::sim::JobSimScope scope = backends::sim::JobSimScope::replica);

/// The candidates ranked by their simulations (index = candidate), with the model's errors.
/// Errors: no candidates, or a different number of simulations.
Result<RefineReport> rank_by_simulation(const std::vector<job::Candidate>& candidates,
                                        const std::vector<LayoutSimulation>& simulations,
                                        plan::Config overlap);

/// Simulates each candidate under `overlap` (priced with `options`, the searcher's) and ranks
/// them by simulated time. Errors: no candidates, a build without SimGrid, a simulation error
/// (the layout is named).
Result<RefineReport> refine_by_simulation(const job::Cluster& cluster,
                                          const workload::ModelConfig& m,
                                          const std::vector<job::Candidate>& candidates,
                                          plan::Config overlap,
                                          const job::StepOptions& options = {});

}  // namespace compass::study
