#pragma once
// A study's items shared among the processes of one job (`mpirun -np N compass sweep --sim`):
// process r of N does the items i with i mod N = r, and the results travel to rank 0 as the
// bytes of trivially copyable values, so that rank 0 holds exactly what one process computes.

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "compass/core/result.hpp"

namespace compass::study {

/// Which items this process does: i mod size == rank. The default is one process doing all.
struct Share {
  int rank = 0;
  int size = 1;
  bool mine(std::size_t i) const {
    return static_cast<int>(i % static_cast<std::size_t>(size)) == rank;
  }
};

/// The items of `s` among `items`, in order, as bytes.
template <class T>
std::string pack_share(const std::vector<T>& items, const Share& s) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i)
    if (s.mine(i)) out.append(reinterpret_cast<const char*>(&items[i]), sizeof(T));
  return out;
}

/// `n` items put back together from every rank's pack_share (index = rank). Errors when a
/// rank's bytes are not its share of `n` items (it did something else).
template <class T>
Result<std::vector<T>> unpack_shares(const std::vector<std::string>& ranks, std::size_t n) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> out(n);
  const int size = static_cast<int>(ranks.size());
  for (int r = 0; r < size; ++r) {
    const Share s{r, size};
    std::size_t count = 0;
    for (std::size_t i = 0; i < n; ++i) count += s.mine(i) ? 1 : 0;
    const std::string& bytes = ranks[static_cast<std::size_t>(r)];
    if (bytes.size() != count * sizeof(T))
      return make_error("rank {} sent {} bytes where its {} results take {}", r, bytes.size(),
                        count, count * sizeof(T));
    std::size_t k = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (s.mine(i)) std::memcpy(&out[i], bytes.data() + sizeof(T) * k++, sizeof(T));
  }
  return out;
}

}  // namespace compass::study
