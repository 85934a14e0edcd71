// compass op --profile P --op K --m M --n N --k K --tp P [--dtype bf16] [--gpus ..] [--json]:
// every strategy's predicted time with its breakdown, the decomposition model (A, B, C, d* in
// closed form and the exact argmin), and the selector's choice with its one-line reason.

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/model/selector.hpp"
#include "compass/plan/report.hpp"

namespace compass::cli {

namespace {

struct OpOptions {
  std::string profile = "a6000x8";
  std::string op;
  std::int64_t m = 0, n = 0, k = 0;
  int tp = 0;
  std::string dtype = "bf16";
  std::string gpus;
  JsonOutput json;
  bool force = false;
};

std::string ring_text(const std::vector<int>& ring, const std::vector<int>& gpus) {
  std::string s;
  for (int r : ring) s += fmt::format("{} -> ", gpus[r]);
  return ring.empty() ? s : s + std::to_string(gpus[ring.front()]);
}

void print_human(const model::OperatorChoice& c, const schedule::CommPlan& plan,
                 const std::string& profile) {
  using compass::format_duration;
  out("operator  {} on {}\n", workload::describe(c.op), profile);
  out("ring      {}\n", ring_text(plan.ring, plan.gpus));
  out("ring2     {}\n\n", ring_text(plan.ring2, plan.gpus));
  out("{:<18} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}\n", "strategy", "total",
             "compute", "exposed", "overhead", "interf.", "comm", "bottleneck");
  for (std::size_t i = 0; i < c.estimates.size(); ++i) {
    const model::Estimate& e = c.estimates[i];
    out("{:<18} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  {}{}\n",
               schedule::to_string(e.strategy) + (i == c.chosen ? " *" : ""),
               format_duration(e.total_s), format_duration(e.compute_s),
               format_duration(e.exposed_comm_s), format_duration(e.overhead_s),
               format_duration(e.interference_s), format_duration(e.comm_s),
               e.bottleneck.empty() ? "-" : e.bottleneck,
               e.congested.empty() ? "" : fmt::format(" ({} congested)", e.congested.size()));
  }
  const model::OdpResult& o = c.odp;
  out("\ndecomposition model T(d) = A*d + B + C/d ({}-bound)\n",
             o.coef.comm_bound ? "communication" : "compute");
  out("  A = {}  B = {}  C = {}  sqrt(C/A) = {:.2f}\n", format_duration(o.coef.a_s),
             format_duration(o.coef.b_s), format_duration(o.coef.c_s), o.d_continuous);
  out("  {:>4} {:>10} {:>10}\n", "d", "T(d)", "estimate");
  for (std::size_t i = 0; i < o.feasible.size(); ++i)
    out("  {:>4} {:>10} {:>10}{}{}\n", o.feasible[i], format_duration(o.formula_s[i]),
               format_duration(o.exact_s[i]), o.feasible[i] == o.d_closed ? "  <- d* (closed form)" : "",
               o.feasible[i] == o.d_argmin ? "  <- argmin" : "");
  out("  d* = {} ({}), argmin d = {} ({}), gap {:.1f}%\n\n", o.d_closed,
             format_duration(o.t_closed_s), o.d_argmin, format_duration(o.t_argmin_s),
             100.0 * o.gap());
  out("choice    {}\n", c.reason);
}

void run(const OpOptions& o) {
  o.json.check_writable(o.force);
  const hardware::Profile profile = load_profile(o.profile);
  const workload::OperatorSpec op = operator_from_flags(o.op, o.m, o.n, o.k, o.tp, o.dtype);
  const std::vector<int> group = select_group(profile, o.tp, o.gpus);
  unwrap(workload::validate(op));
  const schedule::CommPlan plan = unwrap(schedule::comm_plan_for(profile, group));
  const model::OperatorChoice c = unwrap(model::choose_strategy(profile, op, plan));
  if (o.json.any()) {
    nlohmann::json j = plan::to_json(c);
    j["profile"] = profile.name;
    j["gpus"] = plan.gpus;
    j["ring"] = plan.ring;
    j["ring2"] = plan.ring2;
    o.json.emit(j, o.force);
  }
  if (!o.json.to_stdout()) print_human(c, plan, profile.name);
}

}  // namespace

void add_op_verb(CLI::App& app) {
  auto opts = std::make_shared<OpOptions>();
  auto* sub = app.add_subcommand(
      "op", "Predict every strategy for one TP operator and choose the fastest");
  sub->add_option("--profile", opts->profile, "Preset name or profile JSON file")
      ->capture_default_str();
  sub->add_option("--op", opts->op, "ag_gemm, gemm_rs or gemm_ar")->required();
  add_integer_option(sub, "--m", opts->m, "Tokens M (global)", 1)->required();
  add_integer_option(sub, "--n", opts->n, "Output features N (global)", 1)->required();
  add_integer_option(sub, "--k", opts->k, "Input features K (global)", 1)->required();
  sub->add_option("--tp", opts->tp, "Tensor-parallel degree")->transform(positive_tp())->required();
  sub->add_option("--dtype", opts->dtype, "Element type")->capture_default_str();
  sub->add_option("--gpus", opts->gpus, "GPU ordinals of the TP group (default 0..tp-1)")
      ->check(nonempty_gpus());
  opts->json.add_to(sub, "every strategy's prediction and the choice");
  add_force_flag(sub, opts->force, "--json-out");
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
