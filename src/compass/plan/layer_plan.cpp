#include "compass/plan/layer_plan.hpp"
#include "compass/plan/te_model.hpp"

#include <cmath>

#include <algorithm>
#include <numeric>
#include <set>

#include "compass/hardware/gemm_cost.hpp"

namespace compass::plan {

using schedule::Strategy;
using schedule::StrategyKind;

std::string_view to_string(Config c) {
  switch (c) {
    case Config::megatron: return "megatron";
    case Config::te_default: return "te-default";
    case Config::compass: return "compass";
  }
  return "?";
}

Strategy te_default_strategy(const workload::OperatorSpec& op) {
  // Megatron-LM refuses --tp-comm-overlap without sequence parallelism: a GEMM + all-reduce
  // never reaches TE's userbuffers.
  if (op.kind == workload::OpKind::gemm_ar) return Strategy{StrategyKind::sequential, 0};
  const std::string& r = op.role;
  if (r == "qkv_fprop" || r == "fc1_fprop" || r == "proj_dgrad" || r == "fc2_dgrad")
    return Strategy{StrategyKind::fuse_ring, 0};
  if (r == "proj_fprop" || r == "fc2_fprop") {
    const std::int64_t rows = workload::rows_per_rank(op);
    for (int d = 4; d >= 2; --d)
      if (rows % d == 0) return Strategy{StrategyKind::decompose, d};
  }
  return Strategy{StrategyKind::sequential, 0};
}

schedule::CommPlan rank_order_plan(const schedule::CommPlan& topo) {
  schedule::CommPlan te = topo;
  const int p = static_cast<int>(topo.gpus.size());
  te.ring.resize(p);
  std::iota(te.ring.begin(), te.ring.end(), 0);
  te.ring2.assign(te.ring.rbegin(), te.ring.rend());
  return te;
}

std::vector<std::string> LayerPlan::left_out() {
  return {"optimizer step", "data-parallel gradient communication", "pipeline bubbles",
          "embedding lookup and loss", "activation recomputation", "LM-head collectives",
          "dropout and RoPE kernels"};
}

namespace {

// The twelve GEMMs of a layer per rank (forward, data gradient, weight gradient of QKV, proj,
// FC1, FC2), as (role, pass, m, n, k) with the TP split applied.
struct LayerGemm {
  std::string role;
  workload::Pass pass;
  std::int64_t m, n, k;
};

std::vector<LayerGemm> layer_gemms(const workload::ModelConfig& mc, std::int64_t tokens, int tp) {
  using workload::Pass;
  const std::int64_t h = mc.hidden, f = mc.ffn, qkv = mc.qkv_out(), fc1 = mc.fc1_out();
  const std::int64_t t = tokens;
  return {
      {"qkv_fprop", Pass::forward, t, qkv / tp, h},   {"proj_fprop", Pass::forward, t, h, h / tp},
      {"fc1_fprop", Pass::forward, t, fc1 / tp, h},   {"fc2_fprop", Pass::forward, t, h, f / tp},
      {"qkv_dgrad", Pass::backward, t, h, qkv / tp},  {"proj_dgrad", Pass::backward, t, h / tp, h},
      {"fc1_dgrad", Pass::backward, t, h, fc1 / tp},  {"fc2_dgrad", Pass::backward, t, f / tp, h},
      {"qkv_wgrad", Pass::backward, qkv / tp, h, t},  {"proj_wgrad", Pass::backward, h, h / tp, t},
      {"fc1_wgrad", Pass::backward, fc1 / tp, h, t},  {"fc2_wgrad", Pass::backward, h, f / tp, t},
  };
}

OtherWork other_work(const hardware::Profile& p, const workload::ModelConfig& mc,
                     const workload::ParallelConfig& pc, const std::set<std::string>& tp_roles) {
  OtherWork w;
  const int tp = pc.tp;
  const std::int64_t tokens = pc.seq * pc.micro_batch;
  const double e = dtype_bytes(pc.dtype);
  const hardware::DeviceSpec& dev = p.gpu_device(0);
  const double launch = p.overheads.kernel_launch_s;
  // FlashAttention (causal: half of the score matrix), heads split across ranks; with context
  // parallelism the rank's queries meet the keys of the whole sequence (Megatron-LM balances
  // the causal work over the ranks, so each does 1/cp of it).
  const double heads_per_rank = static_cast<double>(mc.heads) / tp;
  const double attn_fwd_flops = 0.5 * 4.0 * static_cast<double>(pc.micro_batch) * pc.seq *
                                static_cast<double>(pc.seq) * pc.cp * mc.head_dim() *
                                heads_per_rank;
  // Attention runs in BF16 in an FP8 run too (TransformerEngine's FP8 recipes keep the
  // dot-product attention in BF16 unless asked otherwise).
  const DType attn_dtype = pc.dtype == DType::fp8 ? DType::bf16 : pc.dtype;
  const double attn_rate = hardware::peak_flops(p, attn_dtype) *
                           hardware::large_gemm_efficiency(p) * kAttentionEfficiencyRatio;
  w.attention_fwd_s = attn_fwd_flops / attn_rate + launch;
  w.attention_bwd_s = kAttentionBackwardRatio * attn_fwd_flops / attn_rate + launch;
  // Memory-bound kernels: 2 norms (read + write h), 2 residual adds (read 2, write 1), the
  // activation (reads fc1_out, writes f). Norms and adds run on the rank's token shard with SP.
  const double rows = static_cast<double>(pc.sequence_parallel ? tokens / tp : tokens);
  const double fwd_bytes = rows * mc.hidden * e * (2 * 2 + 2 * 3) +
                           static_cast<double>(tokens) * (mc.fc1_out() + mc.ffn) / tp * e;
  const double bw = dev.memory_bandwidth_bytes_per_s;
  w.elementwise_fwd_s = fwd_bytes / bw + 5 * launch;
  w.elementwise_bwd_s = 2 * fwd_bytes / bw + 10 * launch;
  for (const LayerGemm& g : layer_gemms(mc, tokens, tp)) {
    if (tp_roles.count(g.role)) continue;
    const double t = hardware::gemm_time_s(p, g.m, g.n, g.k, pc.dtype);
    (g.pass == workload::Pass::forward ? w.plain_gemm_fwd_s : w.plain_gemm_bwd_s) += t;
  }
  return w;
}

// TE's defaults as TE runs them, on top of te_default_strategy's estimates: each column-parallel
// backward pair overlaps in bulk (te_bulk_pairs; TE's default SMs and margin), and in an FP8 run
// every other reduce-scatter moves BF16 (TE's defaults set no fp8_buf). The export prices TE's
// defaults from these (te_export.hpp).
Status price_te_defaults(const hardware::Profile& p, LayerPlan& lp, model::Caches& caches) {
  auto find = [&lp](const std::string& role) -> PlannedOp* {
    for (PlannedOp& po : lp.ops)
      if (po.choice.op.role == role) return &po;
    return nullptr;
  };
  std::set<std::string> bulk;
  for (const auto& [dgrad, wgrad] : te_bulk_pairs()) {
    PlannedOp* d = find(dgrad);
    PlannedOp* w = find(wgrad);
    if (d == nullptr || w == nullptr || d->choice.op.tp < 2) continue;
    COMPASS_ASSIGN(const TeBulkPhase rs,
                   te_bulk_phase(p, w->choice.op, d->choice.op, lp.te_plan, kTeDefaultSm,
                                 kTeDefaultSmMargin, true, caches));
    COMPASS_ASSIGN(const TeBulkPhase ag,
                   te_bulk_phase(p, d->choice.op, w->choice.op, lp.te_plan, kTeDefaultSm,
                                 kTeDefaultSmMargin, false, caches));
    d->te.total_s = rs.total_s;
    w->te.total_s = ag.total_s;
    bulk.insert({dgrad, wgrad});
  }
  for (PlannedOp& po : lp.ops) {
    if (bulk.count(po.choice.op.role) || po.choice.op.kind != workload::OpKind::gemm_rs) continue;
    COMPASS_ASSIGN(const double extra, te_bf16_buffer_extra_s(p, po.choice.op, lp.te_plan, caches));
    po.te.total_s += extra;
  }
  return {};
}

}  // namespace

Result<LayerPlan> plan_layer(const hardware::Profile& p, const workload::ModelConfig& model,
                             const workload::ParallelConfig& parallel, const std::vector<int>& gpus,
                             const ChoiceRefiner& refine, model::Breakdown breakdown) {
  return LayerPlanner(p).plan(model, parallel, gpus, refine, breakdown);
}

LayerPlanner::LayerPlanner(const hardware::Profile& p) : profile_(p) {}

Result<LayerPlan> LayerPlanner::plan(const workload::ModelConfig& model,
                                     const workload::ParallelConfig& parallel,
                                     const std::vector<int>& gpus, const ChoiceRefiner& refine,
                                     model::Breakdown breakdown) {
  const hardware::Profile& p = profile_;
  if (breakdown == model::Breakdown::none)
    return make_error("plan_layer: a layer plan needs at least the chosen estimates' compute");
  if (parallel.tp < 1) return make_error("tp={} must be at least 1", parallel.tp);
  if (parallel.cp < 1) return make_error("cp={} must be at least 1", parallel.cp);
  if (parallel.tp > p.gpu_count())
    return make_error("tp={} exceeds the {} GPUs of '{}'", parallel.tp, p.gpu_count(), p.name);
  COMPASS_TRY(hardware::check_peak_flops(p, parallel.dtype));
  LayerPlan lp;
  lp.profile = p.name;
  lp.model = model;
  lp.parallel = parallel;
  COMPASS_ASSIGN(const std::vector<workload::LayerOp> ops,
                 workload::layer_operators(model, parallel));
  std::vector<int> group = gpus;
  if (group.empty()) {
    group.resize(parallel.tp);
    std::iota(group.begin(), group.end(), 0);
  }
  if (static_cast<int>(group.size()) != parallel.tp)
    return make_error("the TP group lists {} GPUs but tp={}", group.size(), parallel.tp);
  auto known = comm_plans_.find(group);
  if (known == comm_plans_.end()) {
    COMPASS_ASSIGN(schedule::CommPlan made, schedule::comm_plan_for(p, group));
    known = comm_plans_.emplace(group, std::move(made)).first;
  }
  lp.plan = known->second;
  lp.te_plan = rank_order_plan(lp.plan);
  std::set<std::string> roles;
  model::Caches& caches = caches_;  // the operators of one layer and of the next share patterns
  for (const workload::LayerOp& lo : ops) {
    PlannedOp po;
    po.layer_op = lo;
    COMPASS_ASSIGN(po.choice, model::choose_strategy(p, lo.op, lp.plan, caches, breakdown));
    const std::size_t chosen = po.choice.chosen;
    if (refine) COMPASS_TRY(refine(po.choice, lp.plan));
    if (breakdown == model::Breakdown::all) {
      po.megatron = po.choice.of(StrategyKind::sequential);
    } else {
      model::Estimate& c = po.choice.estimates[po.choice.chosen];
      if (po.choice.chosen != chosen) {
        COMPASS_ASSIGN(c, model::estimate_without_split(p, lo.op, c.strategy, lp.plan, caches,
                                                        breakdown == model::Breakdown::chosen));
      }
      // Megatron-LM's estimate with its whole breakdown: the TE pricing reads its overheads.
      COMPASS_ASSIGN(po.megatron,
                     model::estimate(p, lo.op, schedule::Strategy{StrategyKind::sequential, 0},
                                     lp.plan, caches));
    }
    if (lo.op.kind == workload::OpKind::gemm_ar) {
      // Megatron-LM runs it as without TE (te_default_strategy): its NCCL all-reduce on the
      // rings NCCL picks, not TE's rank-order ring.
      po.te = po.megatron;
    } else {
      COMPASS_ASSIGN(po.te,
                     model::estimate(p, lo.op, te_default_strategy(lo.op), lp.te_plan, caches));
    }
    roles.insert(lo.op.role);
    lp.ops.push_back(std::move(po));
  }
  COMPASS_TRY(price_te_defaults(p, lp, caches));
  for (const PlannedOp& po : lp.ops) {
    lp.compass.tp_ops_s += po.compass().total_s;
    lp.megatron.tp_ops_s += po.megatron.total_s;
    lp.te.tp_ops_s += po.te.total_s;
  }
  lp.other = other_work(p, model, parallel, roles);
  const std::int64_t tokens = parallel.seq * parallel.micro_batch;
  const bool vocab_split = model.vocab % parallel.tp == 0;
  const std::int64_t vocab_rank = vocab_split ? model.vocab / parallel.tp : model.vocab;
  lp.lm_head_s = 3 * hardware::gemm_time_s(p, tokens, vocab_rank, model.hidden, parallel.dtype);
  for (IterationEstimate* it : {&lp.megatron, &lp.te, &lp.compass}) {
    it->layer_s = it->tp_ops_s + lp.other.total_s();
    it->total_s = model.layers * it->layer_s + lp.lm_head_s;
    if (!std::isfinite(it->total_s) || !std::isfinite(it->layer_s))
      return make_error("model '{}' on profile '{}': the iteration estimate is not finite; check "
                        "the sizes and the profile's numbers",
                        model.name, p.name);
  }
  return lp;
}

}  // namespace compass::plan
