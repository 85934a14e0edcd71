#include "compass/study/validation.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "compass/backends/cpu/executor.hpp"
#include "compass/backends/cpu/operator_data.hpp"
#include "compass/backends/cpu/paced_links.hpp"
#include "compass/model/estimate.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/model/odp.hpp"
#include "compass/model/selector.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/study/accuracy.hpp"
#include "compass/workload/layer_ops.hpp"

namespace compass::study {

namespace cpu = backends::cpu;

namespace {

std::vector<int> first_gpus(int tp) {
  std::vector<int> g(static_cast<std::size_t>(tp));
  for (int i = 0; i < tp; ++i) g[static_cast<std::size_t>(i)] = i;
  return g;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string kind_name(const schedule::Strategy& s) {
  return s.kind == schedule::StrategyKind::decompose ? "decompose:d" : schedule::to_string(s);
}

}  // namespace

Result<std::vector<GridConfig>> validation_grid(const std::string& name, int tp) {
  std::vector<GridConfig> out;
  auto make = [&](workload::OpKind kind, std::int64_t m, std::int64_t n, std::int64_t k) {
    workload::OperatorSpec op;
    op.kind = kind;
    op.m = m;
    op.n = n;
    op.k = k;
    op.tp = tp;
    op.dtype = DType::fp32;
    return op;
  };
  if (name == "small") {
    using workload::OpKind;
    for (auto [kind, m, n, k] :
         {std::tuple{OpKind::ag_gemm, 256, 256, 128}, std::tuple{OpKind::gemm_rs, 256, 128, 256},
          std::tuple{OpKind::ag_gemm, 512, 384, 256}, std::tuple{OpKind::gemm_rs, 512, 256, 384}}) {
      const auto op = make(kind, m, n, k);
      out.push_back({fmt::format("{} M={} N={} K={}", workload::to_string(kind), m, n, k), op});
    }
    return out;
  }
  if (name == "paper-scaled") {
    for (const auto& e : workload::paper_grid()) {
      if (e.op.tp != 2) continue;
      if (e.op.m % kGridScaleM || e.op.n % kGridScaleNK || e.op.k % kGridScaleNK)
        return make_error("grid: {} {} does not scale evenly", e.model, e.layer);
      const auto op =
          make(e.op.kind, e.op.m / kGridScaleM, e.op.n / kGridScaleNK, e.op.k / kGridScaleNK);
      out.push_back({fmt::format("{} {} M={}", e.model, e.layer, op.m), op});
    }
    return out;
  }
  return make_error("--grid: unknown grid '{}' (expected small or paper-scaled)", name);
}

std::vector<cpu::GemmShape> grid_gemm_shapes(const std::vector<GridConfig>& grid,
                                             const hardware::Profile& topology) {
  std::set<cpu::GemmShape> shapes;
  for (const auto& c : grid) {
    auto plan = schedule::comm_plan_for(topology, first_gpus(c.op.tp));
    if (!plan.ok()) continue;
    std::vector<schedule::Strategy> strategies = schedule::all_strategies(1);
    // The planner never picks parts below model::kMinRowsPerPart rows.
    for (int d = 2; d <= model::kMaxParts; ++d)
      if (workload::rows_per_rank(c.op) % d == 0 &&
          workload::rows_per_rank(c.op) / d >= model::kMinRowsPerPart)
        strategies.push_back({schedule::StrategyKind::decompose, d});
    for (const auto& st : strategies) {
      auto s = schedule::generate_for(topology, c.op, st, *plan);
      if (!s.ok()) continue;
      for (const auto& g : cpu::gemm_shapes(*s)) shapes.insert(g);
    }
  }
  return {shapes.begin(), shapes.end()};
}

hardware::Profile emulated_profile(const hardware::Profile& topology,
                                   const hardware::Profile& calibrated, double link_scale) {
  hardware::Profile p = cpu::scale_links(topology, link_scale);
  // Every GPU of the topology becomes "a rank of this CPU": same spec for all.
  const hardware::DeviceSpec cpu_spec =
      calibrated.devices.empty() ? hardware::DeviceSpec{} : calibrated.devices.front();
  for (auto& d : p.devices) {
    const std::string name = d.name;
    d = cpu_spec;
    d.name = name;
  }
  p.overheads = calibrated.overheads;
  p.interference = calibrated.interference;
  p.calibration = calibrated.calibration;
  p.name =
      fmt::format("{} (emulated, links x{:.4g}) + {}", topology.name, link_scale, calibrated.name);
  return p;
}

double auto_link_scale(const std::vector<GridConfig>& grid, const hardware::Profile& topology,
                       const hardware::Profile& calibrated) {
  double log_sum = 0;
  int n = 0;
  for (const auto& c : grid) {
    const std::int64_t nn = c.op.kind == workload::OpKind::ag_gemm ? c.op.n / c.op.tp : c.op.n;
    const std::int64_t kk = c.op.kind == workload::OpKind::ag_gemm ? c.op.k : c.op.k / c.op.tp;
    const std::int64_t mm =
        workload::rows_per_rank(c.op) * (c.op.kind == workload::OpKind::ag_gemm ? c.op.tp : 1);
    const double gpu = hardware::gemm_time_s(topology, mm, nn, kk, DType::bf16);
    const double cpu_t = hardware::gemm_time_s(calibrated, mm, nn, kk, DType::fp32);
    if (gpu > 0 && cpu_t > 0) {
      log_sum += std::log(2.0 * gpu / cpu_t);
      ++n;
    }
  }
  return n ? std::exp(log_sum / n) : 1.0;
}

Result<ValidateResult> run_validation(const std::vector<GridConfig>& grid,
                                      const hardware::Profile& topology,
                                      const hardware::Profile& predicted,
                                      const ValidateOptions& o) {
  ValidateResult res;
  res.link_scale = o.link_scale;
  std::vector<ConfigTimes> times;
  double log_speedup = 0;
  std::size_t done = 0;
  model::Caches caches;  // the grid's configurations share patterns
  for (const auto& cfg : grid) {
    const std::vector<int> gpus = first_gpus(cfg.op.tp);
    COMPASS_ASSIGN(schedule::CommPlan plan, schedule::comm_plan_for(predicted, gpus));
    COMPASS_ASSIGN(model::OperatorChoice choice, model::choose_strategy(predicted, cfg.op, plan, caches));
    COMPASS_ASSIGN(cpu::OperatorData data, cpu::make_operator_data(cfg.op, 1));
    COMPASS_ASSIGN(cpu::HostMatrix<double> reference, cpu::reference_output(data));
    // Every strategy first gets its schedule, engine and workspace; then the runs go round
    // robin (one run of each strategy per round), so a burst of load from other processes on
    // this shared machine lands on all strategies alike instead of on one.
    struct Candidate {
      std::size_t estimate = 0;
      schedule::Schedule schedule;
      cpu::ExecutorOptions options;
      std::optional<cpu::Workspace> ws;
      std::vector<double> times;
    };
    std::vector<Candidate> cands;
    for (std::size_t i = 0; i < choice.estimates.size(); ++i) {
      auto s = schedule::generate_for(predicted, cfg.op, choice.estimates[i].strategy, plan);
      if (!s.ok()) continue;  // e.g. decompose parts the shape cannot take
      Candidate c;
      c.estimate = i;
      c.schedule = std::move(s).value();
      COMPASS_ASSIGN(auto engine,
                     cpu::PacedLinkEngine::create(topology, c.schedule.gpus, o.link_scale));
      c.options.transfer_engine = engine;
      COMPASS_ASSIGN(cpu::Workspace ws, cpu::Workspace::create(c.schedule, data, c.options));
      c.ws.emplace(std::move(ws));
      cands.push_back(std::move(c));
    }
    for (int r = 0; r < o.warmup + o.repeat; ++r)
      for (Candidate& c : cands) {
        c.ws->reset(data);
        auto st = cpu::run(c.schedule, *c.ws, c.options);
        if (!st.ok())
          return make_error("{} {}: {}", cfg.label, schedule::to_string(c.schedule.strategy),
                            st.error().message);
        if (r >= o.warmup) c.times.push_back(st->wall_s);
        if (r == 0) {
          const cpu::ErrorStats err = cpu::compare_outputs(c.schedule, *c.ws, reference);
          if (!(err.max_rel_error <= cpu::kCheckTolerance)) res.outputs_ok = false;
        }
      }
    const std::size_t first = res.points.size();
    for (const Candidate& c : cands) {
      const model::Estimate& e = choice.estimates[c.estimate];
      ValidatePoint pt;
      pt.config = cfg.label;
      pt.op = cfg.op;
      pt.strategy = e.strategy;
      pt.predicted_s = e.total_s;
      pt.measured_s =
          o.use_min ? *std::min_element(c.times.begin(), c.times.end()) : median(c.times);
      pt.chosen = c.estimate == choice.chosen;
      res.points.push_back(pt);
    }
    if (res.points.size() == first) return make_error("{}: no strategy could run", cfg.label);
    ValidateConfig vc;
    vc.config = cfg.label;
    vc.op = cfg.op;
    ConfigTimes ct;
    bool have_chosen = false;
    for (std::size_t i = first; i < res.points.size(); ++i) {
      const ValidatePoint& p = res.points[i];
      ct.strategies.push_back(kind_name(p.strategy));
      ct.predicted_s.push_back(p.predicted_s);
      ct.reference_s.push_back(p.measured_s);
      if (p.chosen) {
        ct.chosen = i - first;
        have_chosen = true;
      }
      if (p.strategy.kind == schedule::StrategyKind::sequential) vc.sequential_s = p.measured_s;
    }
    if (!have_chosen)
      return make_error("{}: the planner's choice {} could not run", cfg.label,
                        schedule::to_string(choice.choice().strategy));
    const std::size_t best = first + fastest(ct.reference_s);
    const std::size_t chosen = first + ct.chosen;
    res.points[best].best = true;
    vc.chosen = schedule::to_string(res.points[chosen].strategy);
    vc.best = schedule::to_string(res.points[best].strategy);
    vc.chosen_s = res.points[chosen].measured_s;
    vc.best_s = res.points[best].measured_s;
    vc.regret = regret(ct);
    if (vc.sequential_s > 0) log_speedup += std::log(vc.sequential_s / vc.chosen_s);
    times.push_back(std::move(ct));
    res.configs.push_back(vc);
    ++done;
    if (o.progress) o.progress(static_cast<double>(done) / static_cast<double>(grid.size()));
  }
  const Accuracy acc = accuracy(times);
  const double nc = static_cast<double>(res.configs.size());
  if (nc > 0) {
    res.choice_best = acc.choice_is_best / nc;
    res.choice_within5 = choice_within(acc, kNearBest) / nc;
    res.mean_regret = acc.mean_regret;
    res.worst_regret = acc.worst_regret.value;
    res.mean_speedup = std::exp(log_speedup / nc);
  }
  res.mape = acc.mape;
  for (const StrategyError& e : acc.by_strategy) res.mape_by_strategy.push_back({e.strategy, e.mape});
  // By strategy name, as the reports list them.
  std::sort(res.mape_by_strategy.begin(), res.mape_by_strategy.end());
  return res;
}

}  // namespace compass::study
