#include "compass/study/sim_sweep.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "compass/backends/sim/simulator.hpp"
#include "compass/hardware/cut_bound.hpp"
#include "compass/hardware/rings.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/model/selector.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::study {

using schedule::StrategyKind;

const char* candidate_name(int i) {
  static const char* names[] = {"sequential",       "decompose:d*", "fuse:all2all", "fuse:ring",
                                "fuse:double-ring", "fuse:hier",    "fuse:synth"};
  return names[i];
}

std::string row_label(const plan::SweepResult& r, std::size_t i) {
  const plan::SweepRow& row = r.rows[i];
  return fmt::format("{} {} {} tp{} M={}", row.entry.model, row.entry.layer,
                     workload::to_string(row.entry.op.kind), row.entry.op.tp, row.entry.op.m);
}

ConfigTimes config_times(const SimRow& row) {
  ConfigTimes c;
  for (int j = 0; j < kCandidateCount; ++j) {
    c.strategies.push_back(candidate_name(j));
    c.predicted_s.push_back(row.pred_s[j]);
    c.reference_s.push_back(row.sim_s[j]);
  }
  c.chosen = static_cast<std::size_t>(row.chosen);
  return c;
}

namespace {

// Fills row.attainable_s and row.comm_bound: the collective at its cut bound, the GEMM alone,
// and the double ring's collective under max-min sharing.
Status attainable(const hardware::Profile& profile, const workload::OperatorSpec& op,
                  const schedule::CommPlan& plan, SimRow& row) {
  const double e = dtype_bytes(op.dtype);
  const bool ag = op.kind == workload::OpKind::ag_gemm;
  const double bytes = static_cast<double>(op.m) * static_cast<double>(ag ? op.k : op.n) * e;
  const int gpu = plan.gpus.front();
  const workload::GemmShape local = workload::local_gemm(op);
  const double gemm = hardware::gemm_time_s(profile, local.m, local.n, local.k, op.dtype, gpu);
  double bound = 0, dring = 0;
  if (op.tp > 1) {
    hardware::DoubleRing dr;
    for (int r : plan.ring) dr.first.order.push_back(plan.gpus[static_cast<std::size_t>(r)]);
    for (int r : plan.ring2) dr.second.order.push_back(plan.gpus[static_cast<std::size_t>(r)]);
    const double ag_dring = hardware::allgather_time_double_ring(profile, dr, bytes).time_s;
    COMPASS_ASSIGN(const hardware::CutBound agb,
                   hardware::allgather_cut_bound(profile, plan.gpus, bytes));
    COMPASS_ASSIGN(const hardware::CutBound rsb,
                   hardware::reduce_scatter_cut_bound(profile, plan.gpus, bytes));
    switch (op.kind) {
      case workload::OpKind::ag_gemm: bound = agb.time_s; dring = ag_dring; break;
      case workload::OpKind::gemm_rs: bound = rsb.time_s; dring = ag_dring; break;
      case workload::OpKind::gemm_ar:
        bound = rsb.time_s + agb.time_s;
        dring = 2 * ag_dring;
        break;
    }
  }
  row.attainable_s = std::max(bound, gemm);
  row.comm_bound = dring > gemm;
  return Status::success();
}

}  // namespace

Result<std::vector<SimRow>> simulate_sweep(
    const hardware::Profile& profile, const plan::SweepResult& r,
    const std::function<void(std::size_t, std::size_t)>& progress,
    const std::vector<int>& gpus, const Share& share) {
  namespace sim = backends::sim;
  if (!sim::compiled_in())
    return make_error("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  std::map<int, schedule::CommPlan> plans;
  std::vector<SimRow> out(r.rows.size());
  std::size_t total = 0, done = 0;
  for (std::size_t i = 0; i < r.rows.size(); ++i) total += share.mine(i) ? 1 : 0;
  auto run_one = [&](const workload::OperatorSpec& op, const schedule::Strategy& st,
                     const schedule::CommPlan& plan, std::size_t i) -> Result<double> {
    Result<double> t = simulated_time_s(profile, op, st, plan);
    if (!t.ok())
      return make_error("row {} ({}) under {}: {}", i + 1, row_label(r, i),
                        schedule::to_string(st), t.error().message);
    return t;
  };
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    if (!share.mine(i)) continue;
    const model::OperatorChoice& c = r.rows[i].choice;
    auto it = plans.find(c.op.tp);
    if (it == plans.end()) {
      if (!gpus.empty() && c.op.tp > static_cast<int>(gpus.size()))
        return make_error("row {} ({}): tp={} exceeds the {} GPUs given", i + 1, row_label(r, i),
                          c.op.tp, gpus.size());
      std::vector<int> group(static_cast<std::size_t>(c.op.tp));
      for (int g = 0; g < c.op.tp; ++g)
        group[static_cast<std::size_t>(g)] = gpus.empty() ? g : gpus[static_cast<std::size_t>(g)];
      COMPASS_ASSIGN(schedule::CommPlan plan, schedule::comm_plan_for(profile, group));
      it = plans.emplace(c.op.tp, std::move(plan)).first;
    }
    SimRow row;
    std::vector<double> sim_times;
    for (int j = 0; j < kCandidateCount; ++j) {
      const model::Estimate& e = c.of(kCandidates[j]);
      row.pred_s[j] = e.total_s;
      COMPASS_ASSIGN(row.sim_s[j], run_one(c.op, e.strategy, it->second, i));
      sim_times.push_back(row.sim_s[j]);
      if (c.choice().strategy == e.strategy) row.chosen = j;
    }
    row.best = static_cast<int>(fastest(sim_times));
    const int dstar = c.of(StrategyKind::decompose).strategy.parts;
    if (dstar == 4) {
      row.sim_d4_s = row.sim_s[1];
    } else if (r.rows[i].decompose4_s > 0) {
      COMPASS_ASSIGN(row.sim_d4_s,
                     run_one(c.op, schedule::Strategy{StrategyKind::decompose, 4}, it->second, i));
    }
    row.regret = regret(config_times(row));
    COMPASS_TRY(attainable(profile, c.op, it->second, row));
    out[i] = row;
    if (progress) progress(++done, total);
  }
  return out;
}

SimSummary summarise(const std::vector<SimRow>& rows, const RefineOptions& refine) {
  SimSummary s;
  if (rows.empty()) return s;
  std::vector<ConfigTimes> configs, refined;
  std::vector<double> drv, rv, drr, d4, cs, bs, tdr, acb, aall;
  for (const SimRow& r : rows) {
    configs.push_back(config_times(r));
    ConfigTimes c = configs.back();
    const std::vector<std::size_t> candidates =
        refine_candidates(c.predicted_s, c.chosen, refine);
    if (candidates.size() > 1) {
      std::vector<double> sim;
      for (std::size_t k : candidates) sim.push_back(c.reference_s[k]);
      c.chosen = refined_pick(candidates, sim);
      s.refine_simulations += static_cast<int>(candidates.size());
    }
    refined.push_back(std::move(c));
    drv.push_back(r.sim_s[2] / r.sim_s[4]);
    rv.push_back(r.sim_s[2] / r.sim_s[3]);
    drr.push_back(r.sim_s[3] / r.sim_s[4]);
    if (r.sim_d4_s > 0) d4.push_back(r.sim_d4_s / r.sim_s[1]);
    cs.push_back(r.sim_s[0] / r.sim_s[r.chosen]);
    bs.push_back(r.sim_s[0] / r.sim_s[r.best]);
    if (r.sim_s[2] > r.sim_s[0]) ++s.a2a_slower_than_seq;
    const double share = r.attainable_s / r.sim_s[r.chosen];
    aall.push_back(share);
    if (r.comm_bound) {
      tdr.push_back(r.sim_s[4] / std::min(r.sim_s[5], r.sim_s[6]));
      acb.push_back(share);
    }
  }
  s.trees_over_dring_cb = plan::distribution(tdr);
  s.attained_cb = plan::distribution(acb);
  s.attained_all = plan::distribution(aall);
  s.accuracy = accuracy(configs);
  s.refined = accuracy(refined);
  s.choice_within_tie = choice_within(s.accuracy, model::kTieTolerance);
  s.dring_over_a2a = plan::distribution(drv);
  s.ring_over_a2a = plan::distribution(rv);
  s.dring_over_ring = plan::distribution(drr);
  s.dstar_over_d4 = plan::distribution(d4);
  s.choice_over_seq = plan::distribution(cs);
  s.simbest_over_seq = plan::distribution(bs);
  return s;
}

}  // namespace compass::study
