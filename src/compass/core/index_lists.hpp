#pragma once
// Lists of indices keyed 0 .. n-1, all in one array: who waits for what in a program, without a
// vector per key.
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace compass {

/// Index lists keyed 0..n-1 in one array (key k: at[begin[k]] .. at[begin[k + 1] - 1]), each
/// in the order its (key, index) pairs were given.
struct IndexLists {
  std::vector<std::size_t> begin{0};
  std::vector<int> at;
  IndexLists() = default;
  /// Keys must be in 0 .. n-1.
  IndexLists(std::size_t n, const std::vector<std::pair<int, int>>& pairs);
  std::span<const int> of(std::size_t k) const {
    return {at.data() + begin[k], at.data() + begin[k + 1]};
  }
};

}  // namespace compass
