// compass plan [--profile P] [--model M] [--tp N | --gpus LIST] [--seq S] [--mbs B] [--no-sp]
// [--refine sim [--refine-margin F] [--refine-candidates N]] [--json]:
// every TP operator of one layer (forward and backward) with all strategies' predictions and
// Compass's choice, and the end-to-end iteration estimate of Megatron-LM (all sequential),
// TransformerEngine's defaults and Compass side by side, with speedups. With --refine sim, the
// operators whose best candidates are predicted within the margin have those candidates
// simulated and keep the simulated fastest (study/refine.hpp); the report says what changed and
// what the simulation cost in planning time.

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/plan/report.hpp"
#include "compass/study/refine.hpp"

namespace compass::cli {

namespace {

struct PlanOptions {
  LayerPlanFlags layer;
  JsonOutput json;
  bool force = false;
  std::string refine = "none";
  study::RefineOptions refine_options;
  int refine_candidates = 3;
};

// What --refine sim did, operator by operator, and what it cost.
struct RefineReport {
  std::vector<std::pair<std::string, study::RefinedOp>> ops;  ///< role, result
  double planning_s = 0;        ///< the whole plan with the simulations
  double model_planning_s = 0;  ///< the same plan from the model alone
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_refine(const plan::LayerPlan& lp, const RefineReport& r,
                  const study::RefineOptions& o) {
  using compass::format_duration;
  int simulated = 0, changed = 0, candidates = 0;
  out("\nrefined by simulation (candidates predicted within {:.0f}% of the best, at most "
             "{})\n",
             100 * o.margin, o.max_candidates);
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const study::RefinedOp& ro = r.ops[i].second;
    if (ro.simulated.empty()) continue;
    ++simulated;
    candidates += static_cast<int>(ro.simulated.size());
    changed += ro.changed() ? 1 : 0;
    std::string sims;
    for (std::size_t k = 0; k < ro.simulated.size(); ++k)
      sims += fmt::format("{}{} {}", k ? ", " : "",
                          schedule::to_string(lp.ops[i].choice.estimates[ro.simulated[k]].strategy),
                          format_duration(ro.simulated_s[k]));
    out("  {:<11} {:<8} simulated {}\n", r.ops[i].first, ro.changed() ? "changed" : "kept",
               sims);
  }
  out("{} of {} operators had close candidates; {} simulated, {} choices changed; "
             "planning took {} ({} for the model alone)\n",
             simulated, r.ops.size(), candidates, changed, format_duration(r.planning_s),
             format_duration(r.model_planning_s));
}

nlohmann::json refine_json(const plan::LayerPlan& lp, const RefineReport& r,
                           const study::RefineOptions& o) {
  nlohmann::json ops = nlohmann::json::array();
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const study::RefinedOp& ro = r.ops[i].second;
    const model::OperatorChoice& c = lp.ops[i].choice;
    nlohmann::json sims = nlohmann::json::array();
    for (std::size_t k = 0; k < ro.simulated.size(); ++k)
      sims.push_back({{"strategy", schedule::to_string(c.estimates[ro.simulated[k]].strategy)},
                      {"predicted_s", c.estimates[ro.simulated[k]].total_s},
                      {"simulated_s", ro.simulated_s[k]}});
    ops.push_back({{"role", r.ops[i].first},
                   {"model_choice", schedule::to_string(c.estimates[ro.model_choice].strategy)},
                   {"choice", schedule::to_string(c.estimates[ro.refined_choice].strategy)},
                   {"simulated", sims}});
  }
  return {{"method", "sim"},
          {"margin", o.margin},
          {"max_candidates", o.max_candidates},
          {"operators", ops},
          {"planning_s", r.planning_s},
          {"model_planning_s", r.model_planning_s}};
}

void print_human(const plan::LayerPlan& lp) {
  using compass::format_duration;
  using schedule::StrategyKind;
  out("plan      {} on {}, tp {}, seq {}, micro-batch {}, sequence parallel {}\n",
             lp.model.name, lp.profile, lp.parallel.tp, lp.parallel.seq, lp.parallel.micro_batch,
             lp.parallel.sequence_parallel ? "on" : "off");
  std::string ring;
  for (int r : lp.plan.ring) ring += fmt::format("{} -> ", lp.plan.gpus[r]);
  if (!lp.plan.ring.empty()) ring += std::to_string(lp.plan.gpus[lp.plan.ring.front()]);
  out("ring      {}\n\n", ring);
  out(
      "{:<11} {:<4} {:<8} {:>6} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} "
      "{:>10}  {}\n",
      "role", "pass", "kind", "M", "N", "K", "sequential", "decomp:d*", "all2all", "ring",
      "dbl-ring", "hier", "synth", "te-default", "choice");
  for (const plan::PlannedOp& po : lp.ops) {
    const model::OperatorChoice& c = po.choice;
    const workload::OperatorSpec& op = c.op;
    out(
        "{:<11} {:<4} {:<8} {:>6} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} "
        "{:>10}  {}\n",
               op.role, po.layer_op.pass == workload::Pass::forward ? "fwd" : "bwd",
               workload::to_string(op.kind), op.m, op.n, op.k,
               format_duration(c.of(StrategyKind::sequential).total_s),
               fmt::format("{} d={}", format_duration(c.of(StrategyKind::decompose).total_s),
                           c.odp.d_closed),
               format_duration(c.of(StrategyKind::fuse_all2all).total_s),
               format_duration(c.of(StrategyKind::fuse_ring).total_s),
               format_duration(c.of(StrategyKind::fuse_double_ring).total_s),
               format_duration(c.of(StrategyKind::fuse_hier).total_s),
               format_duration(c.of(StrategyKind::fuse_synth).total_s),
               format_duration(po.te.total_s), schedule::to_string(c.choice().strategy));
  }
  out("\nreasons\n");
  for (const plan::PlannedOp& po : lp.ops)
    out("  {:<11} {}\n", po.choice.op.role, po.choice.reason);
  const plan::OtherWork& w = lp.other;
  out("\nper layer outside the TP operators: attention {} + {}, element-wise {} + {}, "
             "plain GEMMs {} + {} (fwd + bwd)\n",
             format_duration(w.attention_fwd_s), format_duration(w.attention_bwd_s),
             format_duration(w.elementwise_fwd_s), format_duration(w.elementwise_bwd_s),
             format_duration(w.plain_gemm_fwd_s), format_duration(w.plain_gemm_bwd_s));
  out("LM head (3 GEMMs): {}; {} layers\n\n", format_duration(lp.lm_head_s), lp.model.layers);
  out("{:<12} {:>12} {:>12} {:>14} {:>10}\n", "config", "TP ops/layer", "layer",
             "iteration", "speedup");
  const std::pair<const char*, const plan::IterationEstimate*> rows[] = {
      {"megatron", &lp.megatron}, {"te-default", &lp.te}, {"compass", &lp.compass}};
  for (const auto& [name, it] : rows)
    out("{:<12} {:>12} {:>12} {:>14} {:>10}\n", name, format_duration(it->tp_ops_s),
               format_duration(it->layer_s), format_duration(it->total_s),
               format_ratio(lp.megatron.total_s / it->total_s));
  out("\ncompass over megatron {}, over te-default {} (one micro-batch, "
             "forward + backward)\n",
             format_ratio(lp.megatron.total_s / lp.compass.total_s),
             format_ratio(lp.te.total_s / lp.compass.total_s));
  std::string left;
  for (const std::string& s : plan::LayerPlan::left_out()) left += (left.empty() ? "" : ", ") + s;
  out("left out: {}\n", left);
}

void run(const PlanOptions& o) {
  o.json.check_writable(o.force);
  if (o.refine != "none" && o.refine != "sim")
    throw UsageError(fmt::format("--refine: unknown method '{}' (expected none or sim)", o.refine));
  if (o.refine == "none") {
    const plan::LayerPlan lp = plan_from_flags(o.layer).plan;
    if (o.json.any()) o.json.emit(plan::to_json(lp), o.force);
    if (!o.json.to_stdout()) print_human(lp);
    return;
  }
  study::RefineOptions ro = o.refine_options;
  ro.max_candidates = static_cast<std::size_t>(std::max(0, o.refine_candidates));
  if (Status st = study::check(ro); !st.ok())
    throw UsageError(fmt::format("--refine: {}", st.error().message));
  RefineReport report;
  // The model alone first (the same plan without simulations), for the cost comparison.
  auto t0 = std::chrono::steady_clock::now();
  (void)plan_from_flags(o.layer);
  report.model_planning_s = seconds_since(t0);
  const hardware::Profile profile = load_profile(o.layer.profile);
  plan::ChoiceRefiner refiner = [&](model::OperatorChoice& c, const schedule::CommPlan& cp) {
    Result<study::RefinedOp> r = study::refine_choice(profile, c, cp, ro);
    if (!r.ok()) return Status(r.error());
    report.ops.emplace_back(c.op.role, r.value());
    return Status::success();
  };
  t0 = std::chrono::steady_clock::now();
  const plan::LayerPlan lp = plan_from_flags(o.layer, DType::bf16, refiner).plan;
  report.planning_s = seconds_since(t0);
  if (o.json.any()) {
    nlohmann::json j = plan::to_json(lp);
    j["refine"] = refine_json(lp, report, ro);
    o.json.emit(j, o.force);
  }
  if (!o.json.to_stdout()) {
    print_human(lp);
    print_refine(lp, report, ro);
  }
}

}  // namespace

void add_plan_verb(CLI::App& app) {
  auto opts = std::make_shared<PlanOptions>();
  auto* sub = app.add_subcommand(
      "plan", "Plan every TP operator of a model's layer and estimate a training iteration");
  add_layer_plan_flags(sub, opts->layer);
  opts->json.add_to(sub, "the plan");
  add_force_flag(sub, opts->force, "--json-out");
  sub->add_option("--refine", opts->refine,
                  "none, or sim: simulate the candidates predicted close to the best and keep "
                  "the simulated fastest")
      ->capture_default_str();
  sub->add_option("--refine-margin", opts->refine_options.margin,
                  "with --refine sim: simulate candidates predicted within this fraction of the "
                  "best")
      ->capture_default_str();
  add_integer_option(sub, "--refine-candidates", opts->refine_candidates,
                     "with --refine sim: simulate at most this many candidates per operator", 1)
      ->capture_default_str();
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
