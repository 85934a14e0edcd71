#pragma once
// The sweep: every operator configuration of a grid (the paper's 288 by default), every
// strategy's prediction, the choice, and a summary of wins and speedup distributions.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"
#include "compass/model/selector.hpp"
#include "compass/workload/layer_ops.hpp"

namespace compass::plan {

struct SweepRow {
  workload::GridEntry entry;
  model::OperatorChoice choice;
  double decompose4_s = 0;  ///< decompose:4 (the TransformerEngine default); <0 if infeasible
  int worst_d = 1;          ///< the slowest feasible degree
  double worst_d_s = 0;
};

/// min / median / mean / max of a set of ratios.
struct Distribution {
  int count = 0;
  double min = 0, median = 0, mean = 0, max = 0;
};
/// The distribution of `values` (all zero when empty).
Distribution distribution(std::vector<double> values);

struct SweepSummary {
  std::map<std::string, int> wins;  ///< chosen strategy kind ("decompose" for any d) -> rows
  Distribution double_ring_over_all2all;  ///< t(fuse:all2all) / t(fuse:double-ring)
  Distribution trees_over_double_ring;    ///< t(fuse:double-ring) / t(best of fuse:hier, fuse:synth)
  Distribution trees_over_all2all;        ///< t(fuse:all2all) / t(best of fuse:hier, fuse:synth)
  Distribution dstar_over_d4;             ///< t(decompose:4) / t(decompose:d*)
  Distribution dstar_over_worst_d;        ///< t(decompose:worst) / t(decompose:d*)
  Distribution choice_over_sequential;    ///< t(sequential) / t(choice)
  Distribution odp_gap;                   ///< t(d*) / t(argmin) - 1
  int all2all_slower_than_sequential = 0; ///< rows where fuse:all2all > sequential
  int closed_form_is_argmin = 0;          ///< rows where d* == the exact argmin
};

struct SweepResult {
  std::string profile;
  std::vector<SweepRow> rows;
  SweepSummary summary;
};

/// Plans every entry with the topology-aware comm plan of its TP group: the first tp GPUs of
/// `gpus` (GPUs 0..tp-1 of `p` when empty). An operator that recurs is planned once. The
/// distinct operators are planned on `threads` workers (0: one per hardware thread; the rows do
/// not depend on it): the calling thread plans through `caches`, the others through caches of
/// their own. `progress` (optional) is called on the calling thread once per operator, in
/// order, with (planned, to plan), as the calling thread sees them done.
/// With `explain`, every row also carries its chosen strategy's breakdown and the reason
/// (model::Breakdown::chosen, what to_json prints); without, every strategy's total and the
/// choice alone (model::Breakdown::none: the table, the CSV and the summary need no more), the
/// same totals and choices.
/// Errors: an entry whose tp exceeds the machine or the group, or whose shapes are invalid (the
/// error names the first such row).
Result<SweepResult> run_sweep(const hardware::Profile& p,
                              const std::vector<workload::GridEntry>& grid, model::Caches& caches,
                              const std::function<void(std::size_t, std::size_t)>& progress = {},
                              const std::vector<int>& gpus = {}, int threads = 0,
                              bool explain = true);
/// The same with caches of its own (a cold start).
Result<SweepResult> run_sweep(const hardware::Profile& p,
                              const std::vector<workload::GridEntry>& grid,
                              const std::function<void(std::size_t, std::size_t)>& progress = {},
                              const std::vector<int>& gpus = {}, int threads = 0,
                              bool explain = true);

/// The summary of a set of rows.
SweepSummary summarise(const std::vector<SweepRow>& rows);

}  // namespace compass::plan
