#include "compass/job/step.hpp"

#include <algorithm>
#include <cmath>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/job/dp_overlap.hpp"
#include "compass/job/flops.hpp"

namespace compass::job {

using model::Collective;

LayerTimes layer_times(const plan::LayerPlan& lp, plan::Config c) {
  LayerTimes t;
  // Without TP there is nothing to overlap: every setting runs the GEMMs as Megatron-LM does.
  const bool tp = lp.parallel.tp > 1;
  if (!tp) c = plan::Config::megatron;
  for (const plan::PlannedOp& op : lp.ops) {
    const model::Estimate& e = c == plan::Config::megatron     ? op.megatron
                               : c == plan::Config::te_default ? op.te
                                                               : op.compass();
    const double exposed = tp ? std::max(0.0, e.total_s - e.compute_s) : 0.0;
    if (op.layer_op.pass == workload::Pass::forward) {
      t.forward_s += e.total_s;
      t.tp_exposed_forward_s += exposed;
    } else {
      t.backward_s += e.total_s;
      t.tp_exposed_backward_s += exposed;
    }
  }
  const plan::OtherWork& w = lp.other;
  t.forward_s += w.attention_fwd_s + w.elementwise_fwd_s + w.plain_gemm_fwd_s;
  t.backward_s += w.attention_bwd_s + w.elementwise_bwd_s + w.plain_gemm_bwd_s;
  t.attention_forward_s = w.attention_fwd_s;
  return t;
}

CpExposure cp_exposure(JobComm& comm, const workload::ModelConfig& m, const Layout& l,
                       const plan::LayerPlan& lp) {
  CpExposure e;
  if (l.cp <= 1) return e;
  // Keys and values of the rank's tokens for its heads, in BF16 (attention runs in BF16 in an
  // FP8 run too).
  const double kv_bytes = 2.0 * static_cast<double>(l.local_seq()) * l.micro_batch *
                          static_cast<double>(m.kv_heads) / l.tp * m.head_dim() * 2;
  // Every CP ring of the stage steps at once (each TP rank's, each DP replica's).
  const double forward_hop = comm.cp_ring_step_s(l.tp, l.cp, l.dp, kv_bytes);
  const double backward_hop = comm.cp_ring_step_s(l.tp, l.cp, l.dp, 2 * kv_bytes);
  const double steps = l.cp - 1;
  e.forward_s = steps * std::max(0.0, forward_hop - lp.other.attention_fwd_s / l.cp);
  e.backward_s = steps * std::max(0.0, backward_hop - lp.other.attention_bwd_s / l.cp);
  return e;
}

namespace {

// The embedding (first stage) and the LM head with the loss (last stage), per micro-batch.
struct EdgeTimes {
  double embed_fwd_s = 0, embed_bwd_s = 0, head_fwd_s = 0, head_bwd_s = 0;
};

EdgeTimes edge_times(const Cluster& cl, JobComm& comm, const workload::ModelConfig& m,
                     const Layout& l, const plan::LayerPlan& lp) {
  const hardware::Profile& node = cl.node;
  const double bw = node.gpu_device(0).memory_bandwidth_bytes_per_s;
  const double launch = node.overheads.kernel_launch_s;
  const double tokens = static_cast<double>(l.local_seq()) * l.micro_batch;
  const double act_bytes = tokens * static_cast<double>(m.hidden) * 2;
  const bool sp = l.sequence_parallel && l.tp > 1;
  EdgeTimes e;
  // Vocab-parallel lookup writes the full activation, then the TP group sums it (reduce-scatter
  // with SP, all-reduce without); the backward scatters the gradient into fp32 rows.
  const double tp_sum = comm.intra_node_s(l.tp, 1, act_bytes,
                                          sp ? Collective::reduce_scatter : Collective::all_reduce);
  const double tp_gather = sp ? comm.intra_node_s(l.tp, 1, act_bytes, Collective::all_gather) : 0;
  e.embed_fwd_s = 2 * act_bytes / bw + launch + tp_sum;
  e.embed_bwd_s = act_bytes * 3 / bw + launch + tp_gather;
  // LM head: its GEMMs from the layer plan (forward 1 of 3), the sequence gathered first with SP;
  // the loss reads the logits and writes fp32 probabilities, the backward the reverse.
  const double logits = tokens * static_cast<double>(m.vocab) / l.tp;
  e.head_fwd_s = lp.lm_head_s / 3 + tp_gather + logits * (2 + 4) / bw + 3 * launch;
  e.head_bwd_s = lp.lm_head_s * 2 / 3 +
                 (sp ? comm.intra_node_s(l.tp, 1, act_bytes, Collective::reduce_scatter)
                     : comm.intra_node_s(l.tp, 1, act_bytes, Collective::all_reduce)) +
                 logits * (4 + 2) / bw + 3 * launch;
  return e;
}

}  // namespace

LayerPlanKey layer_plan_key(const Layout& l) {
  return {l.tp, l.seq, l.cp, l.micro_batch, l.sequence_parallel && l.tp > 1, l.fp8};
}

Result<plan::LayerPlan> plan_for(const Cluster& cluster, const workload::ModelConfig& m,
                                 const Layout& l) {
  plan::LayerPlanner planner(cluster.node);
  return plan_for(planner, cluster, m, l);
}

Result<plan::LayerPlan> plan_for(plan::LayerPlanner& planner, const Cluster& cluster,
                                 const workload::ModelConfig& m, const Layout& l) {
  workload::ParallelConfig pc;
  pc.tp = l.tp;
  pc.seq = l.local_seq();
  pc.cp = l.cp;
  pc.micro_batch = l.micro_batch;
  pc.sequence_parallel = l.sequence_parallel && l.tp > 1;
  pc.dtype = DType::bf16;
  if (l.fp8) {
    COMPASS_TRY(hardware::check_peak_flops(cluster.node, DType::fp8));
    pc.dtype = DType::fp8;
  }
  if (l.tp > cluster.gpus_per_node())
    return make_error("TP {} is larger than a node of {} ({} GPUs)", l.tp, cluster.name,
                      cluster.gpus_per_node());
  // The step reads the chosen, sequential and TE estimates' breakdowns only.
  return planner.plan(m, pc, {}, {}, model::Breakdown::compute);
}

Result<StepResult> price_step(const Cluster& cl, JobComm& comm, const workload::ModelConfig& m,
                              const Layout& l, const plan::LayerPlan& lp, plan::Config c,
                              const StepOptions& o) {
  PipelineCache pipelines;
  return price_step(cl, comm, m, l, lp, c, o, pipelines);
}

Result<StepResult> price_step(const Cluster& cl, JobComm& comm, const workload::ModelConfig& m,
                              const Layout& l, const plan::LayerPlan& lp, plan::Config c,
                              const StepOptions& o, PipelineCache& pipelines) {
  COMPASS_TRY(check(l, m));
  const int g = cl.gpus_per_node();
  if (l.tp > g) return make_error("TP {} is larger than a node of {} ({} GPUs)", l.tp, cl.name, g);
  if (cl.max_nodes > 0 && l.gpus() > std::int64_t{cl.max_nodes} * g)
    return make_error("layout needs {} GPUs; cluster {} has {}", l.gpus(), cl.name,
                      std::int64_t{cl.max_nodes} * g);
  if (l.gpus() > g && l.gpus() % g != 0)
    return make_error("{} GPUs do not fill whole nodes of {}", l.gpus(), g);
  if (lp.parallel.tp != l.tp || lp.parallel.seq != l.local_seq() || lp.parallel.cp != l.cp ||
      lp.parallel.micro_batch != l.micro_batch)
    return make_error(
        "the layer plan is for tp {}, seq {} per rank, cp {}, micro-batch {}, not the layout's",
        lp.parallel.tp, lp.parallel.seq, lp.parallel.cp, lp.parallel.micro_batch);

  const Placement pl = place(l, g);
  LayerTimes lt = layer_times(lp, c);
  // Context parallelism's exposed exchange lengthens each layer's passes; recomputing attention
  // exchanges the keys and values again.
  const CpExposure cpx = cp_exposure(comm, m, l, lp);
  lt.forward_s += cpx.forward_s;
  lt.backward_s += cpx.backward_s;
  double recompute_s = 0;
  if (l.recompute == Recompute::full) recompute_s = lt.forward_s;
  if (l.recompute == Recompute::selective) recompute_s = lt.attention_forward_s + cpx.forward_s;
  const double recompute_cp_s = l.recompute == Recompute::none ? 0.0 : cpx.forward_s;
  const EdgeTimes edge = edge_times(cl, comm, m, l, lp);

  StepResult r;
  r.layout = l;
  r.overlap = c;
  const int p = l.pp, v = l.vpp, vs = p * v;
  const std::vector<int> layers = layers_per_virtual_stage(m.layers, p, v);
  PipelineSpec& spec = r.pipeline;
  spec.stages = p;
  spec.chunks = v;
  spec.microbatches = l.microbatches();
  std::vector<double> tp_exposed(vs), cp_exposed(vs);
  for (int u = 0; u < vs; ++u) {
    double f = layers[u] * lt.forward_s, b = layers[u] * (lt.backward_s + recompute_s);
    tp_exposed[u] = layers[u] * (lt.tp_exposed_forward_s + lt.tp_exposed_backward_s +
                                 (l.recompute == Recompute::full ? lt.tp_exposed_forward_s : 0));
    cp_exposed[u] = layers[u] * (cpx.forward_s + cpx.backward_s + recompute_cp_s);
    if (u == 0) f += edge.embed_fwd_s, b += edge.embed_bwd_s;
    if (u == vs - 1) f += edge.head_fwd_s, b += edge.head_bwd_s;
    spec.forward_s.push_back(f);
    spec.backward_s.push_back(b);
  }
  const bool sp = l.sequence_parallel && l.tp > 1;
  const double send_bytes = static_cast<double>(l.local_seq()) * l.micro_batch *
                            static_cast<double>(m.hidden) * 2 / (sp ? l.tp : 1);
  // Each boundary on the link its two stages' GPUs sit on: stages tp x cp x dp ranks apart can
  // share a node while the next boundary crosses to another node.
  const std::int64_t stage_stride = std::int64_t{l.tp} * l.grad_group();
  for (int u = 0; u + 1 < vs; ++u)
    spec.send_s.push_back(
        comm.p2p_ranks_s(stage_stride * (u % p), stage_stride * ((u + 1) % p), send_bytes));
  COMPASS_ASSIGN(const PipelineTasks* kept, pipelines.tasks(spec));
  const PipelineTasks& tasks = *kept;
  COMPASS_ASSIGN(const Followed fl, follow(tasks.list));
  r.stage_end_s = fl.resource_end_s;

  // DP: per stage, chunk by chunk, buckets of the chunk's gradients ready during the chunk's
  // last backward; parameters needed from the chunk's first forward on.
  const ParamCounts pc = param_counts(m);
  // Gradients are reduced over DP x CP (Megatron-LM's data-parallel group with CP).
  const double bucket_params = std::max(o.min_bucket_params, 1e6 * l.grad_group());
  const Collective reduce =
      l.distributed_optimizer ? Collective::reduce_scatter : Collective::all_reduce;
  std::vector<double> rs_exposed(p, 0), ag_exposed(p, 0), opt_s(p, 0);
  const double bw = cl.node.gpu_device(0).memory_bandwidth_bytes_per_s;
  // Per virtual stage: its last backward (start, length) and its first forward (start, length).
  std::vector<double> last_b_start(vs, -1), last_b_len(vs, 0), first_f_start(vs, -1),
      first_f_len(vs, 0);
  for (int t = 0; t < static_cast<int>(tasks.info.size()); ++t) {
    const PipelineTaskInfo& in = tasks.info[t];
    const int u = in.chunk * p + in.stage;
    const double start = fl.start_s[t], len = tasks.list.tasks[t].duration_s;
    if (!in.forward && start >= last_b_start[u]) last_b_start[u] = start, last_b_len[u] = len;
    if (in.forward && (first_f_start[u] < 0 || start < first_f_start[u]))
      first_f_start[u] = start, first_f_len[u] = len;
  }
  const auto by_time = [](const Bucket& a, const Bucket& b) { return a.at_s < b.at_s; };
  for (int s = 0; s < p; ++s) {
    std::vector<Bucket> ready, needed;
    double stage_params = 0;
    for (int ch = 0; ch < v; ++ch) {
      const int u = ch * p + s;
      double params = layers[u] * pc.per_layer;
      if (u == 0) params += pc.embedding;
      if (u == vs - 1) params += pc.lm_head;
      params /= l.tp;
      stage_params += params;
      if (l.grad_group() == 1) continue;
      const int nb = std::max(1, static_cast<int>(std::ceil(params / bucket_params)));
      const double rs = comm.dp_collective_s(pl, l.tp, params / nb * o.memory.grad_bytes, reduce);
      const double ag = l.distributed_optimizer
                            ? comm.dp_collective_s(pl, l.tp, params / nb * o.memory.weight_bytes,
                                                   Collective::all_gather)
                            : 0;
      // A chunk's buckets come in time order: merged into the earlier chunks' (stable, so
      // equal times keep chunk order).
      const auto ready_from = static_cast<std::ptrdiff_t>(ready.size());
      const auto needed_from = static_cast<std::ptrdiff_t>(needed.size());
      for (int k = 0; k < nb; ++k) {
        ready.push_back({last_b_start[u] + last_b_len[u] * (k + 1) / nb, rs});
        if (ag > 0) needed.push_back({first_f_start[u] + first_f_len[u] * k / nb, ag});
      }
      std::inplace_merge(ready.begin(), ready.begin() + ready_from, ready.end(), by_time);
      std::inplace_merge(needed.begin(), needed.begin() + needed_from, needed.end(), by_time);
    }
    if (l.overlap_grad_reduce) {
      rs_exposed[s] = exposed_reduce_s(ready, fl.resource_end_s[s]);
    } else {
      for (const Bucket& b : ready) rs_exposed[s] += b.comm_s;
    }
    if (l.overlap_param_gather) {
      ag_exposed[s] = exposed_gather_s(needed);
    } else {
      for (const Bucket& b : needed) ag_exposed[s] += b.comm_s;
    }
    const double local = stage_params / (l.distributed_optimizer ? l.grad_group() : 1);
    opt_s[s] = local * o.optimizer_bytes_per_param / bw + 10 * cl.node.overheads.kernel_launch_s;
  }

  int crit = 0;
  for (int s = 1; s < p; ++s)
    if (fl.resource_end_s[s] + rs_exposed[s] > fl.resource_end_s[crit] + rs_exposed[crit]) crit = s;
  const double ag = *std::max_element(ag_exposed.begin(), ag_exposed.end());
  const double opt = *std::max_element(opt_s.begin(), opt_s.end());
  r.critical_stage = crit;
  r.iteration_s = fl.resource_end_s[crit] + rs_exposed[crit] + ag + opt;
  double crit_tp = 0, crit_cp = 0;
  for (int ch = 0; ch < v; ++ch) {
    crit_tp += tp_exposed[ch * p + crit] * spec.microbatches;
    crit_cp += cp_exposed[ch * p + crit] * spec.microbatches;
  }
  r.breakdown.tp_exposed_s = crit_tp;
  r.breakdown.cp_exposed_s = crit_cp;
  r.breakdown.compute_s = fl.busy_s[crit] - crit_tp - crit_cp;
  r.breakdown.bubble_s = fl.resource_end_s[crit] - fl.busy_s[crit];
  r.breakdown.dp_exposed_s = rs_exposed[crit] + ag;
  r.breakdown.optimizer_s = opt;

  const double tokens = static_cast<double>(l.global_batch) * l.seq;
  const double gpus = static_cast<double>(l.gpus());
  r.tokens_per_s_per_gpu = tokens / r.iteration_s / gpus;
  r.model_tflops_per_gpu = model_flops_per_token(m, l.seq) * r.tokens_per_s_per_gpu / 1e12;
  r.hardware_tflops_per_gpu =
      hardware_flops_per_token(m, l.seq, l.recompute) * r.tokens_per_s_per_gpu / 1e12;
  r.mfu = r.model_tflops_per_gpu * 1e12 / hardware::peak_flops(cl.node, lp.parallel.dtype);
  r.memory = memory_per_gpu(m, l, c, cl.node.gpu_device(0).memory_bytes, o.memory);
  return r;
}

}  // namespace compass::job
