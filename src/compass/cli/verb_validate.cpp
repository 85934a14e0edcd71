// compass validate: runs a scaled-down grid for real on the CPU executor with emulated links
// and compares every strategy's measured time with the planner's prediction.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/cli/process.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/study/validation.hpp"

namespace compass::cli {
namespace {

using study::ValidateOptions;
using study::ValidateResult;

struct ValidateArgs {
  std::string backend = "cpu";
  std::string calibration;
  std::string links = "emulated:a6000x8";
  std::string link_scale = "auto";
  std::string grid = "small";
  int repeat = 3;
  int warmup = 1;
  int tp = 2;
  std::string stat = "median";
  std::string csv, plot, profile_out;
  JsonOutput json;
  ProgressFlags progress;
  bool force = false;
};

std::string csv_text(const ValidateResult& r) {
  std::string s = "config,op,m,n,k,tp,strategy,predicted_s,measured_s,error_pct,chosen,best\n";
  for (const auto& p : r.points)
    s += fmt::format("\"{}\",{},{},{},{},{},{},{:.6e},{:.6e},{:.2f},{},{}\n", p.config,
                     workload::to_string(p.op.kind), p.op.m, p.op.n, p.op.k, p.op.tp,
                     schedule::to_string(p.strategy), p.predicted_s, p.measured_s,
                     100.0 * (p.predicted_s - p.measured_s) / p.measured_s, p.chosen ? 1 : 0,
                     p.best ? 1 : 0);
  return s;
}

nlohmann::ordered_json json_of(const ValidateArgs& a, const ValidateResult& r) {
  nlohmann::ordered_json j;
  j["grid"] = a.grid;
  j["links"] = a.links;
  j["link_scale"] = r.link_scale;
  j["repeat"] = a.repeat;
  j["stat"] = a.stat;
  j["outputs_ok"] = r.outputs_ok;
  j["mape"] = r.mape;
  nlohmann::ordered_json m = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.mape_by_strategy) m[k] = v;
  j["mape_by_strategy"] = m;
  j["choice_best"] = r.choice_best;
  j["choice_within_5pct"] = r.choice_within5;
  j["mean_regret"] = r.mean_regret;
  j["worst_regret"] = r.worst_regret;
  j["mean_speedup_over_sequential"] = r.mean_speedup;
  auto configs = nlohmann::ordered_json::array();
  for (const auto& c : r.configs)
    configs.push_back({{"config", c.config},
                       {"chosen", c.chosen},
                       {"best", c.best},
                       {"chosen_s", c.chosen_s},
                       {"best_s", c.best_s},
                       {"sequential_s", c.sequential_s},
                       {"regret", c.regret}});
  j["configs"] = configs;
  auto points = nlohmann::ordered_json::array();
  for (const auto& p : r.points)
    points.push_back({{"config", p.config},
                      {"strategy", schedule::to_string(p.strategy)},
                      {"predicted_s", p.predicted_s},
                      {"measured_s", p.measured_s},
                      {"chosen", p.chosen},
                      {"best", p.best}});
  j["points"] = points;
  return j;
}

void print_table(std::FILE* out, const ValidateArgs& a, const hardware::Profile& predicted,
                 const ValidateResult& r) {
  print_to(out, "validate: grid {} ({} configurations), links {} x{:.4g}, {} of {} runs\n", a.grid,
             r.configs.size(), a.links, r.link_scale, a.stat, a.repeat);
  print_to(out, "planner profile: {}\n\n", predicted.name);
  print_to(out, "{:<34} {:<18} {:<18} {:>11} {:>11} {:>8}\n", "configuration", "chosen",
             "measured best", "chosen", "best", "regret");
  for (const auto& c : r.configs)
    print_to(out, "{:<34} {:<18} {:<18} {:>11} {:>11} {:>7.1f}%\n", c.config, c.chosen, c.best,
               format_seconds(c.chosen_s), format_seconds(c.best_s), 100 * c.regret);
  print_to(out, "\n{:<18} {:>10}\n", "strategy", "MAPE");
  for (const auto& [k, v] : r.mape_by_strategy) print_to(out, "{:<18} {:>9.1f}%\n", k, 100 * v);
  print_to(out, "{:<18} {:>9.1f}%\n\n", "all", 100 * r.mape);
  print_to(out, "choice is the measured best:      {:.0f}% of configurations\n", 100 * r.choice_best);
  print_to(out, "choice within {:.0f}% of the best:     {:.0f}%\n", 100 * study::kNearBest,
             100 * r.choice_within5);
  print_to(out, "regret of the choice:             mean {:.1f}%, worst {:.1f}%\n", 100 * r.mean_regret,
             100 * r.worst_regret);
  print_to(out, "measured speedup over sequential: {} (geometric mean)\n",
             format_ratio(r.mean_speedup));
  print_to(out, "outputs match the FP64 reference: {}\n", r.outputs_ok ? "yes" : "NO");
}

// The PNG of the predicted-vs-measured plot (the script writes it into a private directory,
// and the bytes come back to be written atomically like every other output).
std::string plot_png(const ValidateResult& r) {
  const std::string script = find_script("plot_validate.py", "tools/plot_validate.py", "--plot");
  const std::string python = python_with_matplotlib("--plot");
  const PrivateTempDir dir = unwrap(PrivateTempDir::create());
  const std::string csv = unwrap(dir.write("validate.csv", csv_text(r)));
  const std::string png = dir.path() + "/validate.png";
  const int rc = unwrap(run_program({python, script, csv, png}, false));
  if (rc != 0)
    throw UsageError(fmt::format("--plot: {} {} failed (exit code {})", python, script, rc));
  std::ifstream in(png, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in || bytes.str().empty())
    throw UsageError(fmt::format("--plot: {} wrote no plot", script));
  return bytes.str();
}

void run_validate(const ValidateArgs& a) {
  if (a.backend != "cpu")
    throw UsageError(
        fmt::format("--backend: unknown backend '{}' (validate supports cpu)", a.backend));
  check_run_counts(a.repeat, a.warmup);
  if (a.tp < 2) throw UsageError(fmt::format("--tp: must be at least 2, got {}", a.tp));
  const std::string links = parse_links_option(a.links);
  const std::optional<double> scale = parse_link_scale(a.link_scale);
  if (a.json.to_stdout() && a.csv == "-")
    throw UsageError("--json and --csv - both want stdout; write one of them to a file");
  const std::vector<OutputFile> outputs = {{"--csv", a.csv},
                                           {"--json-out", a.json.file()},
                                           {"--plot", a.plot},
                                           {"--profile-out", a.profile_out}};
  check_outputs(outputs, a.force);
  const hardware::Profile topology = load_profile(links);
  const hardware::Profile calibrated = unwrap(hardware::load_profile_file(a.calibration));
  if (calibrated.calibration.gemm.empty())
    throw UsageError(
        fmt::format("--calibration: '{}' has no GEMM table (run compass calibrate --backend cpu)",
                    a.calibration));
  if (a.tp > topology.gpu_count())
    throw UsageError(
        fmt::format("--tp: {} exceeds the {} GPUs of '{}'", a.tp, topology.gpu_count(), links));
  const auto grid = unwrap(study::validation_grid(a.grid, a.tp));
  ValidateOptions o;
  o.repeat = a.repeat;
  o.warmup = a.warmup;
  if (a.stat != "median" && a.stat != "min")
    throw UsageError(fmt::format("--stat: expected median or min, got '{}'", a.stat));
  o.use_min = a.stat == "min";
  o.link_scale = scale ? *scale : study::auto_link_scale(grid, topology, calibrated);
  const hardware::Profile predicted = study::emulated_profile(topology, calibrated, o.link_scale);
  unwrap(hardware::validate(predicted));
  ProgressBar bar("validating", a.progress);
  if (bar.enabled()) o.progress = [&bar](double f) { bar.update(f); };
  const ValidateResult r = unwrap(study::run_validation(grid, topology, predicted, o));
  bar.finish();
  // Every output is written after the runs it describes, all of them or none. With
  // '-' or --json, stdout carries that output alone and the table goes to stderr.
  const bool stdout_data = a.json.to_stdout() || writes_stdout(outputs);
  print_table(stdout_data ? stderr : stdout, a, predicted, r);
  StagedOutputs staged;
  if (!a.csv.empty()) staged.add(outputs[0], csv_text(r), a.force);
  if (a.json.any()) a.json.stage(staged, json_of(a, r), a.force);
  if (!a.plot.empty()) staged.add(outputs[2], plot_png(r), a.force);
  if (!a.profile_out.empty())
    staged.add(outputs[3], hardware::profile_to_json(predicted), a.force);
  staged.commit();
}

}  // namespace

void add_validate_verb(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  auto* sub = app.add_subcommand(
      "validate",
      "Run a scaled grid for real (CPU executor, emulated links) and compare with the planner");
  sub->add_option("--backend", args->backend, "cpu")->capture_default_str();
  sub->add_option("--calibration", args->calibration,
                  "profile written by compass calibrate --backend cpu")
      ->required();
  sub->add_option("--links", args->links,
                  "emulated:<preset|file>: the machine whose links to emulate")
      ->capture_default_str();
  sub->add_option("--link-scale", args->link_scale,
                  "factor on every link bandwidth, or auto (GPU/CPU GEMM time ratio)")
      ->capture_default_str();
  sub->add_option("--grid", args->grid, "small (4 configurations) or paper-scaled")
      ->capture_default_str();
  sub->add_option("--tp", args->tp, "ranks (match the calibration's concurrency)")
      ->transform(positive_tp())
      ->capture_default_str();
  add_integer_option(sub, "--repeat", args->repeat, "timed runs per strategy (median)", 1, kMaxRuns)
      ->capture_default_str();
  sub->add_option("--stat", args->stat,
                  "median or min of the repeats (min: the runs other processes disturbed least)")
      ->capture_default_str();
  add_integer_option(sub, "--warmup", args->warmup, "untimed runs first", 0, kMaxRuns)
      ->capture_default_str();
  add_output_option(sub, "--csv", args->csv,
                    "write every (configuration, strategy) point as CSV ('-' for stdout)");
  args->json.add_to(sub, "the results", JsonOutput::Spelling::flag_or_file);
  add_output_option(sub, "--plot", args->plot,
                    "write a predicted-vs-measured PNG (python3-matplotlib)");
  add_output_option(sub, "--profile-out", args->profile_out,
                    "write the planner's profile of the emulated machine (for compass op/plan)");
  sub->add_flag("--force", args->force, "overwrite output files");
  add_progress_flags(sub, args->progress);
  sub->callback([args] { run_validate(*args); });
}

}  // namespace compass::cli
