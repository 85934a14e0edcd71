// How many workers a parallel loop runs on.

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "compass/core/workers.hpp"

namespace compass {
namespace {

TEST(Workers, AskedWorkersAtMostOnePerTask) {
  EXPECT_EQ(worker_count(3, 10), 3u);
  EXPECT_EQ(worker_count(8, 5), 5u);
  EXPECT_EQ(worker_count(1, 1), 1u);
}

TEST(Workers, NoneWhenThereIsNothingToDo) {
  EXPECT_EQ(worker_count(4, 0), 0u);
  EXPECT_EQ(worker_count(0, 0), 0u);
}

TEST(Workers, ZeroAsksForOnePerHardwareThread) {
  const std::size_t hw = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(worker_count(0, 1000), std::min<std::size_t>(hw, 1000));
  EXPECT_EQ(worker_count(0, 1), 1u);
}

}  // namespace
}  // namespace compass
