#include "compass/core/format.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace compass {
namespace {

TEST(Format, RatiosAndDurations) {
  EXPECT_EQ(format_ratio(1.2704), "1.270x");
  EXPECT_EQ(format_ratio(12.5, 2), "12.50x");
  EXPECT_EQ(format_duration(0.0045678, 3), "4.568 ms");
  EXPECT_EQ(format_duration(12.3e-6), "12.3 us");
}

TEST(Format, NonFiniteIsNotApplicableNeverNan) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const double zero = 0.0;
  EXPECT_EQ(format_ratio(nan), "n/a");
  EXPECT_EQ(format_ratio(-nan), "n/a");
  EXPECT_EQ(format_ratio(zero / zero), "n/a");
  EXPECT_EQ(format_ratio(1.0 / zero), "n/a");
  EXPECT_EQ(format_ratio(-inf), "n/a");
  EXPECT_EQ(format_duration(nan), "n/a");
  EXPECT_EQ(format_duration(inf, 3), "n/a");
}

}  // namespace
}  // namespace compass
