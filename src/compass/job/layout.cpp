#include "compass/job/layout.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "compass/workload/layer_ops.hpp"

namespace compass::job {

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none:
      return "none";
    case Recompute::selective:
      return "selective";
    case Recompute::full:
      return "full";
  }
  return "?";
}

std::optional<Recompute> parse_recompute(std::string_view s) {
  if (s == "none") return Recompute::none;
  if (s == "selective") return Recompute::selective;
  if (s == "full") return Recompute::full;
  return std::nullopt;
}

bool te_overlap_applies(const Layout& l) {
  return l.tp > 1 && l.sequence_parallel;
}

std::string describe(const Layout& l) {
  std::string s = fmt::format("tp{}", l.tp);
  if (l.cp > 1) s += fmt::format(" cp{}", l.cp);
  s += fmt::format(" pp{}", l.pp);
  if (l.vpp > 1) s += fmt::format(" vpp{}", l.vpp);
  s += fmt::format(" dp{} mbs{}", l.dp, l.micro_batch);
  if (l.sequence_parallel && l.tp > 1) s += " sp";
  if (l.recompute != Recompute::none) s += fmt::format(" rc-{}", to_string(l.recompute));
  if (l.fp8) s += " fp8";
  return s;
}

Status check(const Layout& l, const workload::ModelConfig& m) {
  if (l.tp < 1 || l.cp < 1 || l.pp < 1 || l.vpp < 1 || l.dp < 1 || l.micro_batch < 1 ||
      l.global_batch < 1 || l.seq < 1)
    return make_error("layout {}: every size must be positive", describe(l));
  if (l.global_batch % (std::int64_t{l.micro_batch} * l.dp) != 0)
    return make_error("global batch {} is not a multiple of micro-batch {} x DP {}", l.global_batch,
                      l.micro_batch, l.dp);
  if (l.vpp > 1 && l.pp == 1)
    return make_error("virtual pipeline stages ({}) need more than one pipeline stage", l.vpp);
  if (l.vpp > 1 && l.microbatches() % l.pp != 0)
    return make_error("interleaved schedule: {} micro-batches is not a multiple of PP {}",
                      l.microbatches(), l.pp);
  if (std::int64_t{l.pp} * l.vpp > m.layers)
    return make_error("PP {} x virtual stages {} exceeds the {} layers of {}", l.pp, l.vpp,
                      m.layers, m.name);
  if (!split_layers(m.layers, l.pp, l.vpp)) {
    if (l.vpp > 1)
      return make_error(
          "interleaved schedule: PP {} x virtual stages {} divides neither the {} layers of {} "
          "nor the {} that count the embedding and the loss as layers",
          l.pp, l.vpp, m.layers, m.name, m.layers + 2);
    return make_error(
        "PP {} cannot split the {} layers of {} (middle stages of ceil(layers / PP) "
        "leave the first and last stage none)",
        l.pp, m.layers, m.name);
  }
  if (m.heads % l.tp != 0 || m.kv_heads % l.tp != 0 || m.ffn % l.tp != 0)
    return make_error("TP {} does not divide the heads ({}), KV heads ({}) and FFN ({}) of {}",
                      l.tp, m.heads, m.kv_heads, m.ffn, m.name);
  if (l.sequence_parallel && l.tp == 1) return make_error("sequence parallel needs TP > 1");
  if (Status st = workload::check_context_split(l.seq, l.cp); !st.ok())
    return make_error("context parallel: {}", st.error().message);
  if (l.sequence_parallel && l.local_seq() % l.tp != 0)
    return make_error("sequence parallel: {} {} is not a multiple of TP {}",
                      l.cp > 1 ? "each CP rank's sequence share" : "sequence", l.local_seq(), l.tp);
  return Status::success();
}

std::optional<LayerSplit> split_layers(int layers, int pp, int vpp) {
  if (layers < 1 || pp < 1 || vpp < 1) return std::nullopt;
  const std::int64_t v = std::int64_t{pp} * vpp;
  if (layers % v == 0)
    return LayerSplit{SplitRule::even, std::vector<int>(v, static_cast<int>(layers / v))};
  if (pp < 2) return std::nullopt;
  if (vpp == 1) {
    const int middle = (layers + pp - 1) / pp;
    const int rest = layers - (pp - 2) * middle;
    if (rest < 2) return std::nullopt;
    std::vector<int> out(pp, middle);
    out.front() = rest / 2;
    out.back() = rest - rest / 2;
    return LayerSplit{SplitRule::first_last, std::move(out)};
  }
  // Megatron-LM counts the embedding (first virtual stage) and the loss (last) as a layer each.
  if ((std::int64_t{layers} + 2) % v != 0) return std::nullopt;
  const int n = static_cast<int>((std::int64_t{layers} + 2) / v);
  if (n < 2) return std::nullopt;
  std::vector<int> out(v, n);
  out.front() = n - 1;
  out.back() = n - 1;
  return LayerSplit{SplitRule::embedding_and_loss, std::move(out)};
}

std::vector<int> layers_per_virtual_stage(int layers, int pp, int vpp) {
  std::optional<LayerSplit> s = split_layers(layers, pp, vpp);
  return s ? std::move(s->layers) : std::vector<int>{};
}

Placement place(const Layout& l, int gpus_per_node) {
  Placement p;
  p.gpus_per_node = gpus_per_node;
  const int group = l.grad_group();
  if (l.tp >= gpus_per_node) {
    p.dp_per_node = 1;
  } else {
    p.dp_per_node = std::min(group, std::max(1, gpus_per_node / l.tp));
  }
  p.dp_nodes = (group + p.dp_per_node - 1) / p.dp_per_node;
  const std::int64_t stage_stride = std::int64_t{l.tp} * group;
  p.pp_crosses_nodes = l.pp > 1 && stage_stride >= gpus_per_node;
  p.pp_peer_offset = (l.pp == 1 || p.pp_crosses_nodes) ? 0 : static_cast<int>(stage_stride);
  return p;
}

}  // namespace compass::job
