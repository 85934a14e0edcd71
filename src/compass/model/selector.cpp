#include "compass/model/selector.hpp"

#include <algorithm>
#include <cmath>

#include "compass/core/format.hpp"
#include "compass/model/cache_tables.hpp"

namespace compass::model {

using schedule::Strategy;
using schedule::StrategyKind;

std::size_t select_fastest(const std::vector<Estimate>& estimates, double tie_tolerance) {
  COMPASS_CHECK(!estimates.empty(), "select_fastest: no estimates");
  double best = estimates.front().total_s;
  for (const Estimate& e : estimates) best = std::min(best, e.total_s);
  std::size_t chosen = estimates.size();
  for (std::size_t i = 0; i < estimates.size(); ++i) {
    const Estimate& e = estimates[i];
    if (e.total_s > best * (1.0 + tie_tolerance)) continue;
    if (chosen == estimates.size()) {
      chosen = i;
      continue;
    }
    const int ri = schedule::simplicity_rank(e.strategy.kind);
    const int rc = schedule::simplicity_rank(estimates[chosen].strategy.kind);
    if (ri < rc || (ri == rc && e.total_s < estimates[chosen].total_s)) chosen = i;
  }
  return chosen;
}

const Estimate& OperatorChoice::of(StrategyKind k) const {
  for (const Estimate& e : estimates)
    if (e.strategy.kind == k) return e;
  COMPASS_CHECK(false, "no estimate for strategy kind {}", static_cast<int>(k));
  return estimates.front();
}

std::string explain_choice(const std::vector<Estimate>& estimates, std::size_t chosen) {
  const Estimate& c = estimates.at(chosen);
  const std::string name = schedule::to_string(c.strategy);
  std::string line;
  if (c.strategy.kind == StrategyKind::sequential) {
    // Name the best overlapping strategy it beat (or tied).
    std::size_t alt = estimates.size();
    for (std::size_t i = 0; i < estimates.size(); ++i)
      if (i != chosen && (alt == estimates.size() || estimates[i].total_s < estimates[alt].total_s))
        alt = i;
    if (alt == estimates.size() || c.comm_s <= 0) {
      line = fmt::format("{}: no communication to overlap", name);
    } else {
      line = fmt::format("{}: {} {} not faster than {} once its overheads count", name,
                         schedule::to_string(estimates[alt].strategy),
                         format_duration(estimates[alt].total_s), format_duration(c.total_s));
    }
  } else {
    const double gemm = c.compute_s;
    if (c.comm_s <= gemm) {
      line = fmt::format("{}: comm {} hidden under GEMM {}", name, format_duration(c.comm_s),
                         format_duration(gemm));
    } else {
      line = fmt::format("{}: GEMM {} hidden under comm {}", name, format_duration(gemm),
                         format_duration(c.comm_s));
    }
    const Estimate* seq = nullptr;
    for (const Estimate& e : estimates)
      if (e.strategy.kind == StrategyKind::sequential) seq = &e;
    if (seq && c.total_s > 0)
      line += fmt::format(", {} over sequential", format_ratio(seq->total_s / c.total_s, 2));
  }
  for (const Estimate& e : estimates) {
    if (e.strategy.kind != StrategyKind::fuse_all2all || &e == &c || e.congested.empty()) continue;
    line += fmt::format("; all2all congests {}", e.congested.front());
    if (e.congested.size() > 1) line += fmt::format(" (+{} more)", e.congested.size() - 1);
  }
  return line;
}

Result<OperatorChoice> choose_strategy(const hardware::Profile& p, const workload::OperatorSpec& op,
                                       const schedule::CommPlan& plan, Breakdown breakdown) {
  Caches caches;
  return choose_strategy(p, op, plan, caches, breakdown);
}

Result<OperatorChoice> choose_strategy(const hardware::Profile& p, const workload::OperatorSpec& op,
                                       const schedule::CommPlan& plan, Caches& caches,
                                       Breakdown breakdown) {
  COMPASS_TRY(hardware::check_peak_flops(p, op.dtype));
  const detail::CheckedProfile checked(caches.tables().trees, p);
  OperatorChoice oc;
  oc.op = op;
  COMPASS_ASSIGN(oc.odp, optimise_decomposition(p, op, plan, caches));
  const std::vector<Strategy> strategies = {
      Strategy{StrategyKind::sequential, 0}, Strategy{StrategyKind::decompose, oc.odp.d_closed},
      Strategy{StrategyKind::fuse_all2all, 0}, Strategy{StrategyKind::fuse_ring, 0},
      Strategy{StrategyKind::fuse_double_ring, 0}, Strategy{StrategyKind::fuse_hier, 0},
      Strategy{StrategyKind::fuse_synth, 0}};
  for (const Strategy& s : strategies) {
    if (breakdown == Breakdown::all) {
      COMPASS_ASSIGN(Estimate e, estimate(p, op, s, plan, caches));
      oc.estimates.push_back(std::move(e));
    } else {
      Estimate e;
      e.strategy = s;
      // Sequential is decompose:1; the search above estimated every feasible degree under the
      // same knobs already.
      const double searched = s.kind == StrategyKind::sequential  ? oc.odp.exact_at(1)
                              : s.kind == StrategyKind::decompose ? oc.odp.exact_at(s.parts)
                                                                  : -1.0;
      if (searched >= 0) {
        e.total_s = searched;
      } else {
        COMPASS_ASSIGN(e.total_s, estimate_time_s(p, op, s, plan, ModelKnobs{}, caches));
      }
      if (s.kind == StrategyKind::fuse_all2all && breakdown == Breakdown::chosen) {
        COMPASS_ASSIGN(e.congested, all2all_congested_links(p, op, plan, caches));
      }
      oc.estimates.push_back(std::move(e));
    }
  }
  // A prediction that is not a finite, non-negative time is never printed: the profile's
  // numbers (validated one by one) combine into something this model cannot answer.
  for (const Estimate& e : oc.estimates)
    if (!std::isfinite(e.total_s) || e.total_s < 0)
      return make_error("{} under {}: the predicted time is not finite ({}); check the numbers "
                        "of profile '{}'",
                        workload::describe(op), schedule::to_string(e.strategy), e.total_s, p.name);
  oc.chosen = select_fastest(oc.estimates);
  if (breakdown == Breakdown::none) return oc;
  if (breakdown == Breakdown::chosen || breakdown == Breakdown::compute) {
    COMPASS_ASSIGN(oc.estimates[oc.chosen],
                   estimate_without_split(p, op, oc.estimates[oc.chosen].strategy, plan, caches,
                                          breakdown == Breakdown::chosen));
  }
  for (const Estimate& e : oc.estimates)
    for (double v : {e.total_s, e.compute_s, e.exposed_comm_s, e.overhead_s, e.interference_s,
                     e.comm_s})
      if (!std::isfinite(v))
        return make_error("{} under {}: a predicted time is not finite; check the numbers of "
                          "profile '{}'",
                          workload::describe(op), schedule::to_string(e.strategy), p.name);
  if (breakdown != Breakdown::compute) oc.reason = explain_choice(oc.estimates, oc.chosen);
  return oc;
}

}  // namespace compass::model
