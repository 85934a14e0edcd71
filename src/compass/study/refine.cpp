#include "compass/study/refine.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "compass/backends/sim/simulator.hpp"
#include "compass/core/format.hpp"
#include "compass/study/accuracy.hpp"

namespace compass::study {

Status check(const RefineOptions& o) {
  if (!std::isfinite(o.margin) || o.margin < 0 || o.margin > 10)
    return make_error("refine margin must be a number in [0, 10], got {}", o.margin);
  if (o.max_candidates < 1 || o.max_candidates > 16)
    return make_error("refine candidates must be in 1..16, got {}", o.max_candidates);
  return Status::success();
}

std::vector<std::size_t> refine_candidates(const std::vector<double>& predicted_s,
                                           std::size_t model_choice, const RefineOptions& o) {
  std::vector<std::size_t> out;
  if (model_choice >= predicted_s.size()) return out;
  std::vector<std::size_t> order(predicted_s.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return predicted_s[a] < predicted_s[b]; });
  const double limit = predicted_s[order.front()] * (1 + o.margin);
  out.push_back(model_choice);
  for (std::size_t i : order) {
    if (out.size() >= o.max_candidates || !(predicted_s[i] <= limit)) break;
    if (i != model_choice) out.push_back(i);
  }
  return out;
}

std::size_t refined_pick(const std::vector<std::size_t>& candidates,
                         const std::vector<double>& simulated_s) {
  return candidates.at(fastest(simulated_s));
}

Result<double> simulated_time_s(const hardware::Profile& machine, const workload::OperatorSpec& op,
                                const schedule::Strategy& strategy,
                                const schedule::CommPlan& plan) {
  namespace sim = backends::sim;
  if (!sim::compiled_in())
    return make_error("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  COMPASS_ASSIGN(const schedule::Schedule s, schedule::generate_for(machine, op, strategy, plan));
  sim::SimOptions so;
  so.busiest_links = 0;
  Result<sim::SimResult> res = sim::simulate(machine, s, so);
  if (!res.ok()) return make_error("simulating: {}", res.error().message);
  return res->total_s;
}

Result<RefinedOp> refine_choice(const hardware::Profile& profile, model::OperatorChoice& choice,
                                const schedule::CommPlan& plan, const RefineOptions& o) {
  namespace sim = backends::sim;
  COMPASS_TRY(check(o));
  RefinedOp r;
  r.model_choice = r.refined_choice = choice.chosen;
  std::vector<double> predicted;
  for (const model::Estimate& e : choice.estimates) predicted.push_back(e.total_s);
  const std::vector<std::size_t> candidates = refine_candidates(predicted, choice.chosen, o);
  if (candidates.size() < 2) return r;
  if (!sim::compiled_in())
    return make_error("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  for (std::size_t i : candidates) {
    const schedule::Strategy& st = choice.estimates[i].strategy;
    Result<double> t = simulated_time_s(profile, choice.op, st, plan);
    if (!t.ok())
      return make_error("refining {} ({}): {}",
                        choice.op.role.empty() ? "the operator" : choice.op.role,
                        schedule::to_string(st), t.error().message);
    r.simulated.push_back(i);
    r.simulated_s.push_back(*t);
  }
  r.refined_choice = refined_pick(r.simulated, r.simulated_s);
  if (r.changed()) {  // the model's pick was simulated first
    const std::size_t k = static_cast<std::size_t>(
        std::find(r.simulated.begin(), r.simulated.end(), r.refined_choice) - r.simulated.begin());
    choice.chosen = r.refined_choice;
    choice.reason = fmt::format(
        "{}: simulated {} vs the model's pick {} at {} (refined by simulation among {} "
        "candidates within {:.0f}%)",
        schedule::to_string(choice.estimates[r.refined_choice].strategy),
        format_duration(r.simulated_s[k]),
        schedule::to_string(choice.estimates[r.model_choice].strategy),
        format_duration(r.simulated_s[0]), r.simulated.size(), 100 * o.margin);
  }
  return r;
}

}  // namespace compass::study
