#pragma once
// The simulated sweep: every row of a planned sweep has its candidate strategies run on the
// SimGrid backend, so the model's predictions can be compared with the simulation (the
// accuracy is counted by study/accuracy.hpp).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/plan/sweep.hpp"
#include "compass/schedule/strategy.hpp"
#include "compass/study/accuracy.hpp"
#include "compass/study/refine.hpp"
#include "compass/study/share.hpp"

namespace compass::study {

/// The candidates of a sweep row, in model::OperatorChoice::estimates order.
inline constexpr int kCandidateCount = 7;
inline constexpr schedule::StrategyKind kCandidates[kCandidateCount] = {
    schedule::StrategyKind::sequential,       schedule::StrategyKind::decompose,
    schedule::StrategyKind::fuse_all2all,     schedule::StrategyKind::fuse_ring,
    schedule::StrategyKind::fuse_double_ring, schedule::StrategyKind::fuse_hier,
    schedule::StrategyKind::fuse_synth};

/// "sequential", "decompose:d*", "fuse:all2all", "fuse:ring", "fuse:double-ring", "fuse:hier",
/// "fuse:synth".
const char* candidate_name(int i);

/// "llama2-13b qkv ag_gemm tp8 M=4096": row i of a sweep, for reports and errors.
std::string row_label(const plan::SweepResult& r, std::size_t i);

/// Simulated times of one sweep row: the seven candidates, and decompose:4 when d* != 4.
struct SimRow {
  double sim_s[kCandidateCount] = {};
  double pred_s[kCandidateCount] = {};
  double sim_d4_s = -1;  ///< <0: decompose:4 infeasible
  int best = 0;          ///< index of the simulated fastest candidate (study::fastest)
  int chosen = 0;        ///< index of the model's choice
  double regret = 0;     ///< sim(chosen) / sim(best) - 1
  /// max(the collective at its cut bound, the GEMM alone): the time no strategy can beat
  /// (gemm_ar: reduce-scatter plus all-gather bounds; docs/patterns.md).
  double attainable_s = 0;
  /// The double ring's collective alone (max-min flows) outlasts the GEMM.
  bool comm_bound = false;
};

/// A row as one configuration of the accuracy module.
ConfigTimes config_times(const SimRow& row);

/// Simulates the candidates of every row of `share` (all rows by default; the others are left
/// as SimRow{}), one forked SimGrid run at a time (the simulations are CPU bound), on the TP
/// group of each row: the first tp GPUs of `gpus` (GPUs 0..tp-1 when empty), as plan::run_sweep
/// planned it. `progress` (optional) is called after each row with (done, total) of the share.
/// Errors name the row and the strategy; "this build has no simulator" when the backend is not
/// compiled in.
Result<std::vector<SimRow>> simulate_sweep(
    const hardware::Profile& profile, const plan::SweepResult& r,
    const std::function<void(std::size_t, std::size_t)>& progress = {},
    const std::vector<int>& gpus = {}, const Share& share = {});

/// The model's accuracy against the simulation and the simulated speedup distributions.
struct SimSummary {
  Accuracy accuracy;           ///< MAPE per candidate (candidate order), regret, choice
  int choice_within_tie = 0;   ///< regret within the selector's tie tolerance
  plan::Distribution dring_over_a2a, ring_over_a2a, dring_over_ring, dstar_over_d4,
      choice_over_seq, simbest_over_seq;
  int a2a_slower_than_seq = 0;
  /// Comm-bound rows: best tree pattern over the double ring; attainable / sim(choice) on
  /// comm-bound rows and on all rows.
  plan::Distribution trees_over_dring_cb, attained_cb, attained_all;
  /// The accuracy had every row's choice been refined by simulation (refine_candidates and
  /// refined_pick with `refine`), and how many simulations that rule would have run.
  Accuracy refined;
  int refine_simulations = 0;
};

SimSummary summarise(const std::vector<SimRow>& rows, const RefineOptions& refine = {});

}  // namespace compass::study
