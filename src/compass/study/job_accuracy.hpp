#pragma once
// The step model held to the job simulation: the search's candidates simulated on SimGrid,
// re-ranked by simulated iteration time, with the model's error on each.

#include <vector>

#include "compass/core/result.hpp"
#include "compass/job/search.hpp"

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

/// Simulates each candidate under `overlap` (priced with `options`, the searcher's) and ranks
/// them by simulated time. Errors: no candidates, a build without SimGrid, a simulation error
/// (the layout is named).
Result<RefineReport> refine_by_simulation(const job::Cluster& cluster,
                                          const workload::ModelConfig& m,
                                          const std::vector<job::Candidate>& candidates,
                                          plan::Config overlap,
                                          const job::StepOptions& options = {});

}  // namespace compass::study
