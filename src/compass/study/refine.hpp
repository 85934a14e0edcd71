#pragma once
// Refining the model's choice by simulation: where the model's best candidates are within a
// margin of each other, the planner simulates them (SimGrid backend) and keeps the one that
// simulates fastest. `compass plan --refine sim` plans this way; `compass sweep --sim` reports
// what the rule would have chosen on every row (docs/results.md).
#include <cstddef>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/model/selector.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::study {

struct RefineOptions {
  /// Candidates predicted within this fraction of the model's best are simulated.
  double margin = 0.10;
  /// At most this many candidates (the model's best first) are simulated.
  std::size_t max_candidates = 3;
};

/// Checks the options: margin finite and in [0, 10], max_candidates in 1..16.
Status check(const RefineOptions& o);

/// The candidates the rule simulates, given the model's predicted time per candidate and its
/// pick: the pick first, then every other candidate predicted within (1 + margin) x the
/// fastest prediction, in predicted order (ties keep candidate order), at most max_candidates
/// in all. A single index means nothing to simulate.
std::vector<std::size_t> refine_candidates(const std::vector<double>& predicted_s,
                                           std::size_t model_choice, const RefineOptions& o);

/// The candidate the rule picks among `candidates` from their simulated times
/// (`simulated_s[i]` for candidate `candidates[i]`): the fastest, the first on equal times.
std::size_t refined_pick(const std::vector<std::size_t>& candidates,
                         const std::vector<double>& simulated_s);

/// The simulated time of `op` under `strategy` on `plan` of `machine` (the schedule
/// generate_for gives, run by the SimGrid backend). Errors: a build without SimGrid, a schedule
/// that cannot be generated (its message), a simulation that fails ("simulating: " and its
/// message).
Result<double> simulated_time_s(const hardware::Profile& machine, const workload::OperatorSpec& op,
                                const schedule::Strategy& strategy,
                                const schedule::CommPlan& plan);

/// What refining one operator did.
struct RefinedOp {
  std::vector<std::size_t> simulated;  ///< estimate indices simulated (empty: none needed)
  std::vector<double> simulated_s;     ///< their simulated times
  std::size_t model_choice = 0;        ///< the model's pick (estimate index)
  std::size_t refined_choice = 0;      ///< the pick after simulation
  bool changed() const { return refined_choice != model_choice; }
};

/// Simulates the candidates of `choice` (an operator planned on `plan` of `profile`) and moves
/// choice.chosen to the simulated fastest, with a reason that says so. Errors: no simulator in
/// this build, a schedule that cannot be generated or simulated (naming the strategy).
Result<RefinedOp> refine_choice(const hardware::Profile& profile, model::OperatorChoice& choice,
                                const schedule::CommPlan& plan, const RefineOptions& o);

}  // namespace compass::study
