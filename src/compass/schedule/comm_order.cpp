#include "compass/schedule/comm_order.hpp"

#include <cstddef>

namespace compass::schedule {

int all2all_peer(int r, int k, int p) { return ((r + k) % p + p) % p; }

int all2all_source(int r, int k, int p) { return ((r - k) % p + p) % p; }

int all2all_engine(int k, int engines) { return (k - 1) % engines; }

std::vector<int> ring_positions(const std::vector<int>& ring) {
  std::vector<int> pos(ring.size(), -1);
  for (std::size_t i = 0; i < ring.size(); ++i) pos[static_cast<std::size_t>(ring[i])] = static_cast<int>(i);
  return pos;
}

}  // namespace compass::schedule
