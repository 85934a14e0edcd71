#pragma once
// A training layout: how a model is split over GPUs and how a step is run, as Megatron-LM
// names it, and the ranks' placement on a cluster's nodes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/workload/model_config.hpp"

namespace compass::job {

enum class Recompute { none, selective, full };
std::string_view to_string(Recompute r);
std::optional<Recompute> parse_recompute(std::string_view s);

struct Layout {
  int tp = 1;   ///< tensor parallel
  int cp = 1;   ///< context parallel: ranks sharing each sequence (ring attention)
  int pp = 1;   ///< pipeline stages
  int vpp = 1;  ///< model chunks per stage (interleaved 1F1B when > 1)
  int dp = 1;   ///< data parallel
  int micro_batch = 1;
  int global_batch = 1;  ///< sequences per iteration
  std::int64_t seq = 2048;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::none;
  bool distributed_optimizer = true;
  bool overlap_grad_reduce = true;   ///< DP reduce-scatter / all-reduce under the backward
  bool overlap_param_gather = true;  ///< distributed optimizer's all-gather under the forward
  bool fp8 = false;                  ///< FP8 GEMMs (needs an FP8 peak on the GPU)
  bool operator==(const Layout&) const = default;

  std::int64_t gpus() const { return std::int64_t{tp} * cp * pp * dp; }
  /// Each rank's tokens of a sequence: seq / cp.
  std::int64_t local_seq() const { return seq / cp; }
  /// The ranks a gradient is reduced over (and the distributed optimizer shards over): DP x CP.
  int grad_group() const { return dp * cp; }
  /// Micro-batches per pipeline per iteration: global / (micro × dp).
  int microbatches() const { return global_batch / (micro_batch * dp); }
};

/// "tp8 cp2 pp4 vpp2 dp16 mbs1 sp sel" style one-word-per-knob summary (cp only above 1).
std::string describe(const Layout& l);

/// Whether Megatron-LM runs the layout's TP communication through TransformerEngine's
/// overlap (--tp-comm-overlap): TP > 1 with sequence parallelism (it refuses the flag without).
bool te_overlap_applies(const Layout& l);

/// Checks the layout on its own and against the model: positive sizes, global batch a
/// multiple of micro-batch x dp, vpp > 1 only with pp > 1, micro-batches a multiple of pp with
/// vpp > 1, a layer split split_layers can make, heads, kv heads
/// and FFN divisible by tp, SP only with tp > 1, a sequence of 2 x cp equal chunks with CP (the
/// causal balance Megatron-LM needs) whose share a multiple of tp with SP.
Status check(const Layout& l, const workload::ModelConfig& m);

/// How the layers are split over the virtual stages, as Megatron-LM names the split.
enum class SplitRule {
  even,        ///< pp x vpp divides the layers: no flag
  first_last,  ///< vpp 1: --decoder-first/last-pipeline-num-layers
  /// vpp > 1: --account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split,
  /// the embedding and the loss counted as one layer each
  embedding_and_loss,
};

struct LayerSplit {
  SplitRule rule = SplitRule::even;
  std::vector<int> layers;  ///< per virtual stage; chunk c of stage s is entry c * pp + s
};

/// The split of `layers` over pp x vpp virtual stages. Even when pp x vpp divides the layers;
/// else with vpp 1 as Megatron-LM's --decoder-first/last-pipeline-num-layers allow: the middle
/// stages take ceil(layers / pp) each and the first and last stage split the rest (the first
/// the smaller half); else (vpp > 1) as Megatron-LM splits with the embedding and the loss
/// counted as layers: when pp x vpp divides layers + 2 into n each, every virtual stage takes
/// n, the first and the last n - 1 (n >= 2, so that each holds a layer). Nullopt when none of
/// these applies.
std::optional<LayerSplit> split_layers(int layers, int pp, int vpp);
/// split_layers(...)->layers, or empty when there is no split.
std::vector<int> layers_per_virtual_stage(int layers, int pp, int vpp);

/// Where ranks sit: rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
/// (Megatron-LM's default order, tp-cp-dp-pp), consecutive ranks fill a node. The DP fields
/// describe the gradient group (DP x CP ranks, tp apart).
struct Placement {
  int gpus_per_node = 8;
  int dp_per_node = 1;            ///< members of one gradient group inside one node
  int dp_nodes = 1;               ///< nodes one gradient group spans
  bool pp_crosses_nodes = false;  ///< adjacent stages sit on different nodes
  int pp_peer_offset = 0;         ///< within a node: GPU distance between adjacent stages (0: none)
};
Placement place(const Layout& l, int gpus_per_node);

}  // namespace compass::job
