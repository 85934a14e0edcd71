// The earliest of n changing times (core/tournament.hpp), against a scan in index order.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compass/core/tournament.hpp"

namespace compass {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// What a scan in index order keeping the first strictly earlier time picks (a NaN never
// compares earlier, and a NaN kept first is passed by any number).
std::size_t scan_earliest(const std::vector<double>& t) {
  std::size_t best = 0;
  double best_t = kInf;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double ti = std::isnan(t[i]) ? kInf : t[i];
    if (ti < best_t) {
      best = i;
      best_t = ti;
    }
  }
  return best;
}

TEST(EarliestTime, StartsAtInfinityWithTheFirstIndex) {
  for (std::size_t n : {1u, 2u, 5u, 8u}) {
    const EarliestTime e(n);
    EXPECT_EQ(e.index(), 0u) << n;
    EXPECT_EQ(e.time(), kInf) << n;
    for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(e.at(i), kInf);
  }
}

TEST(EarliestTime, TiesGoToTheLowestIndex) {
  EarliestTime e(5);
  e.set(3, 2.0);
  e.set(4, 2.0);
  EXPECT_EQ(e.index(), 3u);
  e.set(1, 2.0);
  EXPECT_EQ(e.index(), 1u);
  e.set(1, 3.0);
  EXPECT_EQ(e.index(), 3u);
  EXPECT_EQ(e.time(), 2.0);
}

TEST(EarliestTime, ANotANumberCountsAsInfinity) {
  EarliestTime e(3);
  e.set(0, std::numeric_limits<double>::quiet_NaN());
  e.set(2, 1.0);
  EXPECT_EQ(e.index(), 2u);
  EXPECT_EQ(e.at(0), kInf);
  e.set(2, kInf);
  EXPECT_EQ(e.time(), kInf);
}

TEST(EarliestTime, AgreesWithAScanThroughRandomChanges) {
  std::mt19937 rng(7);
  for (std::size_t n : {1u, 2u, 3u, 7u, 8u, 9u, 33u}) {
    EarliestTime e(n);
    std::vector<double> t(n, kInf);
    std::uniform_int_distribution<std::size_t> pick(0, n - 1);
    std::uniform_int_distribution<int> value(0, 6);  // few values: many ties
    for (int step = 0; step < 2000; ++step) {
      const std::size_t i = pick(rng);
      const int v = value(rng);
      t[i] = v == 6 ? kInf : v == 5 ? std::numeric_limits<double>::quiet_NaN() : v;
      e.set(i, t[i]);
      ASSERT_EQ(e.index(), scan_earliest(t)) << "n=" << n << " step " << step;
      const double want = std::isnan(t[scan_earliest(t)]) ? kInf : t[scan_earliest(t)];
      ASSERT_EQ(e.time(), want);
    }
  }
}

}  // namespace
}  // namespace compass
