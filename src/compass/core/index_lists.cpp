#include "compass/core/index_lists.hpp"

namespace compass {

IndexLists::IndexLists(std::size_t n, const std::vector<std::pair<int, int>>& pairs)
    : begin(n + 1, 0) {
  for (const auto& kv : pairs) ++begin[static_cast<std::size_t>(kv.first) + 1];
  for (std::size_t k = 0; k < n; ++k) begin[k + 1] += begin[k];
  std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
  at.resize(pairs.size());
  for (const auto& kv : pairs) at[next[static_cast<std::size_t>(kv.first)]++] = kv.second;
}

}  // namespace compass
