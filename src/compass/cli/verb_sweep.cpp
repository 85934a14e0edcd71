// compass sweep [--profile P] [--grid paper] [--csv F] [--json F] [--summary] [--force]:
// every configuration of the grid, every strategy's prediction and the choice, then a summary
// (wins per strategy and speedup distributions). Without --csv/--json the table and the summary
// go to stdout; with either, the rows go to the file(s) and stdout gets the summary only
// (--summary prints only the summary too). "-" as a file name means stdout.
// With --sim every row's strategies also run on the SimGrid backend (sequentially: one forked
// simulation at a time) and the summary adds the model's accuracy against the simulation.
// --limit N / --stride S take a subset of the grid (rows 1, 1+S, ... up to N rows) for quick runs
// and tests. Rows whose tp exceeds the machine are skipped with a note.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/cli/common.hpp"
#include "compass/plan/report.hpp"
#include "compass/plan/sweep.hpp"
#include "compass/schedule/generate.hpp"

#ifdef COMPASS_WITH_SIM
#include "compass/backends/sim/simulator.hpp"
#endif

namespace compass::cli {

namespace {

struct SweepOptions {
  std::string profile = "a6000x8";
  std::string grid = "paper";
  std::string csv;
  std::string json;
  bool summary_only = false;
  bool force = false;
  bool sim = false;
  int limit = 0;   // 0: every row
  int stride = 1;  // take every stride-th row
};

using schedule::StrategyKind;

// The five candidates in OperatorChoice::estimates order.
constexpr StrategyKind kCandidates[] = {StrategyKind::sequential, StrategyKind::decompose,
                                        StrategyKind::fuse_all2all, StrategyKind::fuse_ring,
                                        StrategyKind::fuse_double_ring};
constexpr int kCandidateCount = 5;

const char* candidate_name(int i) {
  static const char* names[] = {"sequential", "decompose:d*", "fuse:all2all", "fuse:ring",
                                "fuse:double-ring"};
  return names[i];
}

// Simulated times of one sweep row: the five candidates, and decompose:4 when d* != 4.
struct SimRow {
  double sim_s[kCandidateCount] = {};
  double pred_s[kCandidateCount] = {};
  double sim_d4_s = -1;  // <0: decompose:4 infeasible
  int best = 0;          // index of the simulated fastest candidate
  int chosen = 0;        // index of the model's choice
  double regret = 0;     // sim(chosen) / sim(best) - 1
};

struct WorstCase {
  double ape = 0;
  std::size_t row = 0;
};

// Accuracy of the model against the simulation over a set of rows.
struct SimSummary {
  double mape[kCandidateCount] = {};
  WorstCase worst[kCandidateCount];
  double mape_all = 0;
  WorstCase worst_all;
  int choice_is_best = 0;         // sim(choice) == the simulated fastest (ties included)
  int choice_within_tie = 0;      // sim(choice) within the selector's tie tolerance of the best
  double mean_regret = 0;
  WorstCase worst_regret;
  plan::Distribution dring_over_a2a, ring_over_a2a, dring_over_ring, dstar_over_d4,
      choice_over_seq, simbest_over_seq;
  int a2a_slower_than_seq = 0;
};

SimSummary summarise_sim(const std::vector<SimRow>& rows) {
  SimSummary s;
  if (rows.empty()) return s;
  std::vector<double> drv, rv, drr, d4, cs, bs;
  double sum_all = 0, regret_sum = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SimRow& r = rows[i];
    for (int j = 0; j < kCandidateCount; ++j) {
      const double ape = std::abs(r.pred_s[j] - r.sim_s[j]) / r.sim_s[j];
      s.mape[j] += ape;
      sum_all += ape;
      if (ape > s.worst[j].ape) s.worst[j] = {ape, i};
      if (ape > s.worst_all.ape) s.worst_all = {ape, i};
    }
    // Candidates with equal simulated times (e.g. ring and all2all at tp 2) all count as best.
    if (r.regret <= 1e-9) ++s.choice_is_best;
    if (r.regret <= model::kTieTolerance) ++s.choice_within_tie;
    regret_sum += r.regret;
    if (r.regret > s.worst_regret.ape) s.worst_regret = {r.regret, i};
    drv.push_back(r.sim_s[2] / r.sim_s[4]);
    rv.push_back(r.sim_s[2] / r.sim_s[3]);
    drr.push_back(r.sim_s[3] / r.sim_s[4]);
    if (r.sim_d4_s > 0) d4.push_back(r.sim_d4_s / r.sim_s[1]);
    cs.push_back(r.sim_s[0] / r.sim_s[r.chosen]);
    bs.push_back(r.sim_s[0] / r.sim_s[r.best]);
    if (r.sim_s[2] > r.sim_s[0]) ++s.a2a_slower_than_seq;
  }
  const double n = static_cast<double>(rows.size());
  for (double& m : s.mape) m /= n;
  s.mape_all = sum_all / (n * kCandidateCount);
  s.mean_regret = regret_sum / n;
  s.dring_over_a2a = plan::distribution(drv);
  s.ring_over_a2a = plan::distribution(rv);
  s.dring_over_ring = plan::distribution(drr);
  s.dstar_over_d4 = plan::distribution(d4);
  s.choice_over_seq = plan::distribution(cs);
  s.simbest_over_seq = plan::distribution(bs);
  return s;
}

// A table of speedup distributions under a header line (`title`, rows, min, median, mean, max).
void print_distributions(
    const char* title,
    std::initializer_list<std::pair<const char*, const plan::Distribution*>> lines) {
  fmt::print("{:<44} {:>5} {:>7} {:>7} {:>7} {:>7}\n", title, "rows", "min", "median", "mean",
             "max");
  for (const auto& [what, d] : lines) {
    fmt::print("{:<44} {:>5} {:>6.3f}x {:>6.3f}x {:>6.3f}x {:>6.3f}x\n", what, d->count, d->min,
               d->median, d->mean, d->max);
  }
}

std::string row_label(const plan::SweepResult& r, std::size_t i) {
  const plan::SweepRow& row = r.rows[i];
  return fmt::format("{} {} {} tp{} M={}", row.entry.model, row.entry.layer,
                     workload::to_string(row.entry.op.kind), row.entry.op.tp, row.entry.op.m);
}

#ifdef COMPASS_WITH_SIM
// Simulates every row's candidates (one forked SimGrid run at a time: the machine has 2 cores
// and the simulations are CPU bound).
std::vector<SimRow> simulate_rows(const hardware::Profile& profile, const plan::SweepResult& r,
                                  bool progress) {
  namespace sim = backends::sim;
  std::map<int, schedule::CommPlan> plans;
  std::vector<SimRow> out;
  out.reserve(r.rows.size());
  sim::SimOptions opts;
  opts.busiest_links = 0;
  auto run_one = [&](const workload::OperatorSpec& op, const schedule::Strategy& st,
                     const schedule::CommPlan& plan, std::size_t i) {
    const schedule::Schedule s = unwrap(schedule::generate(op, st, plan));
    Result<sim::SimResult> res = sim::simulate(profile, s, opts);
    if (!res.ok())
      throw UsageError(fmt::format("simulating row {} ({}) under {}: {}", i + 1, row_label(r, i),
                                   schedule::to_string(st), res.error().message));
    return res.value().total_s;
  };
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const model::OperatorChoice& c = r.rows[i].choice;
    auto it = plans.find(c.op.tp);
    if (it == plans.end()) {
      std::vector<int> gpus(c.op.tp);
      for (int g = 0; g < c.op.tp; ++g) gpus[g] = g;
      it = plans.emplace(c.op.tp, unwrap(schedule::comm_plan_for(profile, gpus))).first;
    }
    SimRow row;
    for (int j = 0; j < kCandidateCount; ++j) {
      const model::Estimate& e = c.of(kCandidates[j]);
      row.pred_s[j] = e.total_s;
      row.sim_s[j] = run_one(c.op, e.strategy, it->second, i);
      if (c.choice().strategy == e.strategy) row.chosen = j;
      if (row.sim_s[j] < row.sim_s[row.best]) row.best = j;
    }
    const int dstar = c.of(StrategyKind::decompose).strategy.parts;
    if (dstar == 4)
      row.sim_d4_s = row.sim_s[1];
    else if (r.rows[i].decompose4_s > 0)
      row.sim_d4_s = run_one(c.op, schedule::Strategy{StrategyKind::decompose, 4}, it->second, i);
    row.regret = row.sim_s[row.chosen] / row.sim_s[row.best] - 1.0;
    out.push_back(row);
    if (progress) {
      fmt::print(stderr, "\rsimulate {}/{}", i + 1, r.rows.size());
      if (i + 1 == r.rows.size()) fmt::print(stderr, "\r{:24}\r", "");
    }
  }
  return out;
}
#endif

void print_sim_summary(const plan::SweepResult& r, const std::vector<SimRow>& rows) {
  const SimSummary s = summarise_sim(rows);
  const double n = static_cast<double>(rows.size());
  fmt::print("\nmodel vs simulation   {} configurations, {} strategies each\n", rows.size(),
             kCandidateCount);
  fmt::print("{:<18} {:>7} {:>8}  {}\n", "strategy", "MAPE", "worst", "worst row");
  for (int j = 0; j < kCandidateCount; ++j)
    fmt::print("{:<18} {:>6.2f}% {:>7.2f}%  {}\n", candidate_name(j), 100 * s.mape[j],
               100 * s.worst[j].ape, rows.empty() ? "-" : row_label(r, s.worst[j].row));
  fmt::print("{:<18} {:>6.2f}% {:>7.2f}%  {}\n", "overall", 100 * s.mape_all,
             100 * s.worst_all.ape, rows.empty() ? "-" : row_label(r, s.worst_all.row));
  fmt::print("choice == simulated best in {} of {} rows ({:.1f}%); within {:.1f}% of it in {} "
             "({:.1f}%)\n",
             s.choice_is_best, rows.size(), 100 * s.choice_is_best / n,
             100 * model::kTieTolerance, s.choice_within_tie, 100 * s.choice_within_tie / n);
  fmt::print("regret (sim time lost following the model): mean {:.2f}%, worst {:.2f}% ({})\n",
             100 * s.mean_regret, 100 * s.worst_regret.ape,
             rows.empty() ? "-" : row_label(r, s.worst_regret.row));
  print_distributions("simulated speedup",
                      {{"fuse:double-ring over fuse:all2all", &s.dring_over_a2a},
                       {"fuse:ring over fuse:all2all", &s.ring_over_a2a},
                       {"fuse:double-ring over fuse:ring", &s.dring_over_ring},
                       {"decompose:d* over decompose:4", &s.dstar_over_d4},
                       {"choice over sequential", &s.choice_over_seq},
                       {"simulated best over sequential", &s.simbest_over_seq}});
  fmt::print("simulated fuse:all2all slower than sequential in {} of {} rows\n",
             s.a2a_slower_than_seq, rows.size());
}

std::string sim_csv(const plan::SweepResult& r, const std::vector<SimRow>& rows) {
  std::string out =
      "row,model,layer,op,tp,m,n,k,d_star,chosen,sim_best,regret,sim_decompose4_s";
  for (int j = 0; j < kCandidateCount; ++j)
    out += fmt::format(",pred_{0}_s,sim_{0}_s", candidate_name(j));
  out += "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const plan::SweepRow& row = r.rows[i];
    const SimRow& s = rows[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{:.6g},{:.6g}", i + 1, row.entry.model,
                       row.entry.layer, workload::to_string(row.entry.op.kind), row.entry.op.tp,
                       row.entry.op.m, row.entry.op.n, row.entry.op.k, row.choice.odp.d_closed,
                       candidate_name(s.chosen), candidate_name(s.best), s.regret, s.sim_d4_s);
    for (int j = 0; j < kCandidateCount; ++j)
      out += fmt::format(",{:.6g},{:.6g}", s.pred_s[j], s.sim_s[j]);
    out += "\n";
  }
  return out;
}

nlohmann::json sim_json(const plan::SweepResult& r, const std::vector<SimRow>& rows) {
  nlohmann::json j = plan::to_json(r);
  const SimSummary s = summarise_sim(rows);
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    nlohmann::json e;
    for (int k = 0; k < kCandidateCount; ++k)
      e[candidate_name(k)] = {{"predicted_s", rows[i].pred_s[k]}, {"simulated_s", rows[i].sim_s[k]}};
    e["sim_decompose4_s"] = rows[i].sim_d4_s;
    e["chosen"] = candidate_name(rows[i].chosen);
    e["sim_best"] = candidate_name(rows[i].best);
    e["regret"] = rows[i].regret;
    list.push_back(e);
  }
  nlohmann::json acc;
  for (int k = 0; k < kCandidateCount; ++k)
    acc["mape"][candidate_name(k)] = s.mape[k];
  for (int k = 0; k < kCandidateCount; ++k)
    acc["worst_ape"][candidate_name(k)] = s.worst[k].ape;
  acc["mape_overall"] = s.mape_all;
  acc["worst_ape_overall"] = s.worst_all.ape;
  acc["choice_is_best"] = s.choice_is_best;
  acc["choice_within_tie"] = s.choice_within_tie;
  acc["mean_regret"] = s.mean_regret;
  acc["worst_regret"] = s.worst_regret.ape;
  j["sim_rows"] = list;
  j["sim_summary"] = acc;
  return j;
}

void print_rows(const plan::SweepResult& r) {
  using model::format_duration;
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
  print_distributions("speedup",
                      {{"fuse:double-ring over fuse:all2all", &s.double_ring_over_all2all},
                       {"decompose:d* over decompose:4", &s.dstar_over_d4},
                       {"decompose:d* over the worst d", &s.dstar_over_worst_d},
                       {"choice over sequential", &s.choice_over_sequential}});
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
  if (o.limit < 0) throw UsageError(fmt::format("--limit: must be >= 0, got {}", o.limit));
  if (o.stride < 1) throw UsageError(fmt::format("--stride: must be >= 1, got {}", o.stride));
  std::vector<workload::GridEntry> grid;
  std::size_t skipped = 0;
  {
    const std::vector<workload::GridEntry> all = workload::paper_grid();
    for (std::size_t i = 0; i < all.size(); i += static_cast<std::size_t>(o.stride)) {
      if (o.limit > 0 && grid.size() >= static_cast<std::size_t>(o.limit)) break;
      if (all[i].op.tp > profile.gpu_count()) {
        ++skipped;
        continue;
      }
      grid.push_back(all[i]);
    }
  }
  if (grid.empty())
    throw UsageError(fmt::format("--profile: '{}' has {} GPU(s); every selected grid row needs "
                                 "tp >= 2, so nothing can be swept",
                                 profile.name, profile.gpu_count()));
  if (skipped > 0)
    fmt::print("note: skipped {} grid rows with tp > {} (the GPUs of '{}')\n", skipped,
               profile.gpu_count(), profile.name);
#ifndef COMPASS_WITH_SIM
  if (o.sim) throw UsageError("--sim: this build has no simulator (configure with -DCOMPASS_WITH_SIM=ON)");
#endif
  const bool progress = stderr_is_terminal();
  auto report = [progress](std::size_t done, std::size_t total) {
    if (!progress) return;
    fmt::print(stderr, "\rsweep {}/{}", done, total);
    if (done == total) fmt::print(stderr, "\r{:20}\r", "");
  };
  const plan::SweepResult r = unwrap(plan::run_sweep(profile, grid, report));
  std::vector<SimRow> sim_rows;
#ifdef COMPASS_WITH_SIM
  if (o.sim) sim_rows = simulate_rows(profile, r, progress);
#endif
  if (!o.csv.empty()) emit(o.csv, o.sim ? sim_csv(r, sim_rows) : plan::sweep_csv(r), o.force);
  if (!o.json.empty())
    emit(o.json, (o.sim ? sim_json(r, sim_rows) : plan::to_json(r)).dump(2) + "\n", o.force);
  if (o.csv.empty() && o.json.empty() && !o.summary_only) print_rows(r);
  print_summary(r);
  if (o.sim) print_sim_summary(r, sim_rows);
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
  sub->add_flag("--sim", opts->sim,
                "Also simulate every row's strategies (SimGrid) and report the model's accuracy");
  sub->add_option("--limit", opts->limit, "Sweep at most this many rows (0: all)");
  sub->add_option("--stride", opts->stride, "Take every S-th grid row")->capture_default_str();
  sub->callback([opts] { run(*opts); });
}

}  // namespace compass::cli
