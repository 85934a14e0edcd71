#pragma once
// The selector: predicts every strategy of one operator and picks the fastest, "sequential"
// included; near-ties go to the simpler strategy. Explains its choice in one line.

#include <string>
#include <vector>

#include "compass/model/estimate.hpp"
#include "compass/model/odp.hpp"

namespace compass::model {

/// Estimates within this fraction of the fastest count as tied (model noise is larger).
inline constexpr double kTieTolerance = 0.005;

/// Index of the chosen estimate: among those within (1 + tie_tolerance) x the fastest, the one
/// with the lowest schedule::simplicity_rank, then the fastest. `estimates` must not be empty.
std::size_t select_fastest(const std::vector<Estimate>& estimates,
                           double tie_tolerance = kTieTolerance);

/// Every strategy's prediction for one operator and the choice.
struct OperatorChoice {
  workload::OperatorSpec op;
  OdpResult odp;
  /// sequential, decompose:d* (closed form), fuse:all2all, fuse:ring, fuse:double-ring.
  std::vector<Estimate> estimates;
  std::size_t chosen = 0;
  std::string reason;  ///< one line, e.g. "fuse:double-ring: comm 2.1 ms hidden under GEMM ..."

  const Estimate& choice() const { return estimates.at(chosen); }
  /// The estimate of a strategy kind (the decompose entry for StrategyKind::decompose).
  const Estimate& of(schedule::StrategyKind k) const;
};

/// What choose_strategy works out beyond every strategy's total time and the choice.
enum class Breakdown {
  all,      ///< every strategy's breakdown, and the reason
  chosen,   ///< the chosen strategy's compute and communication alone (estimate_without_split:
            ///< no split of the rest), fuse:all2all's congestion, and the reason
  compute,  ///< the chosen strategy's compute alone (its total's evaluation again, a memo hit
            ///< for the fused strategies); no communication, congestion or reason
  none,     ///< nothing more: no breakdown, no congestion, an empty reason
};

/// Predicts and chooses, memoising through `caches`; estimates without a breakdown carry
/// total_s alone. The choice and every total_s are the same under every `breakdown`. Errors:
/// invalid op or plan.
Result<OperatorChoice> choose_strategy(const hardware::Profile& p, const workload::OperatorSpec& op,
                                       const schedule::CommPlan& plan, Caches& caches,
                                       Breakdown breakdown = Breakdown::all);
/// The same with caches of its own (a cold start).
Result<OperatorChoice> choose_strategy(const hardware::Profile& p, const workload::OperatorSpec& op,
                                       const schedule::CommPlan& plan,
                                       Breakdown breakdown = Breakdown::all);

/// The one-line explanation of estimates[chosen].
std::string explain_choice(const std::vector<Estimate>& estimates, std::size_t chosen);


}  // namespace compass::model
