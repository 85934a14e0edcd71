// compass sweep [--profile P] [--grid paper] [--csv F] [--json F] [--summary] [--force]:
// every configuration of the grid, every strategy's prediction and the choice, then a summary
// (wins per strategy and speedup distributions). Without --csv/--json the table and the summary
// go to stdout; with either, the rows go to the file(s) and stdout gets the summary only
// (--summary prints only the summary too). "-" as a file name means stdout.

#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/plan/report.hpp"
#include "compass/plan/sweep.hpp"

namespace compass::cli {

namespace {

struct SweepOptions {
  std::string profile = "a6000x8";
  std::string grid = "paper";
  std::string csv;
  std::string json;
  bool summary_only = false;
  bool force = false;
};

void print_rows(const plan::SweepResult& r) {
  using model::format_duration;
  using schedule::StrategyKind;
  fmt::print("{:>3} {:<10} {:<5} {:>3} {:>6} {:>10} {:>10} {:>3} {:>10} {:>10} {:>10} {:>10}  {}\n",
             "#", "model", "layer", "tp", "M", "sequential", "decomp:d*", "d*", "decomp:4",
             "all2all", "ring", "dbl-ring", "choice");
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const plan::SweepRow& row = r.rows[i];
    const model::OperatorChoice& c = row.choice;
    fmt::print("{:>3} {:<10} {:<5} {:>3} {:>6} {:>10} {:>10} {:>3} {:>10} {:>10} {:>10} {:>10}  {}\n",
               i + 1, row.entry.model, row.entry.layer, c.op.tp, c.op.m,
               format_duration(c.of(StrategyKind::sequential).total_s),
               format_duration(c.of(StrategyKind::decompose).total_s), c.odp.d_closed,
               row.decompose4_s > 0 ? format_duration(row.decompose4_s) : "-",
               format_duration(c.of(StrategyKind::fuse_all2all).total_s),
               format_duration(c.of(StrategyKind::fuse_ring).total_s),
               format_duration(c.of(StrategyKind::fuse_double_ring).total_s),
               schedule::to_string(c.choice().strategy));
  }
  fmt::print("\n");
}

void print_summary(const plan::SweepResult& r) {
  const plan::SweepSummary& s = r.summary;
  fmt::print("summary   {} configurations on {}\n", r.rows.size(), r.profile);
  fmt::print("wins     ");
  for (const auto& [name, n] : s.wins) fmt::print(" {} {}", name, n);
  fmt::print("\n");
  fmt::print("{:<44} {:>5} {:>7} {:>7} {:>7} {:>7}\n", "speedup", "rows", "min", "median", "mean",
             "max");
  auto line = [](const char* what, const plan::Distribution& d) {
    fmt::print("{:<44} {:>5} {:>6.3f}x {:>6.3f}x {:>6.3f}x {:>6.3f}x\n", what, d.count, d.min,
               d.median, d.mean, d.max);
  };
  line("fuse:double-ring over fuse:all2all", s.double_ring_over_all2all);
  line("decompose:d* over decompose:4", s.dstar_over_d4);
  line("decompose:d* over the worst d", s.dstar_over_worst_d);
  line("choice over sequential", s.choice_over_sequential);
  fmt::print("fuse:all2all slower than sequential in {} of {} rows\n",
             s.all2all_slower_than_sequential, r.rows.size());
  fmt::print("ODP closed form d* equals the exact argmin in {} of {} rows; gap mean {:.2f}%, "
             "max {:.2f}%\n",
             s.closed_form_is_argmin, r.rows.size(), 100 * s.odp_gap.mean, 100 * s.odp_gap.max);
}

void emit(const std::string& path, const std::string& text, bool force) {
  if (path == "-") {
    fmt::print("{}", text);
  } else {
    write_file(path, text, force);
  }
}

void run(const SweepOptions& o) {
  if (o.grid != "paper")
    throw UsageError(fmt::format("--grid: unknown grid '{}' (expected paper)", o.grid));
  const hardware::Profile profile = load_profile(o.profile);
  const std::vector<workload::GridEntry> grid = workload::paper_grid();
  const bool progress = stderr_is_terminal();
  auto report = [progress](std::size_t done, std::size_t total) {
    if (!progress) return;
    fmt::print(stderr, "\rsweep {}/{}", done, total);
    if (done == total) fmt::print(stderr, "\r{:20}\r", "");
  };
  const plan::SweepResult r = unwrap(plan::run_sweep(profile, grid, report));
  if (!o.csv.empty()) emit(o.csv, plan::sweep_csv(r), o.force);
  if (!o.json.empty()) emit(o.json, plan::to_json(r).dump(2) + "\n", o.force);
  if (o.csv.empty() && o.json.empty() && !o.summary_only) print_rows(r);
  print_summary(r);
}

}  // namespace

void add_sweep_verb(CLI::App& app) {
  auto opts = std::make_shared<SweepOptions>();
  auto* sub = app.add_subcommand(
      "sweep", "Predict and choose for every configuration of a grid (the paper's 288)");
  sub->add_option("--profile", opts->profile, "Preset name or profile JSON file")
      ->capture_default_str();
  sub->add_option("--grid", opts->grid, "Grid of operator configurations")->capture_default_str();
  sub->add_option("--csv", opts->csv, "Write every row as CSV to this file ('-' for stdout)");
  sub->add_option("--json", opts->json, "Write rows and summary as JSON to this file ('-' for stdout)");
  sub->add_flag("--summary", opts->summary_only, "Print only the summary");
  sub->add_flag("--force", opts->force, "Overwrite existing output files");
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
