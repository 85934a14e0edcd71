#include "compass/study/job_accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "compass/backends/sim/job_sim.hpp"
#include "compass/study/refine.hpp"

namespace compass::study {

namespace {

constexpr const char* kTeDefaultNotSimulated =
    "simulated TP operators: te-default's bulk overlap pairs two operators in a way the "
    "operator simulator does not run; use compass or megatron";

}  // namespace

const char* to_string(TpOpTimes t) { return t == TpOpTimes::simulated ? "simulated" : "priced"; }

Result<plan::LayerPlan> with_simulated_tp_ops(const hardware::Profile& node, plan::LayerPlan lp,
                                              plan::Config c) {
  if (c == plan::Config::te_default) return make_error("{}", kTeDefaultNotSimulated);
  if (lp.parallel.tp < 2) return lp;
  for (plan::PlannedOp& po : lp.ops) {
    model::Estimate& e =
        c == plan::Config::megatron ? po.megatron : po.choice.estimates.at(po.choice.chosen);
    Result<double> t = simulated_time_s(node, po.choice.op, e.strategy, lp.plan);
    if (!t.ok())
      return make_error("simulated TP operators: {} ({}): {}", po.choice.op.role,
                        schedule::to_string(e.strategy), t.error().message);
    e.total_s = *t;
  }
  return lp;
}

Status check_job_sim(job::Pricing under, const JobSimSettings& settings) {
  if (settings.tp_ops != TpOpTimes::simulated) return Status::success();
  if (under == job::Pricing::launch)
    return make_error(
        "simulated TP operators: a launch runs TE's exported settings (bulk overlap among "
        "them), not schedules the operator simulator runs; use compass or megatron");
  if (under == job::Pricing::te_default) return make_error("{}", kTeDefaultNotSimulated);
  return Status::success();
}

namespace {

// The layer plans of a call's layouts with simulated TP operators, one per distinct shape.
class SimulatedPlans {
 public:
  SimulatedPlans(const job::Cluster& cluster, const workload::ModelConfig& m, plan::Config c)
      : cluster_(cluster), model_(m), config_(c), planner_(cluster.node) {}

  Result<const plan::LayerPlan*> of(const job::Layout& l) {
    const job::LayerPlanKey key = job::layer_plan_key(l);
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      COMPASS_ASSIGN(plan::LayerPlan lp, job::plan_for(planner_, cluster_, model_, l));
      COMPASS_ASSIGN(plan::LayerPlan sim, with_simulated_tp_ops(cluster_.node, std::move(lp), config_));
      it = plans_.emplace(key, std::move(sim)).first;
    }
    return &it->second;
  }

 private:
  const job::Cluster& cluster_;
  const workload::ModelConfig& model_;
  plan::Config config_;
  plan::LayerPlanner planner_;  // plans on cluster_.node
  std::map<job::LayerPlanKey, plan::LayerPlan> plans_;
};

}  // namespace

Result<std::vector<LayoutSimulation>> simulate_layouts(
    const job::Cluster& cluster, const workload::ModelConfig& m,
    const std::vector<job::Candidate>& candidates, job::Pricing under,
    const job::StepOptions& options, const Share& share, const JobSimSettings& settings) {
  COMPASS_TRY(check_job_sim(under, settings));
  // Simulated TP operators exist for these two (check_job_sim).
  const plan::Config overlap =
      under == job::Pricing::megatron ? plan::Config::megatron : plan::Config::compass;
  std::vector<LayoutSimulation> out(candidates.size());
  SimulatedPlans plans(cluster, m, overlap);
  job::JobComm comm(cluster);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (!share.mine(i)) continue;
    const job::Layout& l = candidates[i].layout;
    job::StepResult step = candidates[i].priced(under);
    if (settings.tp_ops == TpOpTimes::simulated) {
      Result<const plan::LayerPlan*> lp = plans.of(l);
      if (!lp.ok()) return make_error("refine: {}: {}", job::describe(l), lp.error().message);
      Result<job::StepResult> priced = job::price_step(cluster, comm, m, l, **lp, overlap, options);
      if (!priced.ok())
        return make_error("refine: {}: {}", job::describe(l), priced.error().message);
      step = std::move(*priced);
    }
    auto sim = backends::sim::simulate_job(cluster, m, step, options, settings.scope);
    if (!sim.ok()) return make_error("refine: {}: {}", job::describe(l), sim.error().message);
    out[i] = LayoutSimulation{sim->iteration_s, sim->flows};
  }
  return out;
}

Result<RefineReport> rank_by_simulation(const std::vector<job::Candidate>& candidates,
                                        const std::vector<LayoutSimulation>& simulations,
                                        job::Pricing under) {
  if (candidates.empty()) return make_error("refine: no candidates to simulate");
  if (simulations.size() != candidates.size())
    return make_error("refine: {} simulations for {} candidates", simulations.size(),
                      candidates.size());
  RefineReport r;
  r.under = under;
  int model_best = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const job::StepResult& st = candidates[i].priced(under);
    SimulatedLayout row;
    row.candidate = candidates[i];
    row.model_s = st.iteration_s;
    row.sim_s = simulations[i].sim_s;
    row.error = (row.model_s - row.sim_s) / row.sim_s;
    row.flows = simulations[i].flows;
    r.rows.push_back(std::move(row));
    if (st.iteration_s < candidates[model_best].priced(under).iteration_s)
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
                                          job::Pricing under, const job::StepOptions& options) {
  if (candidates.empty()) return make_error("refine: no candidates to simulate");
  COMPASS_ASSIGN(const std::vector<LayoutSimulation> sims,
                 simulate_layouts(cluster, m, candidates, under, options));
  return rank_by_simulation(candidates, sims, under);
}

}  // namespace compass::study
