#include "compass/plan/report.hpp"

#include <fmt/format.h>

namespace compass::plan {

using schedule::StrategyKind;

nlohmann::json to_json(const model::Estimate& e) {
  return {{"strategy", schedule::to_string(e.strategy)},
          {"total_s", e.total_s},
          {"compute_s", e.compute_s},
          {"exposed_comm_s", e.exposed_comm_s},
          {"overhead_s", e.overhead_s},
          {"interference_s", e.interference_s},
          {"comm_s", e.comm_s},
          {"bottleneck", e.bottleneck},
          {"congested", e.congested}};
}

nlohmann::json to_json(const model::OdpResult& r) {
  nlohmann::json per = nlohmann::json::array();
  for (std::size_t i = 0; i < r.feasible.size(); ++i)
    per.push_back({{"d", r.feasible[i]}, {"estimate_s", r.exact_s[i]}, {"formula_s", r.formula_s[i]}});
  return {{"a_s", r.coef.a_s},         {"b_s", r.coef.b_s},
          {"c_s", r.coef.c_s},         {"comm_bound", r.coef.comm_bound},
          {"d_continuous", r.d_continuous}, {"d_closed", r.d_closed},
          {"d_argmin", r.d_argmin},    {"t_closed_s", r.t_closed_s},
          {"t_argmin_s", r.t_argmin_s}, {"gap", r.gap()},
          {"degrees", per}};
}

namespace {
nlohmann::json op_json(const workload::OperatorSpec& op) {
  return {{"kind", workload::to_string(op.kind)}, {"m", op.m}, {"n", op.n}, {"k", op.k},
          {"tp", op.tp}, {"dtype", to_string(op.dtype)}, {"role", op.role}};
}
nlohmann::json iter_json(const IterationEstimate& it) {
  return {{"tp_ops_s", it.tp_ops_s}, {"layer_s", it.layer_s}, {"total_s", it.total_s}};
}
}  // namespace

nlohmann::json to_json(const model::OperatorChoice& c) {
  nlohmann::json es = nlohmann::json::array();
  for (const model::Estimate& e : c.estimates) es.push_back(to_json(e));
  return {{"op", op_json(c.op)},
          {"estimates", es},
          {"odp", to_json(c.odp)},
          {"choice", schedule::to_string(c.choice().strategy)},
          {"reason", c.reason}};
}

nlohmann::json to_json(const LayerPlan& lp) {
  nlohmann::json ops = nlohmann::json::array();
  for (const PlannedOp& po : lp.ops) {
    nlohmann::json j = to_json(po.choice);
    j["pass"] = po.layer_op.pass == workload::Pass::forward ? "forward" : "backward";
    j["megatron"] = to_json(po.megatron);
    j["te_default"] = to_json(po.te);
    ops.push_back(std::move(j));
  }
  return {{"profile", lp.profile},
          {"model", lp.model.name},
          {"tp", lp.parallel.tp},
          {"seq", lp.parallel.seq},
          {"micro_batch", lp.parallel.micro_batch},
          {"sequence_parallel", lp.parallel.sequence_parallel},
          {"ring", lp.plan.ring},
          {"ring2", lp.plan.ring2},
          {"ops", ops},
          {"other",
           {{"attention_fwd_s", lp.other.attention_fwd_s},
            {"attention_bwd_s", lp.other.attention_bwd_s},
            {"elementwise_fwd_s", lp.other.elementwise_fwd_s},
            {"elementwise_bwd_s", lp.other.elementwise_bwd_s},
            {"plain_gemm_fwd_s", lp.other.plain_gemm_fwd_s},
            {"plain_gemm_bwd_s", lp.other.plain_gemm_bwd_s}}},
          {"lm_head_s", lp.lm_head_s},
          {"layers", lp.model.layers},
          {"iteration",
           {{"megatron", iter_json(lp.megatron)},
            {"te_default", iter_json(lp.te)},
            {"compass", iter_json(lp.compass)}}},
          {"speedup",
           {{"compass_over_megatron", lp.megatron.total_s / lp.compass.total_s},
            {"compass_over_te_default", lp.te.total_s / lp.compass.total_s},
            {"te_default_over_megatron", lp.megatron.total_s / lp.te.total_s}}},
          {"left_out", LayerPlan::left_out()}};
}

namespace {
nlohmann::json dist_json(const Distribution& d) {
  return {{"count", d.count}, {"min", d.min}, {"median", d.median}, {"mean", d.mean}, {"max", d.max}};
}
}  // namespace

nlohmann::json to_json(const SweepSummary& s) {
  return {{"wins", s.wins},
          {"double_ring_over_all2all", dist_json(s.double_ring_over_all2all)},
          {"trees_over_double_ring", dist_json(s.trees_over_double_ring)},
          {"trees_over_all2all", dist_json(s.trees_over_all2all)},
          {"dstar_over_d4", dist_json(s.dstar_over_d4)},
          {"dstar_over_worst_d", dist_json(s.dstar_over_worst_d)},
          {"choice_over_sequential", dist_json(s.choice_over_sequential)},
          {"odp_gap", dist_json(s.odp_gap)},
          {"all2all_slower_than_sequential", s.all2all_slower_than_sequential},
          {"closed_form_is_argmin", s.closed_form_is_argmin}};
}

nlohmann::json to_json(const SweepResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const SweepRow& row : r.rows) {
    const model::OperatorChoice& c = row.choice;
    nlohmann::json t;
    for (const model::Estimate& e : c.estimates) {
      const std::string name =
          e.strategy.kind == StrategyKind::decompose ? "decompose:d*" : schedule::to_string(e.strategy);
      t[name] = e.total_s;
    }
    t["decompose:4"] = row.decompose4_s > 0 ? nlohmann::json(row.decompose4_s) : nlohmann::json();
    t["decompose:worst"] = row.worst_d_s;
    rows.push_back({{"model", row.entry.model},
                    {"layer", row.entry.layer},
                    {"op", op_json(c.op)},
                    {"times_s", t},
                    {"d_closed", c.odp.d_closed},
                    {"d_argmin", c.odp.d_argmin},
                    {"worst_d", row.worst_d},
                    {"choice", schedule::to_string(c.choice().strategy)},
                    {"reason", c.reason}});
  }
  return {{"profile", r.profile}, {"rows", rows}, {"summary", to_json(r.summary)}};
}

std::string sweep_csv(const SweepResult& r) {
  std::string out =
      "model,layer,kind,m,n,k,tp,sequential_s,decompose_dstar_s,d_closed,d_argmin,decompose4_s,"
      "worst_d,worst_d_s,fuse_all2all_s,fuse_ring_s,fuse_double_ring_s,choice\n";
  for (const SweepRow& row : r.rows) {
    const model::OperatorChoice& c = row.choice;
    const workload::OperatorSpec& op = c.op;
    out += fmt::format("{},{},{},{},{},{},{},{:.9g},{:.9g},{},{},{:.9g},{},{:.9g},{:.9g},{:.9g},{:.9g},{}\n",
                       row.entry.model, row.entry.layer, workload::to_string(op.kind), op.m, op.n,
                       op.k, op.tp, c.of(StrategyKind::sequential).total_s,
                       c.of(StrategyKind::decompose).total_s, c.odp.d_closed, c.odp.d_argmin,
                       row.decompose4_s, row.worst_d, row.worst_d_s,
                       c.of(StrategyKind::fuse_all2all).total_s, c.of(StrategyKind::fuse_ring).total_s,
                       c.of(StrategyKind::fuse_double_ring).total_s,
                       schedule::to_string(c.choice().strategy));
  }
  return out;
}

}  // namespace compass::plan
