#include "compass/model/odp.hpp"

#include <algorithm>
#include <cmath>

#include "compass/model/estimate.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::model {

double odp_time_s(const OdpCoefficients& c, double d) { return c.a_s * d + c.b_s + c.c_s / d; }

std::vector<int> feasible_degrees(std::int64_t rows, std::int64_t min_rows, int max_parts) {
  std::vector<int> out{1};
  for (int d = 2; d <= max_parts; ++d)
    if (rows % d == 0 && rows / d >= min_rows) out.push_back(d);
  return out;
}

int closed_form_degree(const OdpCoefficients& c, const std::vector<int>& feasible) {
  COMPASS_CHECK(!feasible.empty(), "closed_form_degree: no feasible degree");
  if (c.a_s <= 0) return feasible.back();  // parts cost nothing: as many as allowed
  const double star = std::sqrt(std::max(0.0, c.c_s) / c.a_s);
  // T(d) is convex in d, so the best feasible degree is one of the two around d*.
  int below = feasible.front(), above = feasible.back();
  for (int d : feasible) {
    if (d <= star) below = d;
    if (d >= star) {
      above = d;
      break;
    }
  }
  return odp_time_s(c, above) < odp_time_s(c, below) ? above : below;
}

double OdpResult::exact_at(int d) const {
  for (std::size_t i = 0; i < feasible.size(); ++i)
    if (feasible[i] == d) return exact_s[i];
  return -1;
}

Result<OdpResult> optimise_decomposition(const hardware::Profile& p,
                                         const workload::OperatorSpec& op,
                                         const schedule::CommPlan& plan, Caches& caches) {
  // Checks the inputs; its answer is the loop's at d = 1.
  COMPASS_ASSIGN(const double one_part_s,
                 estimate_time_s(p, op, schedule::Strategy{schedule::StrategyKind::decompose, 1},
                                 plan, ModelKnobs{}, caches));
  OdpResult r;
  r.feasible = feasible_degrees(workload::rows_per_rank(op));
  // Only degrees the generator can build (gemm_ar splits all M rows, but its schedule splits
  // each rank's M/tp rows).
  std::erase_if(r.feasible, [&](int d) { return !schedule::check_decompose(op, d).ok(); });
  const int dmax = r.feasible.back();
  const DecomposeParts one = decompose_parts(p, op, 1, plan, caches);
  const DecomposeParts many = decompose_parts(p, op, dmax, plan, caches);
  // Per stream: t(d) ~ a + T/d. The secant of d*t(d) between 1 and dmax gives a (fixed cost per
  // part, including the efficiency a smaller GEMM loses); with one feasible degree, a is the
  // launch cost alone.
  auto fit = [&](double t1, double tmax, double launch) {
    double a = launch;
    if (dmax > 1) a = (dmax * tmax - t1) / (dmax - 1);
    a = std::clamp(a, 0.0, t1);
    return std::pair<double, double>{a, t1 - a};
  };
  const auto [a_c, tc] =
      fit(one.comm_part_s, many.comm_part_s, op.tp > 1 ? p.overheads.collective_launch_s : 0.0);
  const auto [a_g, tg] = fit(one.gemm_part_s, many.gemm_part_s, p.overheads.kernel_launch_s);
  const double fc = one.comm_slowdown, fg = one.gemm_slowdown;
  // In steady state the longer stream runs beside the shorter one and is slowed by it; the
  // first part of one stream and the last of the other (the fill and drain) run alone.
  OdpCoefficients& k = r.coef;
  k.comm_bound = fc * (a_c + tc) >= fg * (a_g + tg);
  if (k.comm_bound) {
    k.a_s = fc * a_c;
    k.b_s = fc * tc + a_g;
    k.c_s = tg;
  } else {
    k.a_s = fg * a_g;
    k.b_s = fg * tg + a_c;
    k.c_s = tc;
  }
  r.d_continuous = k.a_s > 0 ? std::sqrt(k.c_s / k.a_s) : static_cast<double>(dmax);
  r.d_closed = closed_form_degree(k, r.feasible);
  double best = 0;
  for (int d : r.feasible) {
    const Result<double> t =
        d == 1 ? Result<double>(one_part_s)
               : estimate_time_s(p, op, schedule::Strategy{schedule::StrategyKind::decompose, d},
                                 plan, ModelKnobs{}, caches);
    COMPASS_CHECK(t.ok(), "feasible degree {} rejected: {}", d, t.ok() ? "" : t.error().message);
    r.exact_s.push_back(*t);
    r.formula_s.push_back(odp_time_s(k, d));
    if (r.exact_s.size() == 1 || *t < best) {
      best = *t;
      r.d_argmin = d;
    }
  }
  r.t_argmin_s = best;
  r.t_closed_s = r.exact_at(r.d_closed);
  return r;
}

}  // namespace compass::model
