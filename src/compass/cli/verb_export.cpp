// compass export te [plan flags] [--fp8] [--atomic-gemm] [--format yaml|json] [--out DIR|FILE]
// [--force] [--json]: TransformerEngine's userbuffers overlap configuration for Megatron-LM's
// --tp-comm-overlap-cfg and the launch settings beside it, from Compass's plan of one layer.
// Per layer it prints the predicted time of Compass's choice, of the exported TE setting and of
// TE's defaults. --out DIR writes DIR/tp_comm_overlap.{yaml,json} and DIR/launch.sh; --out FILE
// writes FILE and the launch script beside it (FILE's extension replaced by .launch.sh).

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/model/selector.hpp"
#include "compass/plan/te_export.hpp"

namespace compass::cli {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  LayerPlanFlags layer;
  bool fp8 = false;
  bool atomic_gemm = false;
  std::string format = "yaml";
  std::string out;
  bool force = false;
  JsonOutput json;
};

struct OutputPaths {
  std::string config;  // empty: nothing written
  std::string launch;
};

OutputPaths output_paths(const ExportOptions& o) {
  if (o.out.empty()) return {};
  const std::string ext = o.format == "json" ? ".json" : ".yaml";
  const fs::path out(o.out);
  std::error_code ec;
  if (fs::is_directory(out, ec) || o.out.back() == '/') {
    if (!fs::is_directory(out, ec))
      throw UsageError(fmt::format("--out {}: no such directory", o.out));
    return {(out / ("tp_comm_overlap" + ext)).string(), (out / "launch.sh").string()};
  }
  fs::path launch = out;
  launch.replace_extension(".launch.sh");
  return {out.string(), launch.string()};
}

void print_report(const plan::TeExport& e, const OutputPaths& paths, const std::string& config) {
  using compass::format_duration;
  fmt::print("export    {} on {}, tp {}, seq {}, micro-batch {} -> TransformerEngine userbuffers\n",
             e.model, e.profile, e.tp, e.seq, e.micro_batch);
  std::string order;
  for (int g : e.device_order) order += (order.empty() ? "" : " -> ") + std::to_string(g);
  fmt::print("ring      {} (TE's rank-order ring, through CUDA_VISIBLE_DEVICES)\n\n", order);
  fmt::print("{:<11} {:<11} {:<17} {:>10}  {:<14} {:>10}  {:<14} {:>10}  {}\n", "role", "TE entry",
             "compass", "time", "exported", "time", "te-default", "time", "note");
  for (const plan::TeLayerReport& r : e.layers)
    fmt::print("{:<11} {:<11} {:<17} {:>10}  {:<14} {:>10}  {:<14} {:>10}  {}\n", r.role,
               r.te_entry, schedule::to_string(r.compass), format_duration(r.compass_s),
               r.exported, format_duration(r.exported_s), r.te_default,
               format_duration(r.te_default_s), r.exact ? "exact" : r.note);
  fmt::print("{:<11} {:<11} {:<17} {:>10}  {:<14} {:>10}  {:<14} {:>10}\n", "total", "", "",
             format_duration(e.compass_s), "", format_duration(e.exported_s), "",
             format_duration(e.te_default_s));
  fmt::print("\nTP operators of one layer: exported {} faster than TE's defaults; Compass's "
             "own choices {}\n",
             format_ratio(e.te_default_s / e.exported_s), format_ratio(e.te_default_s / e.compass_s));
  fmt::print("\nlaunch settings\n");
  for (const auto& [k, v] : e.env) fmt::print("  export {}={}\n", k, v);
  std::string args;
  for (const std::string& a : e.megatron_args) args += (args.empty() ? "" : " ") + a;
  fmt::print("  megatron-lm: {}\n", args);
  for (const std::string& n : e.notes) fmt::print("note: {}\n", n);
  if (!paths.config.empty()) {
    fmt::print("\nwrote {}\nwrote {}\n", paths.config, paths.launch);
  } else {
    fmt::print("\n{}", config);
  }
}

void run(const ExportOptions& o) {
  o.json.check_writable(o.force);
  if (o.format != "yaml" && o.format != "json")
    throw UsageError(fmt::format("--format: unknown format '{}' (expected yaml or json)", o.format));
  const PlannedLayer pl = plan_from_flags(o.layer, o.fp8 ? DType::fp8 : DType::bf16);
  const OutputPaths paths = output_paths(o);
  plan::TeExportOptions eo;
  eo.fp8 = o.fp8;
  eo.atomic_gemm = o.atomic_gemm;
  if (!paths.config.empty()) eo.config_path = paths.config;
  else if (o.format == "json") eo.config_path = "tp_comm_overlap.json";
  const plan::TeExport e = unwrap(plan::export_te(pl.profile, pl.plan, eo));
  const std::string config =
      o.format == "json" ? plan::te_config_json(e).dump(2) + "\n" : plan::te_config_yaml(e);
  // The configuration, the launch script and the JSON are written all or none.
  StagedOutputs outputs;
  if (!paths.config.empty()) {
    // Check both files before writing either, so a refusal leaves nothing half-written.
    check_outputs({{"--out", paths.config}, {"--out", paths.launch}, {"--json-out", o.json.file()}},
                  o.force);
    outputs.add(OutputFile{"--out", paths.config}, config, o.force);
    outputs.add(OutputFile{"--out", paths.launch}, plan::te_launch_script(e), o.force);
  }
  if (o.json.any()) o.json.stage(outputs, plan::to_json(e), o.force);
  outputs.commit();
  if (!o.json.to_stdout()) print_report(e, paths, config);
}

}  // namespace

void add_export_verb(CLI::App& app) {
  auto* group = app.add_subcommand(
      "export", "Export a plan in the form other tools read (te: TransformerEngine/Megatron-LM)");
  group->require_subcommand(1);
  auto opts = std::make_shared<ExportOptions>();
  auto* sub = group->add_subcommand(
      "te", "TransformerEngine tp-comm-overlap configuration and Megatron-LM launch settings");
  add_layer_plan_flags(sub, opts->layer);
  sub->add_flag("--fp8", opts->fp8, "The run uses FP8 GEMMs (plans in FP8, allows --atomic-gemm)");
  sub->add_flag("--atomic-gemm", opts->atomic_gemm,
                "Use TE's atomic GEMM overlap where its rules allow it (needs --fp8)");
  sub->add_option("--format", opts->format, "Configuration file format: yaml or json")
      ->capture_default_str();
  sub->add_option("--out", opts->out,
                  "Write the configuration and launch.sh into this directory, or the "
                  "configuration to this file and its .launch.sh beside it");
  sub->add_flag("--force", opts->force, "Overwrite existing output files");
  opts->json.add_to(sub, "the export report (configuration, launch settings, per-layer times)");
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
