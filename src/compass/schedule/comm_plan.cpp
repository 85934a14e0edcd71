// comm_plan_for: the topology-aware rings of a TP group, mapped from GPU ordinals to ranks.
// Kept apart from generate.cpp so programs that only generate schedules from explicit plans do
// not pull in the ring search.

#include <algorithm>

#include "compass/hardware/rings.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::schedule {

namespace {

// Maps a ring of GPU ordinals to rank numbers (rank i runs on gpus[i]).
Result<std::vector<int>> to_ranks(const std::vector<int>& order, const std::vector<int>& gpus) {
  std::vector<int> ranks;
  for (int g : order) {
    auto it = std::find(gpus.begin(), gpus.end(), g);
    if (it == gpus.end()) return make_error("ring names GPU {}, which is not in the TP group", g);
    ranks.push_back(static_cast<int>(it - gpus.begin()));
  }
  return ranks;
}

}  // namespace

Result<CommPlan> comm_plan_for(const hardware::Profile& profile, const std::vector<int>& gpus) {
  COMPASS_TRY(hardware::validate_group(profile, gpus));
  CommPlan plan;
  plan.gpus = gpus;
  COMPASS_ASSIGN(hardware::Ring ring, hardware::find_ring(profile, gpus));
  COMPASS_ASSIGN(hardware::DoubleRing dr, hardware::find_double_ring(profile, ring));
  // CommPlan carries one ring for the one-way strategies and uses it as the first ring of the
  // double ring, so take the partner of the best ring from the double ring when it contains
  // it, else the reverse of the best ring.
  hardware::Ring second = hardware::reversed(ring);
  if (dr.first == ring) {
    second = dr.second;
  } else if (dr.second == ring) {
    second = dr.first;
  }
  COMPASS_ASSIGN(plan.ring, to_ranks(ring.order, gpus));
  COMPASS_ASSIGN(plan.ring2, to_ranks(second.order, gpus));
  int engines = 0;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const int ce = profile.gpu_device(gpus[i]).copy_engines;
    engines = i == 0 ? ce : std::min(engines, ce);
  }
  plan.copy_engines = std::max(1, engines);
  COMPASS_ASSIGN(hardware::TreePattern hier, hardware::hierarchical_pattern(profile, gpus));
  COMPASS_ASSIGN(plan.hier, tree_plan_from(profile, hier, gpus));
  COMPASS_ASSIGN(hardware::TreePattern synth, hardware::synthesize_pattern(profile, gpus, ring));
  COMPASS_ASSIGN(plan.synth, tree_plan_from(profile, synth, gpus));
  return plan;
}

}  // namespace compass::schedule
