#include "compass/study/job_accuracy.hpp"

#include <algorithm>
#include <cmath>

#include "compass/backends/sim/job_sim.hpp"

namespace compass::study {

Result<std::vector<LayoutSimulation>> simulate_layouts(
    const job::Cluster& cluster, const workload::ModelConfig& m,
    const std::vector<job::Candidate>& candidates, plan::Config overlap,
    const job::StepOptions& options, const Share& share, backends::sim::JobSimScope scope) {
  std::vector<LayoutSimulation> out(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!share.mine(i)) continue;
    auto sim = backends::sim::simulate_job(cluster, m, candidates[i].under(overlap), options,
                                            scope);
    if (!sim.ok())
      return make_error("refine: {}: {}", job::describe(candidates[i].layout), sim.error().message);
    out[i] = LayoutSimulation{sim->iteration_s, sim->flows};
  }
  return out;
}

Result<RefineReport> rank_by_simulation(const std::vector<job::Candidate>& candidates,
                                        const std::vector<LayoutSimulation>& simulations,
                                        plan::Config overlap) {
  if (candidates.empty()) return make_error("refine: no candidates to simulate");
  if (simulations.size() != candidates.size())
    return make_error("refine: {} simulations for {} candidates", simulations.size(),
                      candidates.size());
  RefineReport r;
  r.overlap = overlap;
  int model_best = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const job::StepResult& st = candidates[i].under(overlap);
    SimulatedLayout row;
    row.candidate = candidates[i];
    row.model_s = st.iteration_s;
    row.sim_s = simulations[i].sim_s;
    row.error = (row.model_s - row.sim_s) / row.sim_s;
    row.flows = simulations[i].flows;
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

Result<RefineReport> refine_by_simulation(const job::Cluster& cluster,
                                          const workload::ModelConfig& m,
                                          const std::vector<job::Candidate>& candidates,
                                          plan::Config overlap, const job::StepOptions& options) {
  if (candidates.empty()) return make_error("refine: no candidates to simulate");
  COMPASS_ASSIGN(const std::vector<LayoutSimulation> sims,
                 simulate_layouts(cluster, m, candidates, overlap, options));
  return rank_by_simulation(candidates, sims, overlap);
}

}  // namespace compass::study
