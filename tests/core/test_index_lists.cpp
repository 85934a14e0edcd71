// Index lists keyed 0 .. n-1 in one array (core/index_lists.hpp).

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "compass/core/index_lists.hpp"

namespace compass {
namespace {

std::vector<int> list_of(const IndexLists& l, std::size_t k) {
  const auto s = l.of(k);
  return {s.begin(), s.end()};
}

TEST(IndexLists, EachKeyListsItsIndicesInTheOrderGiven) {
  const IndexLists l(4, {{2, 7}, {0, 1}, {2, 3}, {0, 9}, {2, 5}});
  EXPECT_EQ(list_of(l, 0), (std::vector<int>{1, 9}));
  EXPECT_TRUE(list_of(l, 1).empty());
  EXPECT_EQ(list_of(l, 2), (std::vector<int>{7, 3, 5}));
  EXPECT_TRUE(list_of(l, 3).empty());
  EXPECT_EQ(l.at.size(), 5u);
}

TEST(IndexLists, NoPairsGiveEmptyLists) {
  const IndexLists l(3, {});
  for (std::size_t k = 0; k < 3; ++k) EXPECT_TRUE(l.of(k).empty());
  const IndexLists none;
  EXPECT_TRUE(none.at.empty());
}

}  // namespace
}  // namespace compass
