#include "compass/job/memory.hpp"

#include <algorithm>

namespace compass::job {

ParamCounts param_counts(const workload::ModelConfig& m) {
  const double h = static_cast<double>(m.hidden);
  ParamCounts c;
  c.per_layer = h * m.qkv_out() + h * h + h * m.fc1_out() + static_cast<double>(m.ffn) * h + 2 * h;
  c.embedding = static_cast<double>(m.vocab) * h;
  c.lm_head = static_cast<double>(m.vocab) * h + h;
  return c;
}

double layer_activation_bytes(const workload::ModelConfig& m, const Layout& l,
                              bool flash_attention) {
  // Each rank holds its share of the sequence (context parallelism).
  const double s = static_cast<double>(l.local_seq()), b = l.micro_batch,
               h = static_cast<double>(m.hidden);
  const double a = m.heads, t = l.tp;
  const bool sp = l.sequence_parallel && l.tp > 1;
  if (l.recompute == Recompute::full) return 2 * s * b * h / (sp ? t : 1);
  const double attention =
      (flash_attention || l.recompute == Recompute::selective) ? 0 : 5 * a * s / h;
  // Korthikanti's sbh(10 + 24/t): 10 held by every TP rank without SP (the two norms' inputs,
  // two dropout masks, the QKV and FC1 inputs), 24 split over TP (Q, K, V, the projection's
  // input, the FC1 output, the FC2 input). TransformerEngine's FP8 GEMMs keep the input their
  // weight gradient needs in FP8, one byte: the QKV and FC1 inputs (2 -> 1 each) and the FC2
  // input (8 -> 4); the attention keeps its output in BF16 for its own backward and the
  // projection keeps an FP8 copy of it (+1): 8 + 21/t, 29 in all.
  const double replicated = l.fp8 ? 8 : 10, split = l.fp8 ? 21 : 24;
  if (l.tp == 1) return s * b * h * (replicated + split + attention);
  if (sp) return s * b * h / t * (replicated + split + attention);
  return s * b * h * (replicated + split / t + attention / t);
}

namespace {

// Chunk-micro-batches stage s holds at its peak: the warm-up forwards plus the one in flight.
int in_flight(const Layout& l, int s) {
  const int m = l.microbatches();
  if (l.vpp == 1) return std::min(l.pp - s, m);
  return std::min((l.pp - s - 1) * 2 + (l.vpp - 1) * l.pp + 1, m * l.vpp);
}

}  // namespace

MemoryReport memory_per_gpu(const workload::ModelConfig& m, const Layout& l, plan::Config overlap,
                            double capacity_bytes, const MemoryOptions& o) {
  const ParamCounts pc = param_counts(m);
  const std::vector<int> layers = layers_per_virtual_stage(m.layers, l.pp, l.vpp);
  const double t = l.tp;
  const double s = static_cast<double>(l.local_seq()), b = l.micro_batch,
               h = static_cast<double>(m.hidden);
  const double per_layer_act = layer_activation_bytes(m, l, o.flash_attention);
  // Full recomputation re-creates one layer's activations during its backward.
  Layout no_rc = l;
  no_rc.recompute = Recompute::none;
  const double recompute_peak =
      l.recompute == Recompute::full ? layer_activation_bytes(m, no_rc, o.flash_attention) : 0;
  MemoryReport r;
  r.capacity_bytes = capacity_bytes;
  for (int st = 0; st < l.pp; ++st) {
    StageMemory sm;
    int stage_layers = 0;
    for (int c = 0; c < l.vpp; ++c) stage_layers += layers[c * l.pp + st];
    double params = stage_layers * pc.per_layer;
    if (st == 0) params += pc.embedding;
    if (st == l.pp - 1) params += pc.lm_head;
    params /= t;
    sm.weights_bytes = params * (o.weight_bytes + (l.fp8 ? 1 : 0));
    sm.grads_bytes = params * o.grad_bytes;
    sm.optimizer_bytes =
        params * o.optimizer_bytes / (l.distributed_optimizer ? l.grad_group() : 1);
    sm.microbatches_in_flight = in_flight(l, st);
    // A chunk holds stage_layers / vpp layers on average.
    sm.activations_bytes =
        sm.microbatches_in_flight * (static_cast<double>(stage_layers) / l.vpp) * per_layer_act +
        recompute_peak;
    // The last stage keeps one micro-batch's logits: bf16 output and fp32 softmax.
    if (st == l.pp - 1) sm.activations_bytes += s * b * static_cast<double>(m.vocab) / t * 6;
    // TP overlap keeps userbuffers: three gathered activations (s*b*h in bf16) (assumed); TE's
    // defaults only where Megatron-LM turns TE's overlap on.
    const bool buffers = overlap == plan::Config::compass ? l.tp > 1
                                                          : overlap == plan::Config::te_default &&
                                                                te_overlap_applies(l);
    if (buffers) sm.comm_buffers_bytes = 3 * s * b * h * 2;
    const double others = sm.total_bytes();
    sm.allowance_bytes = o.fixed_allowance_bytes + o.fragmentation * others;
    if (sm.total_bytes() > r.peak_bytes) {
      r.peak_bytes = sm.total_bytes();
      r.peak_stage = st;
    }
    r.stages.push_back(sm);
  }
  return r;
}

}  // namespace compass::job
