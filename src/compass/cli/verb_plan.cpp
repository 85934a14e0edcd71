// compass plan [--profile P] [--model M] [--tp N | --gpus LIST] [--seq S] [--mbs B] [--no-sp] [--json]:
// every TP operator of one layer (forward and backward) with all strategies' predictions and
// Compass's choice, and the end-to-end iteration estimate of Megatron-LM (all sequential),
// TransformerEngine's defaults and Compass side by side, with speedups.

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/plan/report.hpp"

namespace compass::cli {

namespace {

struct PlanOptions {
  LayerPlanFlags layer;
  JsonOutput json;
  bool force = false;
};

void print_human(const plan::LayerPlan& lp) {
  using compass::format_duration;
  using schedule::StrategyKind;
  fmt::print("plan      {} on {}, tp {}, seq {}, micro-batch {}, sequence parallel {}\n",
             lp.model.name, lp.profile, lp.parallel.tp, lp.parallel.seq, lp.parallel.micro_batch,
             lp.parallel.sequence_parallel ? "on" : "off");
  std::string ring;
  for (int r : lp.plan.ring) ring += fmt::format("{} -> ", lp.plan.gpus[r]);
  if (!lp.plan.ring.empty()) ring += std::to_string(lp.plan.gpus[lp.plan.ring.front()]);
  fmt::print("ring      {}\n\n", ring);
  fmt::print(
      "{:<11} {:<4} {:<8} {:>6} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} "
      "{:>10}  {}\n",
      "role", "pass", "kind", "M", "N", "K", "sequential", "decomp:d*", "all2all", "ring",
      "dbl-ring", "hier", "synth", "te-default", "choice");
  for (const plan::PlannedOp& po : lp.ops) {
    const model::OperatorChoice& c = po.choice;
    const workload::OperatorSpec& op = c.op;
    fmt::print(
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
  fmt::print("\nreasons\n");
  for (const plan::PlannedOp& po : lp.ops)
    fmt::print("  {:<11} {}\n", po.choice.op.role, po.choice.reason);
  const plan::OtherWork& w = lp.other;
  fmt::print("\nper layer outside the TP operators: attention {} + {}, element-wise {} + {}, "
             "plain GEMMs {} + {} (fwd + bwd)\n",
             format_duration(w.attention_fwd_s), format_duration(w.attention_bwd_s),
             format_duration(w.elementwise_fwd_s), format_duration(w.elementwise_bwd_s),
             format_duration(w.plain_gemm_fwd_s), format_duration(w.plain_gemm_bwd_s));
  fmt::print("LM head (3 GEMMs): {}; {} layers\n\n", format_duration(lp.lm_head_s), lp.model.layers);
  fmt::print("{:<12} {:>12} {:>12} {:>14} {:>10}\n", "config", "TP ops/layer", "layer",
             "iteration", "speedup");
  const std::pair<const char*, const plan::IterationEstimate*> rows[] = {
      {"megatron", &lp.megatron}, {"te-default", &lp.te}, {"compass", &lp.compass}};
  for (const auto& [name, it] : rows)
    fmt::print("{:<12} {:>12} {:>12} {:>14} {:>10}\n", name, format_duration(it->tp_ops_s),
               format_duration(it->layer_s), format_duration(it->total_s),
               format_ratio(lp.megatron.total_s / it->total_s));
  fmt::print("\ncompass over megatron {}, over te-default {} (one micro-batch, "
             "forward + backward)\n",
             format_ratio(lp.megatron.total_s / lp.compass.total_s),
             format_ratio(lp.te.total_s / lp.compass.total_s));
  std::string left;
  for (const std::string& s : plan::LayerPlan::left_out()) left += (left.empty() ? "" : ", ") + s;
  fmt::print("left out: {}\n", left);
}

void run(const PlanOptions& o) {
  o.json.check_writable(o.force);
  const plan::LayerPlan lp = plan_from_flags(o.layer).plan;
  if (o.json.any()) o.json.emit(plan::to_json(lp), o.force);
  if (!o.json.to_stdout()) print_human(lp);
}

}  // namespace

void add_plan_verb(CLI::App& app) {
  auto opts = std::make_shared<PlanOptions>();
  auto* sub = app.add_subcommand(
      "plan", "Plan every TP operator of a model's layer and estimate a training iteration");
  add_layer_plan_flags(sub, opts->layer);
  opts->json.add_to(sub, "the plan");
  add_force_flag(sub, opts->force, "--json-out");
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
