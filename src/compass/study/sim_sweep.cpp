#include "compass/study/sim_sweep.hpp"

#include <map>

#include <fmt/format.h>

#include "compass/backends/sim/simulator.hpp"
#include "compass/model/selector.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::study {

using schedule::StrategyKind;

const char* candidate_name(int i) {
  static const char* names[] = {"sequential", "decompose:d*", "fuse:all2all", "fuse:ring",
                                "fuse:double-ring"};
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

Result<std::vector<SimRow>> simulate_sweep(
    const hardware::Profile& profile, const plan::SweepResult& r,
    const std::function<void(std::size_t, std::size_t)>& progress,
    const std::vector<int>& gpus) {
  namespace sim = backends::sim;
  if (!sim::compiled_in())
    return make_error("this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  std::map<int, schedule::CommPlan> plans;
  std::vector<SimRow> out;
  out.reserve(r.rows.size());
  sim::SimOptions opts;
  opts.busiest_links = 0;
  auto run_one = [&](const workload::OperatorSpec& op, const schedule::Strategy& st,
                     const schedule::CommPlan& plan, std::size_t i) -> Result<double> {
    COMPASS_ASSIGN(const schedule::Schedule s, schedule::generate(op, st, plan));
    Result<sim::SimResult> res = sim::simulate(profile, s, opts);
    if (!res.ok())
      return make_error("simulating row {} ({}) under {}: {}", i + 1, row_label(r, i),
                        schedule::to_string(st), res.error().message);
    return res.value().total_s;
  };
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
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
    out.push_back(row);
    if (progress) progress(i + 1, r.rows.size());
  }
  return out;
}

SimSummary summarise(const std::vector<SimRow>& rows) {
  SimSummary s;
  if (rows.empty()) return s;
  std::vector<ConfigTimes> configs;
  std::vector<double> drv, rv, drr, d4, cs, bs;
  for (const SimRow& r : rows) {
    configs.push_back(config_times(r));
    drv.push_back(r.sim_s[2] / r.sim_s[4]);
    rv.push_back(r.sim_s[2] / r.sim_s[3]);
    drr.push_back(r.sim_s[3] / r.sim_s[4]);
    if (r.sim_d4_s > 0) d4.push_back(r.sim_d4_s / r.sim_s[1]);
    cs.push_back(r.sim_s[0] / r.sim_s[r.chosen]);
    bs.push_back(r.sim_s[0] / r.sim_s[r.best]);
    if (r.sim_s[2] > r.sim_s[0]) ++s.a2a_slower_than_seq;
  }
  s.accuracy = accuracy(configs);
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
