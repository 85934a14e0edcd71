#include "compass/study/accuracy.hpp"

#include <cmath>

namespace compass::study {

std::size_t fastest(const std::vector<double>& t) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i] < t[best]) best = i;
  return best;
}

double regret(const ConfigTimes& c) {
  return c.reference_s.at(c.chosen) / c.reference_s[fastest(c.reference_s)] - 1.0;
}

double abs_percentage_error(const ConfigTimes& c, std::size_t i) {
  return std::abs(c.predicted_s.at(i) - c.reference_s.at(i)) / c.reference_s[i];
}

int choice_within(const Accuracy& a, double tolerance) {
  int n = 0;
  for (double r : a.regrets)
    if (r <= tolerance) ++n;
  return n;
}

Accuracy accuracy(const std::vector<ConfigTimes>& configs) {
  Accuracy a;
  a.configs = configs.size();
  if (configs.empty()) return a;
  double sum_all = 0, regret_sum = 0;
  int points = 0;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const ConfigTimes& c = configs[i];
    for (std::size_t j = 0; j < c.reference_s.size(); ++j) {
      const double ape = abs_percentage_error(c, j);
      StrategyError* e = nullptr;
      for (StrategyError& s : a.by_strategy)
        if (s.strategy == c.strategies.at(j)) e = &s;
      if (e == nullptr) {
        a.by_strategy.push_back(StrategyError{c.strategies[j], 0, {}, 0});
        e = &a.by_strategy.back();
      }
      e->mape += ape;
      ++e->points;
      if (ape > e->worst.value) e->worst = {ape, i};
      sum_all += ape;
      ++points;
      if (ape > a.worst.value) a.worst = {ape, i};
    }
    const double r = regret(c);
    a.regrets.push_back(r);
    if (r <= kSameTime) ++a.choice_is_best;
    regret_sum += r;
    if (r > a.worst_regret.value) a.worst_regret = {r, i};
  }
  for (StrategyError& s : a.by_strategy) s.mape /= s.points;
  if (points > 0) a.mape = sum_all / points;
  a.mean_regret = regret_sum / static_cast<double>(configs.size());
  return a;
}

}  // namespace compass::study
