#pragma once
// How well the planner's predictions match a reference (the simulator or real runs): mean
// absolute percentage error per strategy and overall, the regret of following the model, and
// how often the model's choice is the reference's best. `compass sweep --sim` and
// `compass validate` both report through this module, so they count the same way.
//
// The tie rule, the one used everywhere: the reference's best is the fastest strategy of a
// configuration, the first in candidate order among equal times; the choice counts as the
// best when its regret (reference time of the choice / best - 1) is at most kSameTime, so a
// choice that ties the best (e.g. ring and all-to-all at tp 2) counts as the best.
#include <cstddef>
#include <string>
#include <vector>

namespace compass::study {

/// Regret up to which the choice counts as the reference's best (relative; equal times).
inline constexpr double kSameTime = 1e-9;

/// One configuration: every candidate's predicted and reference time and the model's choice.
struct ConfigTimes {
  std::vector<std::string> strategies;  ///< label per candidate (groups the MAPE)
  std::vector<double> predicted_s;      ///< the model's prediction per candidate
  std::vector<double> reference_s;      ///< simulated or measured time per candidate (> 0)
  std::size_t chosen = 0;               ///< index of the model's choice
};

/// Index of the reference's fastest candidate: the first minimum. `t` must not be empty.
std::size_t fastest(const std::vector<double>& t);

/// Reference time of the choice over the reference's best, minus 1.
double regret(const ConfigTimes& c);

/// |predicted - reference| / reference of candidate i.
double abs_percentage_error(const ConfigTimes& c, std::size_t i);

/// The largest value of a metric and the configuration it came from.
struct Worst {
  double value = 0;
  std::size_t config = 0;
};

/// Mean absolute percentage error of one strategy label over every configuration.
struct StrategyError {
  std::string strategy;
  double mape = 0;
  Worst worst;  ///< largest absolute percentage error
  int points = 0;
};

struct Accuracy {
  std::size_t configs = 0;
  std::vector<StrategyError> by_strategy;  ///< in order of first appearance
  double mape = 0;                         ///< over every (configuration, candidate) point
  Worst worst;                             ///< largest absolute percentage error of any point
  int choice_is_best = 0;                  ///< configurations whose regret <= kSameTime
  double mean_regret = 0;
  Worst worst_regret;
  std::vector<double> regrets;  ///< per configuration
};

/// Configurations whose regret is at most `tolerance`.
int choice_within(const Accuracy& a, double tolerance);

/// The accuracy over a set of configurations (all zero when empty).
Accuracy accuracy(const std::vector<ConfigTimes>& configs);

}  // namespace compass::study
