// compass export te [plan flags] [--fp8] [--atomic-gemm] [--first-last-layers-bf16] [--cp N]
// [--format yaml|json] [--out DIR|FILE|-] [--force] [--json]: TransformerEngine's userbuffers
// overlap configuration for Megatron-LM's --tp-comm-overlap-cfg and the launch settings beside
// it, from Compass's plan of one layer. Per layer it prints the predicted time of Compass's
// choice, of the exported TE setting and of TE's defaults. Without --out, stdout carries that
// report only; --out DIR writes DIR/tp_comm_overlap.{yaml,json} and DIR/launch.sh; --out FILE
// writes FILE and the launch script beside it (FILE's extension replaced by .launch.sh), both
// naming the configuration by its absolute path; --out - prints the configuration alone on
// stdout (the report goes to stderr).

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "compass/cli/common.hpp"
#include "compass/core/json_text.hpp"
#include "compass/job/cluster.hpp"
#include "compass/model/selector.hpp"
#include "compass/plan/te_compare.hpp"
#include "compass/plan/te_export.hpp"
#include "compass/workload/layer_ops.hpp"

namespace compass::cli {

namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  LayerPlanFlags layer;
  std::string cluster;  // plan on this cluster's node instead of --profile
  bool fp8 = false;
  bool atomic_gemm = false;
  bool first_last_layers_bf16 = false;
  bool delay_wgrad_compute = false;
  int cp = 1;
  std::string compare;
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
  if (o.out == "-") return {"-", ""};
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

// Where the human report goes: stderr when stdout carries the configuration.
std::FILE* report_stream(const OutputPaths& paths) {
  return paths.config == "-" ? stderr : stdout;
}

void print_report(const plan::TeExport& e, const OutputPaths& paths) {
  using compass::format_duration;
  std::string out = fmt::format(
      "export    {} on {}, tp {}{}, seq {}, micro-batch {} -> TransformerEngine userbuffers\n",
      e.model, e.profile, e.tp, e.cp > 1 ? fmt::format(", cp {}", e.cp) : "", e.seq,
      e.micro_batch);
  for (std::size_t i = 0; i < e.groups.size(); ++i) {
    std::string order;
    for (int g : e.groups[i]) order += (order.empty() ? "" : " -> ") + std::to_string(g);
    out += fmt::format("ring      {} (TP group {}: TE's rank-order ring, through "
                       "CUDA_VISIBLE_DEVICES)\n",
                       order, i);
  }
  out += fmt::format("\n{:<11} {:<11} {:<17} {:>10}  {:<14} {:>10}  {:<14} {:>10}  {}\n", "role",
                     "TE entry", "compass", "time", "exported", "time", "te-default", "time",
                     "note");
  for (const plan::TeLayerReport& r : e.layers)
    out += fmt::format("{:<11} {:<11} {:<17} {:>10}  {:<14} {:>10}  {:<14} {:>10}  {}\n", r.role,
                       r.te_entry, schedule::to_string(r.compass), format_duration(r.compass_s),
                       r.exported, format_duration(r.exported_s), r.te_default,
                       format_duration(r.te_default_s), r.exact ? "exact" : r.note);
  out += fmt::format("{:<11} {:<11} {:<17} {:>10}  {:<14} {:>10}  {:<14} {:>10}\n", "total", "",
                     "", format_duration(e.compass_s), "", format_duration(e.exported_s), "",
                     format_duration(e.te_default_s));
  out += fmt::format("\nTP operators of one layer: exported {} faster than TE's defaults; "
                     "Compass's own choices {}\n",
                     format_ratio(e.te_default_s / e.exported_s),
                     format_ratio(e.te_default_s / e.compass_s));
  out += "\nlaunch settings\n";
  for (const auto& [k, v] : e.env) out += fmt::format("  export {}={}\n", k, plan::shell_quote(v));
  std::string args;
  for (const std::string& a : e.megatron_args)
    args += (args.empty() ? "" : " ") + plan::shell_quote(a);
  out += fmt::format("  megatron-lm: {}\n", args);
  for (const std::string& r : e.requirements) out += fmt::format("requires: {}\n", r);
  for (const std::string& n : e.notes) out += fmt::format("note: {}\n", n);
  if (paths.config.empty())
    out += "\nconfiguration not written: --out DIR writes it with launch.sh, --out - prints it "
           "alone on stdout\n";
  else if (paths.config != "-")
    out += fmt::format("\nwrote {}\nwrote {}\n", paths.config, paths.launch);
  std::FILE* f = report_stream(paths);
  if (std::fwrite(out.data(), 1, out.size(), f) != out.size() || std::fflush(f) != 0)
    throw UsageError(fmt::format("cannot write the report to {}",
                                 f == stdout ? "stdout" : "stderr"));
}

// The preset --compare names: a file, or a name in tests/data/te_presets (in the source tree
// around the binary, or share/compass/te_presets of an installation).
plan::TePreset load_preset(const std::string& what) {
  std::error_code ec;
  std::string path = what;
  if (!fs::exists(path, ec)) {
    if (what.find('/') != std::string::npos || what.empty())
      throw UsageError(fmt::format("--compare {}: no such file", what));
    path = find_script("te_presets/" + what + ".json", "tests/data/te_presets/" + what + ".json",
                       "--compare");
  }
  if (!fs::is_regular_file(path, ec))
    throw UsageError(fmt::format("--compare {}: not a regular file", path));
  constexpr std::uintmax_t kMaxBytes = 1 << 20;
  const auto size = fs::file_size(path, ec);
  if (ec || size > kMaxBytes)
    throw UsageError(fmt::format("--compare {}: {}", path,
                                 ec ? ec.message() : "larger than 1 MiB, not a preset"));
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  if (!f) throw UsageError(fmt::format("--compare {}: cannot read it", path));
  const nlohmann::json j = unwrap(parse_json_text(text.str(), "--compare " + path));
  return unwrap(plan::parse_te_preset(j, fs::path(path).stem().string()));
}

void print_comparison(const plan::TeComparison& c) {
  using compass::format_duration;
  std::string out = fmt::format("compare   compass export vs preset {}\n", c.preset.name);
  if (!c.preset.source.empty()) out += fmt::format("source    {}\n", c.preset.source);
  out += fmt::format("tuned for {} {}, hidden {}, tp {}, cp {}, micro-batch {}, seq {}\n\n",
                     c.preset.gpu, c.preset.dtype, c.preset.hidden, c.preset.tp, c.preset.cp,
                     c.preset.micro_batch, c.preset.seq);
  out += fmt::format("{:<11} {:<34} {:<34} {}\n", "TE entry", "compass", "preset", "differs in");
  for (const plan::TeEntryDiff& d : c.entries) {
    std::string diffs;
    for (const std::string& x : d.differences) diffs += (diffs.empty() ? "" : "; ") + x;
    out += fmt::format("{:<11} {:<34} {:<34} {}\n", d.name, d.compass, d.preset,
                       diffs.empty() ? "same" : diffs);
  }
  out += fmt::format("\n{:<11} {:<22} {:>10}  {:<38} {:>10}  {:>11}\n", "role", "compass", "time",
                     "preset", "time", "preset-comp");
  for (const plan::TeRoleDiff& r : c.roles)
    out += fmt::format("{:<11} {:<22} {:>10}  {:<38} {:>10}  {:>11}\n", r.role, r.compass,
                       format_duration(r.compass_s), r.preset, format_duration(r.preset_s),
                       (r.preset_s >= r.compass_s ? "+" : "-") +
                           format_duration(std::abs(r.preset_s - r.compass_s)));
  out += fmt::format("{:<11} {:<22} {:>10}  {:<38} {:>10}  {:>11}\n", "total", "",
                     format_duration(c.compass_s), "", format_duration(c.preset_s),
                     (c.preset_s >= c.compass_s ? "+" : "-") +
                         format_duration(std::abs(c.preset_s - c.compass_s)));
  for (const std::string& n : c.notes) out += fmt::format("note: {}\n", n);
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    throw UsageError("cannot write the comparison to stdout");
}

void run(const ExportOptions& o) {
  o.json.check_writable(o.force);
  if (o.format != "yaml" && o.format != "json")
    throw UsageError(fmt::format("--format: unknown format '{}' (expected yaml or json)", o.format));
  if (o.cp < 1) throw UsageError(fmt::format("--cp {}: must be at least 1", o.cp));
  // Megatron-LM splits each sequence into 2 x cp chunks for context parallelism; TE's buffers
  // and the TP operators hold seq / cp tokens per rank.
  LayerPlanFlags layer = o.layer;
  if (o.cp > 1) {
    if (!workload::check_context_split(layer.seq, o.cp).ok())
      throw UsageError(fmt::format("--cp {}: --seq {} is not divisible by 2 x cp = {} (Megatron-LM "
                                   "splits each sequence into 2 x cp chunks)",
                                   o.cp, layer.seq, 2 * o.cp));
    layer.seq /= o.cp;
  }
  const OutputPaths paths = output_paths(o);
  if (paths.config == "-" && o.json.to_stdout())
    throw UsageError("--out - and --json both write to stdout; use --json-out FILE for the report");
  const DType dtype = o.fp8 ? DType::fp8 : DType::bf16;
  const PlannedLayer pl =
      o.cluster.empty()
          ? plan_from_flags(layer, dtype)
          : plan_from_flags(layer, unwrap(job::resolve_cluster(o.cluster)).node, dtype);
  plan::TeExportOptions eo;
  eo.fp8 = o.fp8;
  eo.atomic_gemm = o.atomic_gemm;
  eo.first_last_layers_bf16 = o.first_last_layers_bf16;
  eo.delay_wgrad_compute = o.delay_wgrad_compute;
  eo.cp = o.cp;
  if (!paths.config.empty() && paths.config != "-") {
    std::error_code ec;
    const fs::path abs = fs::absolute(paths.config, ec);
    eo.config_path = (ec ? fs::path(paths.config) : abs).lexically_normal().string();
  } else if (o.format == "json") {
    eo.config_path = "tp_comm_overlap.json";
  }
  const plan::TeExport e = unwrap(plan::export_te(pl.profile, pl.plan, eo));
  if (!o.compare.empty()) {
    if (!paths.config.empty())
      throw UsageError("--compare prints a comparison and writes no files; drop --out");
    const plan::TePreset preset = load_preset(o.compare);
    const plan::TeComparison c = unwrap(plan::compare_te(pl.profile, pl.plan, e, preset));
    if (o.json.any()) o.json.emit(plan::to_json(c), o.force);
    if (!o.json.to_stdout()) print_comparison(c);
    return;
  }
  const std::string config =
      o.format == "json" ? plan::te_config_json(e).dump(2) + "\n" : plan::te_config_yaml(e);
  // The configuration, the launch script and the JSON are written all or none.
  StagedOutputs outputs;
  if (paths.config == "-") {
    check_outputs({{"--out", "-"}, {"--json-out", o.json.file()}}, o.force);
    outputs.add(OutputFile{"--out", "-"}, config, o.force);
  } else if (!paths.config.empty()) {
    // Check both files before writing either, so a refusal leaves nothing half-written.
    check_outputs({{"--out", paths.config}, {"--out", paths.launch}, {"--json-out", o.json.file()}},
                  o.force);
    outputs.add(OutputFile{"--out", paths.config}, config, o.force);
    outputs.add(OutputFile{"--out", paths.launch}, plan::te_launch_script(e), o.force);
  }
  if (o.json.any()) o.json.stage(outputs, plan::to_json(e), o.force);
  outputs.commit();
  if (!o.json.to_stdout()) print_report(e, paths);
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
  sub->add_option("--cluster", opts->cluster,
                  "Plan on the node of this cluster instead of --profile: a built-in cluster, a "
                  "cluster JSON file or a machine profile, as 'compass search --cluster' takes it")
      ->excludes(sub->get_option("--profile"));
  sub->add_flag("--fp8", opts->fp8, "The run uses FP8 GEMMs (plans in FP8, allows --atomic-gemm)");
  sub->add_flag("--atomic-gemm", opts->atomic_gemm,
                "Use TE's atomic GEMM overlap where its rules allow it (needs --fp8)");
  sub->add_flag("--first-last-layers-bf16", opts->first_last_layers_bf16,
                "Megatron-LM keeps the first and last layers in BF16 (needs --fp8): the "
                "data-gradient entries stay bulk and nothing is atomic");
  sub->add_flag("--delay-wgrad-compute", opts->delay_wgrad_compute,
                "Refused with the reason: TE does not run it beside the bulk wgrad overlap");
  add_integer_option(sub, "--cp", opts->cp,
                     "Context-parallel size: TE's buffers and the TP operators hold seq / cp "
                     "tokens",
                     1, 1024)
      ->capture_default_str();
  sub->add_option("--compare", opts->compare,
                  "Print, TE entry by entry and operator by operator, where the export differs "
                  "from a published userbuffers preset (a name from tests/data/te_presets, or a "
                  "preset JSON file) and the predicted time difference");
  sub->add_option("--format", opts->format, "Configuration file format: yaml or json")
      ->capture_default_str();
  sub->add_option("--out", opts->out,
                  "Write the configuration and launch.sh into this directory, or the "
                  "configuration to this file and its .launch.sh beside it; - prints the "
                  "configuration alone on stdout");
  sub->add_flag("--force", opts->force, "Overwrite existing output files");
  opts->json.add_to(sub, "the export report (configuration, launch settings, per-layer times)");
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
