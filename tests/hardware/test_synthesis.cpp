// Tree patterns: valid spanning trees with full shares on every preset and on random machines,
// never below the cut bound, the synthesiser never worse than the hierarchical pattern (and the
// same when given the ring it would find), and the hand-computed a6000x8 loads.

#include <gtest/gtest.h>

#include <numeric>

#include "compass/hardware/cut_bound.hpp"
#include "compass/core/units.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/random_topology.hpp"
#include "compass/hardware/synthesis.hpp"
#include "support/builders.hpp"

namespace compass::hardware {
namespace {

// Every root's tree is the path along the ring from the root.
TreePattern chains_along(const Ring& ring) {
  TreePattern t;
  t.name = "ring";
  t.gpus = ring.order;
  const std::size_t n = ring.order.size();
  for (std::size_t i = 0; i < n; ++i) {
    BroadcastTree bt{ring.order[i], 1.0, {}};
    for (std::size_t k = 1; k < n; ++k)
      bt.edges.push_back({ring.order[(i + k - 1) % n], ring.order[(i + k) % n]});
    t.trees.push_back(std::move(bt));
  }
  return t;
}

void check_group(const Profile& p, const std::vector<int>& gpus, const std::string& what) {
  auto hier = hierarchical_pattern(p, gpus);
  auto synth = synthesize_pattern(p, gpus);
  ASSERT_TRUE(hier.ok()) << what << ": " << hier.error().message;
  ASSERT_TRUE(synth.ok()) << what << ": " << synth.error().message;
  EXPECT_TRUE(validate_pattern(*hier, gpus).ok()) << what << ": "
                                                 << validate_pattern(*hier, gpus).error().message;
  EXPECT_TRUE(validate_pattern(*synth, gpus).ok())
      << what << ": " << validate_pattern(*synth, gpus).error().message;
  auto bound = allgather_cut_bound(p, gpus, kGiB);
  ASSERT_TRUE(bound.ok());
  const double h = allgather_load_pattern(p, *hier, kGiB).time_s;
  const double s = allgather_load_pattern(p, *synth, kGiB).time_s;
  // Every byte entering a cut crosses its min-cut directions, so no pattern beats the bound.
  EXPECT_GE(h, bound->time_s * (1 - 1e-9)) << what;
  EXPECT_GE(s, bound->time_s * (1 - 1e-9)) << what;
  EXPECT_LE(s, h * (1 + 1e-9)) << what << ": the synthesiser keeps the best candidate";
  if (gpus.size() < 2) return;
  // The ring's paths are a candidate too: the synthesiser never loads its busiest direction
  // more than the ring all-gather does.
  auto ring = find_ring(p, gpus);
  ASSERT_TRUE(ring.ok()) << what;
  const double r = allgather_load_pattern(p, chains_along(*ring), kGiB).time_s;
  EXPECT_LE(s, r * (1 + 1e-9)) << what << ": the synthesiser keeps the best candidate";
  // Given the ring already found, the synthesiser and the double ring answer the same.
  auto given = synthesize_pattern(p, gpus, *ring);
  ASSERT_TRUE(given.ok()) << what;
  EXPECT_EQ(*given, *synth) << what;
  auto dr = find_double_ring(p, gpus);
  auto dr_given = find_double_ring(p, *ring);
  ASSERT_TRUE(dr.ok() && dr_given.ok()) << what;
  EXPECT_EQ(*dr_given, *dr) << what;
}

TEST(Synthesis, PresetsGiveValidPatternsAboveTheBound) {
  for (const std::string& name : preset_names()) {
    auto p = make_preset(name);
    ASSERT_TRUE(p.ok());
    for (int n = 1; n <= p->gpu_count(); ++n) check_group(*p, compass::testing::first_gpus(n), fmt::format("{} n={}", name, n));
  }
}

TEST(Synthesis, RandomMachinesGiveValidPatternsAboveTheBound) {
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    const int n = 2 + static_cast<int>(seed % 15);
    const Profile p = random_topology(seed, n);
    check_group(p, compass::testing::first_gpus(n), fmt::format("seed {} ({} GPUs)", seed, n));
  }
}

// a6000x8: a shard enters each NVLink pair once through its switch uplink and each socket once
// through the cross-socket link, so every uplink direction carries 6 shards and the pattern's
// busiest direction equals the cut bound 6S / 26 GB/s (the all-gather bound of the preset).
TEST(Synthesis, A6000HierarchicalPatternMeetsTheBound) {
  auto p = make_preset("a6000x8");
  ASSERT_TRUE(p.ok());
  auto hier = hierarchical_pattern(*p, compass::testing::first_gpus(8));
  ASSERT_TRUE(hier.ok());
  const PatternTime t = allgather_load_pattern(*p, *hier, kGiB);
  const double shard = kGiB / 8;
  EXPECT_NEAR(t.time_s, 6 * shard / 26e9, 1e-9);
  for (const HopLoad& l : t.loads) {
    if (l.name.rfind("xsocket", 0) == 0) {
      EXPECT_NEAR(l.bytes, 4 * shard, 1) << l.name;
    }
  }
}

TEST(Synthesis, ValidatePatternNamesTheFault) {
  TreePattern t;
  t.gpus = {0, 1, 2};
  t.trees.push_back({0, 1.0, {{0, 1}, {1, 2}}});
  t.trees.push_back({1, 1.0, {{1, 0}, {1, 2}}});
  t.trees.push_back({2, 1.0, {{0, 1}}});
  auto s = validate_pattern(t, t.gpus);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("GPU 0 forwards before it has the data"), std::string::npos)
      << s.error().message;
  t.trees[2] = {2, 0.5, {{2, 0}, {2, 1}}};
  s = validate_pattern(t, t.gpus);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("trees of GPU 2 carry 0.5"), std::string::npos)
      << s.error().message;
  t.trees[2].share = 1.0;
  EXPECT_TRUE(validate_pattern(t, t.gpus).ok());
}

}  // namespace
}  // namespace compass::hardware
