#pragma once
// Export of a layer plan to TransformerEngine's userbuffers overlap settings: the per-layer
// configuration Megatron-LM reads with --tp-comm-overlap-cfg, and the launch settings beside it
// (Megatron-LM flags, environment, a device order that makes TE's rank-order ring follow
// Compass's topology-aware ring). The rules a configuration must satisfy, and how Compass's
// strategies map onto TE's methods: docs/te-export.md.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "compass/hardware/profile.hpp"
#include "compass/plan/layer_plan.hpp"

namespace compass::plan {

/// TE's overlap methods. ring_exchange: point-to-point chunk exchange fused with the GEMM;
/// pipeline: GEMM split into num_splits chunks, each followed by its collective; bulk: the
/// collective runs beside an independent GEMM of the same layer.
enum class TeMethod { ring_exchange, pipeline, bulk };
std::string_view to_string(TeMethod m);
std::optional<TeMethod> parse_te_method(std::string_view s);

/// One entry of the overlap configuration (a TE communicator for one GEMM of the layer).
struct TeEntry {
  std::string name;  ///< TE's layer name: qkv_fprop, proj_fprop, ..., fc1_wgrad
  TeMethod method = TeMethod::ring_exchange;
  int num_splits = 0;
  int num_sm = 1;
  int cga_size = 1;
  bool set_sm_margin = false;
  bool aggregate = false;
  bool atomic_gemm = false;
  bool use_ce = true;
  bool fp8_buf = false;  ///< pipeline reduce-scatter: FP8 buffer (else BF16 in an FP8 run)
};

/// The TransformerEngine release `entries` need, as a requirement line: 1.6 or newer where an
/// entry sets fp8_buf or atomic_gemm, keys TE reads since 1.6
/// (transformer_engine/pytorch/module/base.py): an older TE ignores them, keeping those
/// reduce-scatter buffers in BF16 and those GEMMs not atomic, so the run starts but is not the
/// one priced. Empty when every release since the overlap's configuration file (0.9) reads them.
std::string te_release_requirement(const std::vector<TeEntry>& entries);

/// TE's default entry for `name` at TP degree `tp` (method, SMs, cluster size, margin, splits);
/// nullopt for a name this export does not know.
std::optional<TeEntry> te_default_entry(std::string_view name, int tp);

/// The layer names this export writes, in TE's order of the layer (forward, then backward).
const std::vector<std::string>& te_layer_names();

/// What the configuration will run with.
struct TeRuntime {
  int tp = 2;
  std::int64_t rows_per_rank = 0;  ///< tokens each rank owns (seq x micro-batch / tp)
  bool fp8 = false;                ///< FP8 GEMMs (Megatron-LM --fp8-format)
  bool rs_dgrad = false;           ///< Megatron-LM --tp-comm-overlap-rs-dgrad
  /// Megatron-LM --first-last-layers-bf16: TE builds a second, non-FP8 set of communicators
  /// from the same configuration.
  bool first_last_bf16 = false;
};

/// Checks a configuration against TE's and Megatron-LM's rules (docs/te-export.md, "Rules");
/// the error names the layer and the rule.
Status validate_te_config(const std::vector<TeEntry>& entries, const TeRuntime& rt);

/// Options of the export beyond the plan.
struct TeExportOptions {
  bool fp8 = false;          ///< the run uses FP8 GEMMs
  bool atomic_gemm = false;  ///< use TE's atomic GEMM where its rules allow it (needs fp8)
  bool first_last_layers_bf16 = false;  ///< Megatron-LM --first-last-layers-bf16 (needs fp8)
  bool delay_wgrad_compute = false;     ///< Megatron-LM --delay-wgrad-compute (refused)
  /// Context-parallel size: the plan `lp` was made for seq / cp tokens per rank (what TE's
  /// buffers hold); the launch names the whole sequence and --context-parallel-size.
  int cp = 1;
  std::string config_path = "tp_comm_overlap.yaml";  ///< as named in --tp-comm-overlap-cfg
};

/// Whether CUDA multicast objects work between `gpus` of `p`: every GPU is Hopper-class or
/// newer (sm_90+) and every route between two of them crosses an NVSwitch. Without it TE's
/// userbuffers refuse to start unless UB_SKIPMC=1 is set.
bool te_cuda_multicast(const hardware::Profile& p, const std::vector<int>& gpus);

/// `s` as one bash word: single-quoted, with embedded quotes escaped ('\'').
std::string shell_quote(std::string_view s);
/// `s` as one bash word, quoted only when it needs to be: as it is when it is non-empty and
/// made of letters, digits and _ @ % + = : , . / - alone, else shell_quote(s).
std::string shell_word(std::string_view s);
/// `words` as one bash command line: each shell_word, separated by spaces.
std::string shell_line(const std::vector<std::string>& words);

/// One layer role: Compass's choice, the exported TE setting and TE's default, each with the
/// predicted time of the operator.
struct TeLayerReport {
  std::string role;            ///< Compass's operator role
  std::string te_entry;        ///< the TE entry that carries this operator's collective
  schedule::Strategy compass;  ///< Compass's choice
  double compass_s = 0;
  std::string exported;        ///< "ring_exchange", "pipeline:4", "bulk", "off"
  schedule::Strategy exported_as;  ///< the strategy the model predicts the exported setting as
  double exported_s = 0;
  std::string te_default;      ///< TE's default setting for this operator
  double te_default_s = 0;     ///< on the rank-order ring, priced as the export prices its own
  bool exact = false;          ///< the export runs what Compass chose
  std::string note;            ///< why it differs, when it does
};

struct TeExport {
  std::string profile, model;
  int tp = 0;
  std::int64_t seq = 0, micro_batch = 0;
  std::vector<TeEntry> entries;
  TeRuntime runtime;
  int cp = 1;
  bool multicast = false;         ///< te_cuda_multicast over the listed GPUs
  /// CUDA_VISIBLE_DEVICES: physical GPU of local rank 0, 1, ...: every TP group of the node,
  /// one after the other, each in its ring order.
  std::vector<int> device_order;
  std::vector<std::vector<int>> groups;  ///< the TP groups, each in ring order
  std::vector<std::pair<std::string, std::string>> env;  ///< variable, value
  std::vector<std::string> megatron_args;                 ///< one flag or value per item
  std::vector<TeLayerReport> layers;
  std::vector<std::string> notes;
  /// What the run needs beyond the files (software versions, scaling recipe); `compass doctor`
  /// checks the versions.
  std::vector<std::string> requirements;
  double compass_s = 0, exported_s = 0, te_default_s = 0;  ///< sums over the layer's operators
};

/// Builds the export of `lp` (planned on `p`). Errors (each one line naming why): no sequence
/// parallelism (Megatron-LM's overlap requires it), tp < 2, GPUs of the group without peer
/// access (TE's userbuffers need it), atomic GEMM without FP8 or with BF16 first/last layers,
/// --delay-wgrad-compute, a configuration that breaks a rule.
Result<TeExport> export_te(const hardware::Profile& p, const LayerPlan& lp,
                           const TeExportOptions& opt);

/// The keys TE reads for an entry of `method` on layer `name` (the others it ignores and the
/// export does not write).
std::vector<std::string> te_keys_read(std::string_view name, TeMethod method, bool fp8);

/// The overlap configuration as YAML (what --tp-comm-overlap-cfg reads), with a header comment;
/// each entry carries only te_keys_read.
std::string te_config_yaml(const TeExport& e);
/// The overlap configuration alone as JSON (JSON is also valid YAML for Megatron-LM's loader).
nlohmann::json te_config_json(const TeExport& e);
/// The launch settings as a bash file to source: exports and a MEGATRON_TP_ARGS array, every
/// value shell_quote'd.
std::string te_launch_script(const TeExport& e);
/// Everything: configuration, launch settings, per-layer report, notes.
nlohmann::json to_json(const TeExport& e);

}  // namespace compass::plan
