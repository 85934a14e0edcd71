// Cut lower bounds: hand-computed small machines, the a6000x8 preset, p2p-off staging, the
// inexact path beyond 16 GPUs, and "no pattern beats the bound" on random machines.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "compass/hardware/cut_bound.hpp"
#include "compass/core/units.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/random_topology.hpp"
#include "compass/hardware/rings.hpp"
#include "support/builders.hpp"

namespace compass::hardware {
namespace {

// n GPUs, each on its own link (fwd GPU->switch `up`, reverse `down`) to one switch.
Profile star(int n, double up, double down) {
  Profile p;
  p.name = "star";
  DeviceSpec d;
  d.name = "g";
  p.devices.push_back(d);
  for (int i = 0; i < n; ++i) p.nodes.push_back(Node{fmt::format("gpu{}", i), NodeKind::gpu, "g"});
  p.nodes.push_back(Node{"sw", NodeKind::pcie_switch, ""});
  for (int i = 0; i < n; ++i)
    p.links.push_back(Link{fmt::format("l{}", i), LinkKind::pcie, i, n, up, down, 0, false, ""});
  EXPECT_TRUE(compute_missing_routes(p).ok());
  return p;
}

TEST(CutBound, TwoGpusOneLink) {
  Profile p = star(2, 10 * kGB, 10 * kGB);
  CutBound b = allgather_cut_bound(p, {0, 1}, 2e9).value();
  // Each GPU owns 1 GB and must send it over its 10 GB/s link: 0.1 s.
  EXPECT_NEAR(b.time_s, 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(b.bytes, 1e9);
  EXPECT_DOUBLE_EQ(b.capacity_bytes_per_s, 10 * kGB);
  EXPECT_TRUE(b.exact);
  EXPECT_EQ(b.cut_hops.size(), 1u);
}

TEST(CutBound, StarIsNMinusOneShardsIntoOneGpu) {
  // Into one GPU: (n-1) shards over its down link; out of one GPU: 1 shard over its up link.
  Profile p = star(5, 20 * kGB, 10 * kGB);
  const double total = 5e9;  // 1 GB per rank
  CutBound b = allgather_cut_bound(p, compass::testing::first_gpus(5), total).value();
  EXPECT_NEAR(b.time_s, 4 * 1e9 / (10 * kGB), 1e-12);
  EXPECT_EQ(b.subset.size(), 4u);  // the four GPUs sending into the fifth
  ASSERT_EQ(b.cut_hops.size(), 1u);
  EXPECT_EQ(b.cut_hops[0], p.hop_name(Hop{4, false}));  // first in mask order: into gpu4
  // Reduce-scatter reverses the directions: (n-1) partial shards out of one GPU over `up`.
  CutBound r = reduce_scatter_cut_bound(p, compass::testing::first_gpus(5), total).value();
  EXPECT_NEAR(r.time_s, 4 * 1e9 / (20 * kGB), 1e-12);
  // ... but here `up` is the wide direction; swap them and the RS bound binds on 10 GB/s.
  Profile q = star(5, 10 * kGB, 20 * kGB);
  EXPECT_NEAR(reduce_scatter_cut_bound(q, compass::testing::first_gpus(5), total).value().time_s, 4 * 1e9 / (10 * kGB),
              1e-12);
}

TEST(CutBound, MaxFlowThroughSwitchesAndForwardingGpus) {
  // a6000x8: into NVLink pair (0,1) only the 26 GB/s uplink of its switch; from one GPU to
  // another on a different socket: its own PCIe link plus its NVLink peer's.
  Profile p = make_preset("a6000x8").value();
  EXPECT_NEAR(max_flow_bytes_per_s(p, {2, 3, 4, 5, 6, 7}, {0, 1}), 26 * kGB, 1e-3);
  EXPECT_NEAR(max_flow_bytes_per_s(p, {0, 1, 2, 3}, {4, 5, 6, 7}), 20 * kGB, 1e-3);
  EXPECT_NEAR(max_flow_bytes_per_s(p, {1}, {0}), 56.25 * kGB + 26 * kGB, 1e-3);
}

TEST(CutBound, A6000x8PairUplinkBinds) {
  // By hand: S = 128 MiB per rank. Each NVLink pair must receive the six
  // shards from outside it through its switch uplink: 6S / 26 GB/s = 30.97 ms, more than the
  // socket cut (4S / 20 GB/s = 26.84 ms) and the ring's 7S / 20 GB/s = 46.98 ms busy time.
  Profile p = make_preset("a6000x8").value();
  const double S = kGiB / 8;
  CutBound b = allgather_cut_bound(p, compass::testing::first_gpus(8), kGiB).value();
  EXPECT_NEAR(b.time_s, 6 * S / (26 * kGB), 1e-9);
  EXPECT_EQ(b.subset.size(), 6u);  // six GPUs sending into a pair
  ASSERT_EQ(b.cut_hops.size(), 1u);
  EXPECT_NE(b.cut_hops[0].find("-up"), std::string::npos) << b.cut_hops[0];
  EXPECT_TRUE(b.exact);
  // Symmetric links: the reduce-scatter bound is the same.
  EXPECT_NEAR(reduce_scatter_cut_bound(p, compass::testing::first_gpus(8), kGiB).value().time_s, b.time_s, 1e-12);
  // Socket 0 alone (one root complex, two switches): each pair's uplink, 2S / 26 GB/s.
  EXPECT_NEAR(allgather_cut_bound(p, {0, 1, 2, 3}, kGiB / 2).value().time_s, 2 * S / (26 * kGB),
              1e-9);
}

TEST(CutBound, StagedThroughHostCountsEveryReceivedByte) {
  // rtx4090x8 (p2p off): every byte a GPU receives comes down from host memory, so the two
  // GPUs of a switch receive 2 x 7 shards through its 21 GB/s uplink.
  Profile p = make_preset("rtx4090x8").value();
  const double S = kGiB / 8;
  CutBound b = allgather_cut_bound(p, compass::testing::first_gpus(8), kGiB).value();
  EXPECT_NEAR(b.time_s, 14 * S / (21 * kGB), 1e-9);
  EXPECT_EQ(b.subset.size(), 2u);
}

TEST(CutBound, BeyondSixteenGpusUsesCandidateSubsets) {
  Profile p = star(20, 10 * kGB, 10 * kGB);
  CutBound b = allgather_cut_bound(p, compass::testing::first_gpus(20), 20e9).value();
  EXPECT_FALSE(b.exact);
  EXPECT_NEAR(b.time_s, 19 * 1e9 / (10 * kGB), 1e-12);  // the star's exact value
}

TEST(CutBound, OneGpuAndBadInput) {
  Profile p = star(3, kGB, kGB);
  EXPECT_EQ(allgather_cut_bound(p, {1}, 1e9).value().time_s, 0);
  EXPECT_FALSE(allgather_cut_bound(p, {0, 7}, 1e9).ok());
  EXPECT_FALSE(allgather_cut_bound(p, {0, 0}, 1e9).ok());
  EXPECT_FALSE(allgather_cut_bound(p, {0, 1}, -1).ok());
}

TEST(CutBound, NoPatternBeatsTheBoundOnRandomMachines) {
  // Ring, double ring and all-to-all (max-min flows, route latencies included) can never be
  // faster than the cut bound; checked on every family, 2..8 GPUs.
  int checked = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const int n = 2 + static_cast<int>(seed % 7);
    Profile p = random_topology(seed, n);
    const std::vector<int> g = compass::testing::first_gpus(n);
    const double bytes = 64.0 * 1024 * 1024 * n;
    const double bound = allgather_cut_bound(p, g, bytes).value().time_s;
    ASSERT_GT(bound, 0) << p.name;
    const Ring ring = find_ring(p, g).value();
    const DoubleRing dr = find_double_ring(p, g).value();
    for (const PatternTime& t : {allgather_time_ring(p, ring, bytes),
                                 allgather_time_double_ring(p, dr, bytes),
                                 allgather_time_all2all(p, g, bytes)}) {
      EXPECT_GE(t.time_s, bound * (1 - 1e-9)) << p.name << " " << t.pattern;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 120);
}

TEST(RandomTopology, ValidDeterministicAndEveryFamily) {
  for (int f = 0; f <= 4; ++f)
    for (int n : {1, 2, 3, 5, 8, 16}) {
      const auto family = static_cast<TopologyFamily>(f);
      Profile a = random_topology(11, n, family);
      EXPECT_EQ(a.gpu_count(), n);
      EXPECT_EQ(a, random_topology(11, n, family));
      EXPECT_EQ(a.p2p, family != TopologyFamily::staged);
      EXPECT_EQ(static_cast<int>(a.routes.size()), n * (n - 1));
    }
  EXPECT_NE(random_topology(1, 8, TopologyFamily::pcie_tree),
            random_topology(2, 8, TopologyFamily::pcie_tree));
}

}  // namespace
}  // namespace compass::hardware
