#pragma once
// Compares an export with a published TransformerEngine userbuffers preset (NVIDIA's NeMo /
// Megatron-Bridge presets, kept as facts in tests/data/te_presets): entry by entry, what the
// two configurations set differently, and operator by operator, both priced on the same plan
// with the export's pricing (te_model.hpp, docs/te-export.md).

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compass/plan/te_export.hpp"

namespace compass::plan {

/// A preset as TE would receive it: its entries with TE's defaults filled in where the preset
/// leaves a key (or a whole entry) out, and what it was tuned for.
struct TePreset {
  std::string name;
  std::string source;  ///< "repo path@commit line N"
  std::string gpu, dtype;
  int tp = 0, cp = 1, micro_batch = 1;
  std::int64_t hidden = 0, seq = 0;
  std::vector<TeEntry> entries;  ///< the ten layers of te_layer_names(), the rs-dgrad layout's
                                 ///< wgrad entries dropped
};

/// Reads a preset file's JSON (fields name, source, gpu, dtype, tp, cp, micro_batch, hidden,
/// seq, layers); `fallback_name` names it when the file has no name. A truthy non-boolean
/// fp8_buf (a one-element list) counts as true, as TE reads it. Errors name the field.
Result<TePreset> parse_te_preset(const nlohmann::json& j, const std::string& fallback_name);

/// One TE entry: how the export and the preset set it, and the keys they set differently.
struct TeEntryDiff {
  std::string name;
  std::string compass;  ///< "pipeline:4 sm16 margin", "bulk sm4", "ring_exchange", "-"
  std::string preset;
  std::vector<std::string> differences;  ///< "method ring_exchange vs pipeline", ...
};

/// One Compass operator priced under both configurations.
struct TeRoleDiff {
  std::string role;
  std::string compass;  ///< the export's setting
  double compass_s = 0;
  std::string preset;   ///< the preset's setting for this operator
  double preset_s = 0;
};

struct TeComparison {
  TePreset preset;
  std::vector<TeEntryDiff> entries;
  std::vector<TeRoleDiff> roles;
  double compass_s = 0, preset_s = 0;  ///< sums over the layer's TP operators
  std::vector<std::string> notes;
};

/// Prices `preset` on `lp` (planned on `p`) the way export_te prices its own settings and sets
/// it beside `ex` (export_te's result for the same plan). Errors: the preset's tp differs from
/// the plan's, its configuration breaks a rule of validate_te_config for this run.
Result<TeComparison> compare_te(const hardware::Profile& p, const LayerPlan& lp,
                                const TeExport& ex, const TePreset& preset);

/// The comparison as JSON (entries, roles with both times and the difference, totals).
nlohmann::json to_json(const TeComparison& c);

}  // namespace compass::plan
