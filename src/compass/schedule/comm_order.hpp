#pragma once
// The communication orders the generators emit, as functions the model reads too: who an
// all-to-all push goes to and on which copy engine, and where each rank sits on a ring. One
// home for these facts, so the estimate and the schedule cannot follow different patterns.

#include <vector>

namespace compass::schedule {

/// All-to-all: the rank that rank r's k-th push goes to (k = 1..p-1): r + k mod p.
int all2all_peer(int r, int k, int p);

/// All-to-all: the rank whose push reaches rank r as its k-th (k = 1..p-1): r - k mod p. Ranks
/// consume the chunks of r - 1, r - 2, ... in this order.
int all2all_source(int r, int k, int p);

/// All-to-all: the copy engine of a rank's k-th push (k = 1..p-1) with `engines` copy engines:
/// (k - 1) mod engines. Each engine runs its pushes in increasing k.
int all2all_engine(int k, int engines);

/// Position of each rank on a ring given as rank order: pos[ring[i]] = i (ring must list the
/// ranks 0..ring.size()-1 once each).
std::vector<int> ring_positions(const std::vector<int>& ring);

}  // namespace compass::schedule
