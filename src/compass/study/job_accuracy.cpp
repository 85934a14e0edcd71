#include "compass/study/job_accuracy.hpp"

#include <algorithm>
#include <cmath>

#include "compass/backends/sim/job_sim.hpp"

namespace compass::study {

Result<RefineReport> refine_by_simulation(const job::Cluster& cluster,
                                          const workload::ModelConfig& m,
                                          const std::vector<job::Candidate>& candidates,
                                          plan::Config overlap, const job::StepOptions& options) {
  if (candidates.empty()) return make_error("refine: no candidates to simulate");
  RefineReport r;
  r.overlap = overlap;
  int model_best = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const job::StepResult& st = candidates[i].under(overlap);
    auto sim = backends::sim::simulate_job(cluster, m, st, options);
    if (!sim.ok())
      return make_error("refine: {}: {}", job::describe(candidates[i].layout), sim.error().message);
    SimulatedLayout row;
    row.candidate = candidates[i];
    row.model_s = st.iteration_s;
    row.sim_s = sim->iteration_s;
    row.error = (row.model_s - row.sim_s) / row.sim_s;
    row.flows = sim->flows;
    r.rows.push_back(std::move(row));
    if (st.iteration_s < candidates[model_best].under(overlap).iteration_s)
      model_best = static_cast<int>(i);
  }
  const job::Layout best_layout = candidates[model_best].layout;
  std::stable_sort(
      r.rows.begin(), r.rows.end(),
      [](const SimulatedLayout& a, const SimulatedLayout& b) { return a.sim_s < b.sim_s; });
  double sum = 0;
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    sum += std::abs(r.rows[i].error);
    r.max_abs_error = std::max(r.max_abs_error, std::abs(r.rows[i].error));
    if (r.rows[i].candidate.layout == best_layout) r.model_best = static_cast<int>(i);
  }
  r.mape = sum / static_cast<double>(r.rows.size());
  r.regret = r.rows[r.model_best].sim_s / r.rows.front().sim_s - 1;
  return r;
}

}  // namespace compass::study
