#include "compass/plan/sweep.hpp"

#include <algorithm>
#include <numeric>

namespace compass::plan {

using schedule::StrategyKind;

Distribution distribution(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int>(values.size());
  d.min = values.front();
  d.max = values.back();
  const std::size_t n = values.size();
  d.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  return d;
}

SweepSummary summarise(const std::vector<SweepRow>& rows) {
  SweepSummary s;
  for (const char* k : {"sequential", "decompose", "fuse:all2all", "fuse:ring", "fuse:double-ring",
                        "fuse:hier", "fuse:synth"})
    s.wins[k] = 0;
  std::vector<double> dr, d4, worst, choice, gap, trees_dr, trees_a2a;
  for (const SweepRow& r : rows) {
    const model::OperatorChoice& c = r.choice;
    const schedule::Strategy& st = c.choice().strategy;
    ++s.wins[st.kind == StrategyKind::decompose ? "decompose" : schedule::to_string(st)];
    const double seq = c.of(StrategyKind::sequential).total_s;
    const double a2a = c.of(StrategyKind::fuse_all2all).total_s;
    const double dring = c.of(StrategyKind::fuse_double_ring).total_s;
    const double dstar = c.of(StrategyKind::decompose).total_s;
    dr.push_back(a2a / dring);
    const double trees = std::min(c.of(StrategyKind::fuse_hier).total_s,
                                  c.of(StrategyKind::fuse_synth).total_s);
    trees_dr.push_back(dring / trees);
    trees_a2a.push_back(a2a / trees);
    if (r.decompose4_s > 0) d4.push_back(r.decompose4_s / dstar);
    worst.push_back(r.worst_d_s / dstar);
    choice.push_back(seq / c.choice().total_s);
    gap.push_back(c.odp.gap());
    if (a2a > seq) ++s.all2all_slower_than_sequential;
    if (c.odp.d_closed == c.odp.d_argmin) ++s.closed_form_is_argmin;
  }
  s.double_ring_over_all2all = distribution(dr);
  s.trees_over_double_ring = distribution(trees_dr);
  s.trees_over_all2all = distribution(trees_a2a);
  s.dstar_over_d4 = distribution(d4);
  s.dstar_over_worst_d = distribution(worst);
  s.choice_over_sequential = distribution(choice);
  s.odp_gap = distribution(gap);
  return s;
}

Result<SweepResult> run_sweep(const hardware::Profile& p,
                              const std::vector<workload::GridEntry>& grid,
                              const std::function<void(std::size_t, std::size_t)>& progress,
                              const std::vector<int>& gpus) {
  model::Caches caches;
  return run_sweep(p, grid, caches, progress, gpus);
}

Result<SweepResult> run_sweep(const hardware::Profile& p,
                              const std::vector<workload::GridEntry>& grid, model::Caches& caches,
                              const std::function<void(std::size_t, std::size_t)>& progress,
                              const std::vector<int>& gpus) {
  SweepResult res;
  res.profile = p.name;
  std::map<int, schedule::CommPlan> plans;  // one topology-aware plan per TP degree
  res.rows.reserve(grid.size());
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const workload::GridEntry& g = grid[i];
    const int tp = g.op.tp;
    if (tp < 1 || tp > p.gpu_count())
      return make_error("grid row {} ({} {}): tp={} exceeds the {} GPUs of '{}'", i, g.model,
                        g.layer, tp, p.gpu_count(), p.name);
    if (!gpus.empty() && tp > static_cast<int>(gpus.size()))
      return make_error("grid row {} ({} {}): tp={} exceeds the {} GPUs given", i, g.model,
                        g.layer, tp, gpus.size());
    auto it = plans.find(tp);
    if (it == plans.end()) {
      std::vector<int> group(tp);
      if (gpus.empty()) {
        std::iota(group.begin(), group.end(), 0);
      } else {
        std::copy(gpus.begin(), gpus.begin() + tp, group.begin());
      }
      COMPASS_ASSIGN(schedule::CommPlan cp, schedule::comm_plan_for(p, group));
      it = plans.emplace(tp, std::move(cp)).first;
    }
    SweepRow row;
    row.entry = g;
    // Models share operators (the same hidden size gives the same qkv and proj): an operator
    // met before on this plan has the same choice, so it is copied instead of planned again.
    const auto same = std::find_if(res.rows.begin(), res.rows.end(),
                                   [&](const SweepRow& r) { return r.entry.op == g.op; });
    if (same != res.rows.end()) {
      row.choice = same->choice;
    } else {
      Result<model::OperatorChoice> c = model::choose_strategy(p, g.op, it->second, caches,
                                                             /*breakdown=*/false);
      if (!c.ok())
        return make_error("grid row {} ({} {}): {}", i, g.model, g.layer, c.error().message);
      row.choice = std::move(c).value();
    }
    const model::OdpResult& odp = row.choice.odp;
    row.decompose4_s = odp.exact_at(4);
    for (std::size_t j = 0; j < odp.feasible.size(); ++j)
      if (odp.exact_s[j] >= row.worst_d_s) {
        row.worst_d_s = odp.exact_s[j];
        row.worst_d = odp.feasible[j];
      }
    res.rows.push_back(std::move(row));
    if (progress) progress(i + 1, grid.size());
  }
  res.summary = summarise(res.rows);
  return res;
}

}  // namespace compass::plan
