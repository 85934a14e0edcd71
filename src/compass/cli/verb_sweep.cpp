// compass sweep [--profile P] [--grid paper] [--gpus LIST] [--csv F] [--json | --json-out F]
// [--summary] [--force]: every configuration of the grid, every strategy's prediction and the
// choice, then a summary (wins per strategy and speedup distributions). Without files the table
// and the summary go to stdout; with --csv F or --json-out F the rows go to the file(s) and
// stdout gets the summary only (--summary prints only the summary too). --json (or --csv -)
// puts the data alone on stdout. Only the JSON explains each row's choice (its reason, from the
// chosen strategy's breakdown), so only a sweep that writes JSON works the breakdowns out.
// With --sim every row's strategies also run on the SimGrid backend (sequentially: one forked
// simulation at a time) and the summary adds the model's accuracy against the simulation.
// --limit N / --stride S take a subset of the grid (rows 1, 1+S, ... up to N rows) for quick runs
// and tests. Rows whose tp exceeds the machine are skipped with a note.
// --profiles a,b,c (with --sim) sweeps every listed machine and prints one table: per profile
// the rows, MAPE, how often the choice is the simulated best, mean and worst regret, and which
// accuracy targets it misses.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/cli/spread.hpp"
#include "compass/plan/report.hpp"
#include "compass/plan/sweep.hpp"
#include "compass/backends/sim/simulator.hpp"
#include "compass/study/sim_sweep.hpp"

namespace compass::cli {

namespace {

struct SweepOptions {
  std::string profile = "a6000x8";
  int fault_rank = -1;  // testing: under mpirun this rank fails
  std::string profiles;  // comma-separated: one accuracy table over several machines
  std::string grid = "paper";
  std::string csv;
  JsonOutput json;
  std::string gpus;  // TP groups: the first tp GPUs of this list
  ProgressFlags progress;
  bool summary_only = false;
  bool force = false;
  bool sim = false;
  int limit = 0;   // 0: every row
  int stride = 1;  // take every stride-th row
  int threads = 0; // planning workers (0: one per hardware thread)
};

using schedule::StrategyKind;
using study::candidate_name;
using study::kCandidateCount;
using study::row_label;
using study::SimRow;

// A table of speedup distributions under a header line (`title`, rows, min, median, mean, max).
void print_distributions(
    std::FILE* out, const char* title,
    std::initializer_list<std::pair<const char*, const plan::Distribution*>> lines) {
  print_to(out, "{:<44} {:>5} {:>7} {:>7} {:>7} {:>7}\n", title, "rows", "min", "median", "mean",
             "max");
  for (const auto& [what, d] : lines) {
    if (d->count == 0) {  // no rows: no statistics to show
      print_to(out, "{:<44} {:>5} {:>7} {:>7} {:>7} {:>7}\n", what, 0, "-", "-", "-", "-");
      continue;
    }
    print_to(out, "{:<44} {:>5} {:>7} {:>7} {:>7} {:>7}\n", what, d->count,
               format_ratio(d->min), format_ratio(d->median), format_ratio(d->mean),
               format_ratio(d->max));
  }
}

void print_sim_summary(std::FILE* out, const plan::SweepResult& r, const std::vector<SimRow>& rows) {
  const study::SimSummary s = study::summarise(rows);
  const study::Accuracy& a = s.accuracy;
  const double n = static_cast<double>(rows.size());
  print_to(out, "\nmodel vs simulation   {} configurations, {} strategies each\n", rows.size(),
             kCandidateCount);
  print_to(out, "{:<18} {:>7} {:>8}  {}\n", "strategy", "MAPE", "worst", "worst row");
  for (int j = 0; j < kCandidateCount; ++j) {
    const study::StrategyError e =
        rows.empty() ? study::StrategyError{} : a.by_strategy[static_cast<std::size_t>(j)];
    print_to(out, "{:<18} {:>6.2f}% {:>7.2f}%  {}\n", candidate_name(j), 100 * e.mape,
               100 * e.worst.value, rows.empty() ? "-" : row_label(r, e.worst.config));
  }
  print_to(out, "{:<18} {:>6.2f}% {:>7.2f}%  {}\n", "overall", 100 * a.mape, 100 * a.worst.value,
             rows.empty() ? "-" : row_label(r, a.worst.config));
  print_to(out, "choice == simulated best in {} of {} rows ({:.1f}%); within {:.1f}% of it in {} "
             "({:.1f}%)\n",
             a.choice_is_best, rows.size(), 100 * a.choice_is_best / n,
             100 * model::kTieTolerance, s.choice_within_tie, 100 * s.choice_within_tie / n);
  print_to(out, "regret (sim time lost following the model): mean {:.2f}%, worst {:.2f}% ({})\n",
             100 * a.mean_regret, 100 * a.worst_regret.value,
             rows.empty() ? "-" : row_label(r, a.worst_regret.config));
  print_distributions(out, "simulated speedup",
                      {{"fuse:double-ring over fuse:all2all", &s.dring_over_a2a},
                       {"fuse:ring over fuse:all2all", &s.ring_over_a2a},
                       {"fuse:double-ring over fuse:ring", &s.dring_over_ring},
                       {"decompose:d* over decompose:4", &s.dstar_over_d4},
                       {"choice over sequential", &s.choice_over_seq},
                       {"simulated best over sequential", &s.simbest_over_seq}});
  print_to(out, "simulated fuse:all2all slower than sequential in {} of {} rows\n",
             s.a2a_slower_than_seq, rows.size());
  print_distributions(out, "tree patterns, simulated",
                      {{"best tree pattern over dbl-ring, comm-bound", &s.trees_over_dring_cb},
                       {"share of attainable speedup, comm-bound", &s.attained_cb},
                       {"share of attainable speedup, all rows", &s.attained_all}});
  const study::RefineOptions ro;
  print_to(out, "with plan --refine sim (candidates within {:.0f}%, at most {}): choice == "
             "simulated best in {} of {} rows ({:.1f}%); regret mean {:.2f}%, worst {:.2f}%; "
             "{} simulations ({:.1f} per row)\n",
             100 * ro.margin, ro.max_candidates, s.refined.choice_is_best, rows.size(),
             100 * s.refined.choice_is_best / n, 100 * s.refined.mean_regret,
             100 * s.refined.worst_regret.value, s.refine_simulations,
             static_cast<double>(s.refine_simulations) / n);
}

std::string sim_csv(const plan::SweepResult& r, const std::vector<SimRow>& rows) {
  std::string out =
      "row,model,layer,op,tp,m,n,k,d_star,chosen,sim_best,regret,sim_decompose4_s";
  for (int j = 0; j < kCandidateCount; ++j)
    out += fmt::format(",pred_{0}_s,sim_{0}_s", candidate_name(j));
  out += ",attainable_s,comm_bound\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const plan::SweepRow& row = r.rows[i];
    const SimRow& s = rows[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g}", i + 1, row.entry.model,
                       row.entry.layer, workload::to_string(row.entry.op.kind), row.entry.op.tp,
                       row.entry.op.m, row.entry.op.n, row.entry.op.k, row.choice.odp.d_closed,
                       candidate_name(s.chosen), candidate_name(s.best), s.regret, s.sim_d4_s);
    for (int j = 0; j < kCandidateCount; ++j)
      out += fmt::format(",{:.6g},{:.6g}", s.pred_s[j], s.sim_s[j]);
    out += fmt::format(",{:.6g},{}\n", s.attainable_s, s.comm_bound ? 1 : 0);
  }
  return out;
}

nlohmann::json sim_json(const plan::SweepResult& r, const std::vector<SimRow>& rows) {
  nlohmann::json j = plan::to_json(r);
  const study::SimSummary s = study::summarise(rows);
  const study::Accuracy& a = s.accuracy;
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    nlohmann::json e;
    for (int k = 0; k < kCandidateCount; ++k)
      e[candidate_name(k)] = {{"predicted_s", rows[i].pred_s[k]}, {"simulated_s", rows[i].sim_s[k]}};
    e["sim_decompose4_s"] = rows[i].sim_d4_s;
    e["chosen"] = candidate_name(rows[i].chosen);
    e["sim_best"] = candidate_name(rows[i].best);
    e["regret"] = rows[i].regret;
    e["attainable_s"] = rows[i].attainable_s;
    e["comm_bound"] = rows[i].comm_bound;
    list.push_back(e);
  }
  nlohmann::json acc;
  auto of = [&](int k) {
    return rows.empty() ? study::StrategyError{} : a.by_strategy[static_cast<std::size_t>(k)];
  };
  for (int k = 0; k < kCandidateCount; ++k) acc["mape"][candidate_name(k)] = of(k).mape;
  for (int k = 0; k < kCandidateCount; ++k) acc["worst_ape"][candidate_name(k)] = of(k).worst.value;
  acc["mape_overall"] = a.mape;
  acc["worst_ape_overall"] = a.worst.value;
  acc["choice_is_best"] = a.choice_is_best;
  acc["choice_within_tie"] = s.choice_within_tie;
  acc["mean_regret"] = a.mean_regret;
  acc["worst_regret"] = a.worst_regret.value;
  j["sim_rows"] = list;
  j["sim_summary"] = acc;
  return j;
}

void print_rows(std::FILE* out, const plan::SweepResult& r) {
  using compass::format_duration;
  print_to(
      out,
      "{:>3} {:<10} {:<5} {:>3} {:>6} {:>10} {:>10} {:>3} {:>10} {:>10} {:>10} {:>10} {:>10} "
      "{:>10}  {}\n",
      "#", "model", "layer", "tp", "M", "sequential", "decomp:d*", "d*", "decomp:4", "all2all",
      "ring", "dbl-ring", "hier", "synth", "choice");
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const plan::SweepRow& row = r.rows[i];
    const model::OperatorChoice& c = row.choice;
    print_to(
        out,
        "{:>3} {:<10} {:<5} {:>3} {:>6} {:>10} {:>10} {:>3} {:>10} {:>10} {:>10} {:>10} {:>10} "
        "{:>10}  {}\n",
               i + 1, row.entry.model, row.entry.layer, c.op.tp, c.op.m,
               format_duration(c.of(StrategyKind::sequential).total_s),
               format_duration(c.of(StrategyKind::decompose).total_s), c.odp.d_closed,
               row.decompose4_s > 0 ? format_duration(row.decompose4_s) : "-",
               format_duration(c.of(StrategyKind::fuse_all2all).total_s),
               format_duration(c.of(StrategyKind::fuse_ring).total_s),
               format_duration(c.of(StrategyKind::fuse_double_ring).total_s),
               format_duration(c.of(StrategyKind::fuse_hier).total_s),
               format_duration(c.of(StrategyKind::fuse_synth).total_s),
               schedule::to_string(c.choice().strategy));
  }
  print_to(out, "\n");
}

void print_summary(std::FILE* out, const plan::SweepResult& r) {
  const plan::SweepSummary& s = r.summary;
  print_to(out, "summary   {} configurations on {}\n", r.rows.size(), r.profile);
  print_to(out, "wins     ");
  for (const auto& [name, n] : s.wins) print_to(out, " {} {}", name, n);
  print_to(out, "\n");
  print_distributions(out, "speedup",
                      {{"fuse:double-ring over fuse:all2all", &s.double_ring_over_all2all},
                       {"best tree pattern over fuse:double-ring", &s.trees_over_double_ring},
                       {"best tree pattern over fuse:all2all", &s.trees_over_all2all},
                       {"decompose:d* over decompose:4", &s.dstar_over_d4},
                       {"decompose:d* over the worst d", &s.dstar_over_worst_d},
                       {"choice over sequential", &s.choice_over_sequential}});
  print_to(out, "fuse:all2all slower than sequential in {} of {} rows\n",
             s.all2all_slower_than_sequential, r.rows.size());
  print_to(out, "ODP closed form d* equals the exact argmin in {} of {} rows; gap mean {:.2f}%, "
             "max {:.2f}%\n",
             s.closed_form_is_argmin, r.rows.size(), 100 * s.odp_gap.mean, 100 * s.odp_gap.max);
}

// The grid rows of --limit/--stride whose tp fits `group_limit` GPUs, and how many were skipped.
std::pair<std::vector<workload::GridEntry>, std::size_t> select_grid(const SweepOptions& o,
                                                                     const hardware::Profile& profile,
                                                                     int group_limit) {
  std::vector<workload::GridEntry> grid;
  std::size_t skipped = 0;
  const std::vector<workload::GridEntry> all = workload::paper_grid();
  for (std::size_t i = 0; i < all.size(); i += static_cast<std::size_t>(o.stride)) {
    if (o.limit > 0 && grid.size() >= static_cast<std::size_t>(o.limit)) break;
    if (all[i].op.tp > group_limit) {
      ++skipped;
      continue;
    }
    grid.push_back(all[i]);
  }
  if (grid.empty())
    throw UsageError(fmt::format("--profile: '{}' has {} GPU(s); every selected grid row needs "
                                 "tp >= 2, so nothing can be swept",
                                 profile.name, profile.gpu_count()));
  return {std::move(grid), skipped};
}

void check_options(const SweepOptions& o) {
  if (o.grid != "paper")
    throw UsageError(fmt::format("--grid: unknown grid '{}' (expected paper)", o.grid));
  if (o.limit < 0) throw UsageError(fmt::format("--limit: must be >= 0, got {}", o.limit));
  if (o.stride < 1) throw UsageError(fmt::format("--stride: must be >= 1, got {}", o.stride));
  if (o.threads < 0) throw UsageError(fmt::format("--threads: must be >= 0, got {}", o.threads));
}

// The simulated rows of `r`: under mpirun each rank simulates its share and rank 0 gets them
// all (the other ranks get an empty vector).
std::vector<SimRow> simulate_rows(const hardware::Profile& profile, const plan::SweepResult& r,
                                  const std::vector<int>& gpus, const std::string& label,
                                  const ProgressFlags& progress, Spread& spread) {
  const study::Share share = spread.share();
  std::vector<SimRow> mine;
  {
    ProgressBar bar(label, spread.progress(progress));
    mine = unwrap(study::simulate_sweep(
        profile, r,
        [&bar](std::size_t done, std::size_t total) {
          bar.update(static_cast<double>(done) / static_cast<double>(total), done, total);
        },
        gpus, share));
  }
  const std::vector<std::string> all = spread.gather(study::pack_share(mine, share));
  if (!spread.root()) return {};
  return unwrap(study::unpack_shares<SimRow>(all, r.rows.size()));
}

// Under mpirun every rank plans the grid (it is quick) and simulates its share of the rows;
// rank 0 alone prints and writes.
void run(const SweepOptions& o, Spread& spread) {
  check_options(o);
  const hardware::Profile profile = load_profile(o.profile);
  std::vector<int> gpus;
  if (!o.gpus.empty()) gpus = select_group(profile, 0, o.gpus);
  const int group_limit = gpus.empty() ? profile.gpu_count() : static_cast<int>(gpus.size());
  // Machine-readable output on stdout leaves no room for anything else there.
  const bool stdout_data = o.json.to_stdout() || o.csv == "-";
  if (o.json.to_stdout() && o.csv == "-")
    throw UsageError("--json and --csv - both want stdout; write one of them to a file");
  if (spread.root()) {
    o.json.check_writable(o.force);
    check_outputs({{"--csv", o.csv}, {"--json-out", o.json.file()}}, o.force);
  }
  const auto [grid, skipped] = select_grid(o, profile, group_limit);
  if (skipped > 0 && spread.root())
    print_to(stdout_data ? stderr : stdout,
               "note: skipped {} grid rows with tp > {} (the GPUs of {})\n", skipped, group_limit,
               gpus.empty() ? fmt::format("'{}'", profile.name) : "--gpus");
  if (o.sim && !backends::sim::compiled_in())
    throw UsageError("--sim: this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  plan::SweepResult r;
  {
    ProgressBar bar("planning", spread.progress(o.progress));
    auto report = [&bar](std::size_t done, std::size_t total) {
      bar.update(static_cast<double>(done) / static_cast<double>(total), done, total);
    };
    // Only the JSON prints each row's reason (and with it the chosen strategy's breakdown).
    const bool explain = o.json.any();
    r = unwrap(plan::run_sweep(profile, grid, report, gpus, o.threads, explain));
  }
  std::vector<SimRow> sim_rows;
  if (o.sim) sim_rows = simulate_rows(profile, r, gpus, "simulating", o.progress, spread);
  if (!spread.root()) return;
  // The CSV and the JSON are written together or not at all.
  StagedOutputs outputs;
  if (!o.csv.empty())
    outputs.add({"--csv", o.csv}, o.sim ? sim_csv(r, sim_rows) : plan::sweep_csv(r), o.force);
  if (o.json.any())
    o.json.stage(outputs, o.sim ? sim_json(r, sim_rows) : plan::to_json(r), o.force);
  outputs.commit();
  if (stdout_data) return;
  if (o.csv.empty() && !o.json.any() && !o.summary_only) print_rows(stdout, r);
  print_summary(stdout, r);
  if (o.sim) print_sim_summary(stdout, r, sim_rows);
}

// Accuracy targets of the model against the simulation (docs/results.md).
constexpr double kTargetMape = 0.03;
constexpr double kTargetChoice = 0.97;
constexpr double kTargetMeanRegret = 0.005;
constexpr double kTargetWorstRegret = 0.05;

// --profiles: one accuracy row per machine.
void run_many(const SweepOptions& o, Spread& spread) {
  check_options(o);
  if (!o.sim) throw UsageError("--profiles: needs --sim (the table compares model and simulation)");
  if (!backends::sim::compiled_in())
    throw UsageError("--sim: this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
  if (!o.csv.empty() || o.json.any())
    throw UsageError("--profiles: --csv and --json are for one profile (use --profile)");
  std::vector<std::string> names;
  for (std::size_t pos = 0; pos <= o.profiles.size();) {
    const std::size_t comma = std::min(o.profiles.find(',', pos), o.profiles.size());
    const std::string name = o.profiles.substr(pos, comma - pos);
    if (name.empty()) throw UsageError(fmt::format("--profiles: empty item in '{}'", o.profiles));
    names.push_back(name);
    pos = comma + 1;
  }
  // Load and check every machine before the long part.
  std::vector<hardware::Profile> profiles;
  for (const std::string& n : names) {
    profiles.push_back(load_profile(n));
    select_grid(o, profiles.back(), profiles.back().gpu_count());
  }
  if (spread.root())
    out("{:<22} {:>5} {:>7} {:>12} {:>12} {:>13}  {:>8} {:>8}  {}\n", "profile", "rows", "MAPE",
        "choice=best", "mean regret", "worst regret", "refined", "r.worst", "targets missed");
  for (const hardware::Profile& profile : profiles) {
    const auto [grid, skipped] = select_grid(o, profile, profile.gpu_count());
    plan::SweepResult r;
    std::vector<SimRow> rows;
    {
      ProgressBar bar(fmt::format("{}: planning", profile.name), spread.progress(o.progress));
      r = unwrap(plan::run_sweep(
          profile, grid,
          [&bar](std::size_t done, std::size_t total) {
            bar.update(static_cast<double>(done) / static_cast<double>(total), done, total);
          },
          {}, o.threads, /*explain=*/false));
    }
    rows = simulate_rows(profile, r, {}, fmt::format("{}: simulating", profile.name),
                         o.progress, spread);
    if (!spread.root()) continue;
    const study::SimSummary summary = study::summarise(rows);
    const study::Accuracy& a = summary.accuracy;
    const double choice = rows.empty() ? 0.0 : static_cast<double>(a.choice_is_best) / rows.size();
    const double refined_choice =
        rows.empty() ? 0.0 : static_cast<double>(summary.refined.choice_is_best) / rows.size();
    std::string missed;
    auto miss = [&](bool ok, const char* what) {
      if (!ok) missed += fmt::format("{}{}", missed.empty() ? "" : ", ", what);
    };
    miss(a.mape <= kTargetMape, "MAPE");
    miss(choice >= kTargetChoice, "choice");
    miss(a.mean_regret <= kTargetMeanRegret, "mean regret");
    miss(a.worst_regret.value <= kTargetWorstRegret, "worst regret");
    out("{:<22} {:>5} {:>6.2f}% {:>11.1f}% {:>11.2f}% {:>12.2f}%  {:>7.1f}% {:>7.2f}%  {}\n",
               profile.name, rows.size(), 100 * a.mape, 100 * choice, 100 * a.mean_regret,
               100 * a.worst_regret.value, 100 * refined_choice,
               100 * summary.refined.worst_regret.value, missed.empty() ? "none" : missed);
    std::fflush(stdout);
  }
  if (!spread.root()) return;
  out("refined, r.worst: choice = simulated best and worst regret had plan --refine sim "
             "been used (model targets are judged without it)\n");
  out("targets: MAPE <= {:.0f}%, choice = simulated best >= {:.0f}%, mean regret <= "
             "{:.1f}%, worst regret <= {:.0f}%\n",
             100 * kTargetMape, 100 * kTargetChoice, 100 * kTargetMeanRegret,
             100 * kTargetWorstRegret);
}

}  // namespace

void add_sweep_verb(CLI::App& app) {
  auto opts = std::make_shared<SweepOptions>();
  auto* sub = app.add_subcommand(
      "sweep", "Predict and choose for every configuration of a grid (the paper's 288)");
  auto* one = sub->add_option("--profile", opts->profile, "Preset name or profile JSON file")
                  ->capture_default_str();
  sub->add_option("--profiles", opts->profiles,
                  "Comma-separated presets or files: one accuracy table (needs --sim)")
      ->excludes(one);
  sub->add_option("--grid", opts->grid, "Grid of operator configurations")->capture_default_str();
  add_output_option(sub, "--csv", opts->csv, "Write every row as CSV to this file ('-' for stdout)");
  opts->json.add_to(sub, "rows (each with the reason for its choice) and summary",
                    JsonOutput::Spelling::flag_or_file);
  sub->add_option("--gpus", opts->gpus,
                  "GPUs to place TP groups on: a row of degree tp uses the first tp of them")
      ->check(nonempty_gpus());
  sub->add_flag("--summary", opts->summary_only, "Print only the summary");
  sub->add_flag("--force", opts->force, "Overwrite existing output files");
  add_progress_flags(sub, opts->progress);
  sub->add_flag("--sim", opts->sim,
                "Also simulate every row's strategies (SimGrid) and report the model's accuracy");
  add_integer_option(sub, "--limit", opts->limit, "Sweep at most this many rows (0: all)", 0);
  add_integer_option(sub, "--stride", opts->stride, "Take every S-th grid row", 1)->capture_default_str();
  add_integer_option(sub, "--threads", opts->threads,
                     "Threads planning the grid (0: one per hardware thread; the rows do not "
                     "depend on it)",
                     0, kMaxThreads)
      ->capture_default_str();
  add_integer_option(sub, "--fault-rank", opts->fault_rank,
                     "testing: under mpirun this rank fails before its share of the work", -1)
      ->group("");
  sub->callback([opts, sub] {
    const std::unique_ptr<Spread> spread = Spread::join(*sub);
    spread->run([&] {
      spread->inject_fault(opts->fault_rank);
      if (opts->profiles.empty())
        run(*opts, *spread);
      else
        run_many(*opts, *spread);
    });
  });
}

}  // namespace compass::cli
