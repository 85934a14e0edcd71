// Ring search, double ring and all-gather pattern times: hand-computed small cases, the
// The worked example of docs/rings.md on a hand-built hybrid machine, brute-force checks on random
// seeded topologies, and the a6000x8 preset.

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "compass/hardware/presets.hpp"
#include "compass/core/units.hpp"
#include "compass/hardware/rings.hpp"

namespace compass::hardware {
namespace {

Profile empty_profile(const std::string& name) {
  Profile p;
  p.name = name;
  DeviceSpec dev;
  dev.name = "test-gpu";
  p.devices.push_back(dev);
  return p;
}

int add_node(Profile& p, const std::string& name, NodeKind kind) {
  p.nodes.push_back(Node{name, kind, kind == NodeKind::gpu ? "test-gpu" : ""});
  return static_cast<int>(p.nodes.size()) - 1;
}

int add_link(Profile& p, const std::string& name, LinkKind kind, int a, int b, double fwd_bw,
             double rev_bw, bool shared = false, double latency_s = 0) {
  Link l;
  l.name = name;
  l.kind = kind;
  l.a = a;
  l.b = b;
  l.bandwidth_bytes_per_s = fwd_bw;
  l.reverse_bandwidth_bytes_per_s = rev_bw;
  l.shared = shared;
  l.latency_s = latency_s;
  p.links.push_back(l);
  return static_cast<int>(p.links.size()) - 1;
}

// Four GPUs on a physical ring of direct links (link i: gpu i -> gpu i+1, bandwidth B both
// ways, latency L). Neighbours talk directly; GPUs two apart go clockwise through the middle.
Profile ring4(double bw, double latency_s) {
  Profile p = empty_profile("ring4");
  for (int i = 0; i < 4; ++i) add_node(p, "gpu" + std::to_string(i), NodeKind::gpu);
  for (int i = 0; i < 4; ++i)
    add_link(p, "l" + std::to_string(i), LinkKind::nvlink, i, (i + 1) % 4, bw, bw, false,
             latency_s);
  for (int s = 0; s < 4; ++s)
    for (int d = 0; d < 4; ++d) {
      if (s == d) continue;
      Route r{s, d, {}};
      if (d == (s + 1) % 4) r.hops = {Hop{s, true}};
      if (d == (s + 3) % 4) r.hops = {Hop{d, false}};
      if (d == (s + 2) % 4) r.hops = {Hop{s, true}, Hop{(s + 1) % 4, true}};
      p.routes.push_back(r);
    }
  return p;
}

// The worked example of docs/rings.md: 8 GPUs, NVLink pairs (0,1)(2,3)(4,5)(6,7) at `nv`, GPUs 0-3
// on socket0 and 4-7 on socket1, each GPU on its own PCIe link of `pcie` per direction, the
// sockets joined by a shared link of `xsock` per direction. No latency, so times are exact.
Profile hybrid8(double nv, double pcie, double xsock) {
  Profile p = empty_profile("hybrid8");
  for (int i = 0; i < 8; ++i) add_node(p, "gpu" + std::to_string(i), NodeKind::gpu);
  int s0 = add_node(p, "socket0", NodeKind::cpu_socket);
  int s1 = add_node(p, "socket1", NodeKind::cpu_socket);
  for (int i = 0; i < 8; i += 2)
    add_link(p, fmt::format("nvlink-{}-{}", i, i + 1), LinkKind::nvlink, i, i + 1, nv, nv);
  for (int i = 0; i < 8; ++i)
    add_link(p, fmt::format("pcie-gpu{}", i), LinkKind::pcie, i, i < 4 ? s0 : s1, pcie, pcie);
  add_link(p, "xsocket", LinkKind::inter_socket, s0, s1, xsock, xsock, /*shared=*/true);
  Status st = compute_missing_routes(p);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return p;
}

// A random connected machine: GPUs hang off PCIe switches (asymmetric bandwidths), switches
// form a chain of shared uplinks, and a few random GPU pairs get an NVLink.
Profile random_machine(unsigned seed, int gpus) {
  std::mt19937 rng(seed);
  auto pick = [&](std::vector<double> v) {
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  };
  Profile p = empty_profile(fmt::format("random{}", seed));
  for (int i = 0; i < gpus; ++i) add_node(p, "gpu" + std::to_string(i), NodeKind::gpu);
  const int switches = std::uniform_int_distribution<int>(1, 3)(rng);
  std::vector<int> sw;
  for (int s = 0; s < switches; ++s)
    sw.push_back(add_node(p, "sw" + std::to_string(s), NodeKind::pcie_switch));
  for (int s = 1; s < switches; ++s)
    add_link(p, fmt::format("up{}", s), LinkKind::pcie, sw[s - 1], sw[s], pick({12, 20, 32}) * kGB,
             pick({12, 20, 32}) * kGB, true, 1e-6);
  for (int i = 0; i < gpus; ++i)
    add_link(p, fmt::format("pcie{}", i), LinkKind::pcie, i,
             sw[std::uniform_int_distribution<int>(0, switches - 1)(rng)], pick({16, 25}) * kGB,
             pick({16, 25}) * kGB, false, 0.5e-6);
  const int nvlinks = std::uniform_int_distribution<int>(0, gpus / 2)(rng);
  for (int k = 0; k < nvlinks; ++k) {
    int a = std::uniform_int_distribution<int>(0, gpus - 1)(rng);
    int b = std::uniform_int_distribution<int>(0, gpus - 1)(rng);
    if (a == b) continue;
    add_link(p, fmt::format("nv{}", k), LinkKind::nvlink, a, b, 50 * kGB, 50 * kGB, false, 0.2e-6);
  }
  Status st = compute_missing_routes(p);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return p;
}

bool is_permutation_of(const Ring& r, std::vector<int> gpus) {
  std::vector<int> o = r.order;
  std::sort(o.begin(), o.end());
  std::sort(gpus.begin(), gpus.end());
  return o == gpus;
}

bool adjacent(const Ring& r, int a, int b) {
  const int n = static_cast<int>(r.order.size());
  for (int i = 0; i < n; ++i) {
    int x = r.order[i], y = r.order[(i + 1) % n];
    if ((x == a && y == b) || (x == b && y == a)) return true;
  }
  return false;
}

double ring_bw(const Profile& p, const std::vector<int>& order) {
  double bw = 1e300;
  for (std::size_t i = 0; i < order.size(); ++i)
    bw = std::min(bw, p.route_bandwidth(order[i], order[(i + 1) % order.size()]));
  return bw;
}

int ring_crossings(const Profile& p, const std::vector<int>& order) {
  int c = 0;
  for (std::size_t i = 0; i < order.size(); ++i)
    for (const Hop& h : p.route(order[i], order[(i + 1) % order.size()]).hops)
      if (p.links[h.link].shared) ++c;
  return c;
}

// Ring all-gather time straight from the definition: (n-1) steps of n concurrent flows.
double ring_time_by_definition(const Profile& p, const std::vector<int>& order, double total) {
  const int n = static_cast<int>(order.size());
  std::vector<Flow> flows;
  for (int i = 0; i < n; ++i) flows.push_back(Flow{order[i], order[(i + 1) % n], total / n});
  return (n - 1) * run_flows(p, flows).makespan_s;
}

double time_of(const PatternTime& t) {
  return t.time_s;
}

TEST(Rings, ValidateGroupNamesTheBadOrdinal) {
  Profile p = ring4(10 * kGB, 0);
  EXPECT_TRUE(validate_group(p, {0, 1, 2, 3}).ok());
  EXPECT_TRUE(validate_group(p, {2}).ok());
  Status empty = validate_group(p, {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos);
  Status out = validate_group(p, {0, 4});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("GPU 4"), std::string::npos);
  Status neg = validate_group(p, {-1});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.error().message.find("GPU -1"), std::string::npos);
  Status dup = validate_group(p, {1, 2, 1});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("GPU 1 appears twice"), std::string::npos);
  EXPECT_FALSE(find_ring(p, {0, 7}).ok());
  EXPECT_FALSE(find_double_ring(p, {3, 3}).ok());
}

TEST(Rings, ReversedKeepsTheFirstRank) {
  EXPECT_EQ(reversed(Ring{{0, 1, 2, 3}}), (Ring{{0, 3, 2, 1}}));
  EXPECT_EQ(reversed(Ring{{5}}), (Ring{{5}}));
  EXPECT_EQ(reversed(Ring{{}}), (Ring{{}}));
}

TEST(Rings, TrivialGroups) {
  Profile p = ring4(10 * kGB, 1e-6);
  Result<Ring> one = find_ring(p, {2});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->order, std::vector<int>{2});
  PatternTime t = allgather_time_ring(p, *one, kGiB);
  EXPECT_EQ(t.time_s, 0);
  EXPECT_TRUE(t.loads.empty());
  Result<DoubleRing> two = find_double_ring(p, {3, 1});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->first.order, (std::vector<int>{1, 3}));
  // One step; each half chunk (S/4) goes 1->3 and 3->1 (clockwise, two hops) on both rings.
  PatternTime d = allgather_time_double_ring(p, *two, kGiB);
  // n = 2: the reverse is the same ring, so both halves take the same two-hop routes.
  EXPECT_DOUBLE_EQ(d.time_s, kGiB / 2 / (10 * kGB) + 2e-6);
}

TEST(Rings, UniformRingOfFourHandComputed) {
  const double B = 10 * kGB, L = 1e-6, S = kGiB;
  Profile p = ring4(B, L);
  Result<Ring> ring = find_ring(p, {0, 1, 2, 3});
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->order, (std::vector<int>{0, 1, 2, 3}));
  Result<DoubleRing> dr = find_double_ring(p, {0, 1, 2, 3});
  ASSERT_TRUE(dr.ok());
  EXPECT_EQ(dr->first, *ring);
  EXPECT_EQ(dr->second, reversed(*ring));

  // Ring: 3 steps, each link direction carries one chunk S/4 per step.
  PatternTime r = allgather_time_ring(p, *ring, S);
  EXPECT_EQ(r.pattern, "ring");
  EXPECT_DOUBLE_EQ(r.time_s, 3 * (S / 4 / B + L));
  ASSERT_EQ(r.loads.size(), 4u);
  for (const HopLoad& l : r.loads) {
    EXPECT_TRUE(l.hop.forward);
    EXPECT_DOUBLE_EQ(l.bytes, 3 * S / 4);
    EXPECT_EQ(l.flows, 3);
  }
  EXPECT_EQ(r.bottleneck, r.loads[0].name);
  EXPECT_TRUE(r.congested.empty());

  // Double ring: half chunks both ways, every direction carries S/8 per step.
  PatternTime d = allgather_time_double_ring(p, *dr, S);
  EXPECT_EQ(d.pattern, "double-ring");
  EXPECT_DOUBLE_EQ(d.time_s, 3 * (S / 8 / B + L));
  EXPECT_EQ(d.loads.size(), 8u);
  EXPECT_LT(d.time_s, r.time_s);
  EXPECT_TRUE(d.congested.empty());

  // All-to-all: each clockwise direction carries its neighbour flow plus two two-hop flows
  // (3 x S/4 at B/3 each); counter-clockwise flows run alone. Makespan: the two-hop flows.
  PatternTime a = allgather_time_all2all(p, {0, 1, 2, 3}, S);
  EXPECT_EQ(a.pattern, "all2all");
  EXPECT_NEAR(a.time_s, 3 * S / 4 / B + 2 * L, 1e-12);
  ASSERT_EQ(a.loads.size(), 8u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(a.loads[i].hop.forward);
    EXPECT_DOUBLE_EQ(a.loads[i].bytes, 3 * S / 4);
    EXPECT_FALSE(a.loads[i + 4].hop.forward);
    EXPECT_DOUBLE_EQ(a.loads[i + 4].bytes, S / 4);
  }
  // No direction is busier than under the best ring (3S/4 over B): nothing congested.
  EXPECT_TRUE(a.congested.empty());
}

TEST(Rings, WorkedExampleEqualCrossSocketBandwidth) {
  // X = B: ring 7S/B, double ring ties (7S/X on each cross-socket direction), all-to-all
  // 16S/X (S = one rank's shard).
  const double B = 25 * kGB, total = kGiB, S = total / 8;
  Profile p = hybrid8(56.25 * kGB, B, B);
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  Result<Ring> ring = find_ring(p, all);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->order, all);
  for (int i = 0; i < 8; i += 2) EXPECT_TRUE(adjacent(*ring, i, i + 1)) << i;
  EXPECT_EQ(ring_crossings(p, ring->order), 2);

  Result<DoubleRing> dr = find_double_ring(p, all);
  ASSERT_TRUE(dr.ok());
  PatternTime r = allgather_time_ring(p, *ring, total);
  PatternTime d = allgather_time_double_ring(p, *dr, total);
  PatternTime a = allgather_time_all2all(p, all, total);
  EXPECT_NEAR(r.time_s, 7 * S / B, 1e-12);
  EXPECT_NEAR(d.time_s, 7 * S / B, 1e-12);
  EXPECT_NEAR(a.time_s, 16 * S / B, 1e-12);
  // The ring's heaviest directions are PCIe and cross-socket (both 7S/B); the all-to-all
  // piles 16 shards onto each cross-socket direction: those two are congested, nothing else.
  EXPECT_EQ(a.bottleneck.rfind("xsocket", 0), 0u) << a.bottleneck;
  ASSERT_EQ(a.congested.size(), 2u);
  EXPECT_EQ(a.congested[0], p.hop_name(Hop{12, true}));
  EXPECT_EQ(a.congested[1], p.hop_name(Hop{12, false}));
  EXPECT_TRUE(d.congested.empty());
  EXPECT_TRUE(r.congested.empty());
}

TEST(Rings, WorkedExampleFastCrossSocketDoubleRingWins) {
  // X = 2B: ring max(7S/B, 7S/X) = 7S/B; double ring max(3.5S/B, 7S/X) = 3.5S/B;
  // all-to-all max(6S/B, 16S/X) = 8S/B. The ring leaves the reverse PCIe directions idle.
  const double B = 25 * kGB, total = kGiB, S = total / 8;
  Profile p = hybrid8(56.25 * kGB, B, 2 * B);
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  Result<Ring> ring = find_ring(p, all);
  Result<DoubleRing> dr = find_double_ring(p, all);
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE(dr.ok());
  EXPECT_EQ(dr->second, reversed(*ring));
  PatternTime r = allgather_time_ring(p, *ring, total);
  PatternTime d = allgather_time_double_ring(p, *dr, total);
  PatternTime a = allgather_time_all2all(p, all, total);
  EXPECT_NEAR(r.time_s, 7 * S / B, 1e-12);
  EXPECT_NEAR(d.time_s, 3.5 * S / B, 1e-12);
  EXPECT_NEAR(a.time_s, 8 * S / B, 1e-12);
  EXPECT_LT(d.time_s, r.time_s);
  EXPECT_EQ(r.bottleneck.rfind("pcie-gpu", 0), 0u) << r.bottleneck;
  EXPECT_EQ(a.congested.size(), 2u);  // 16S/2B = 8S/B > the ring's 7S/B
}

TEST(Rings, SubgroupRingUsesOnlyItsGpus) {
  Profile p = hybrid8(56.25 * kGB, 25 * kGB, 20 * kGB);
  std::vector<int> group{6, 2, 7, 3};
  Result<Ring> ring = find_ring(p, group);
  ASSERT_TRUE(ring.ok());
  EXPECT_TRUE(is_permutation_of(*ring, group));
  EXPECT_EQ(ring->order.front(), 2);
  EXPECT_TRUE(adjacent(*ring, 2, 3));
  EXPECT_TRUE(adjacent(*ring, 6, 7));
  Result<DoubleRing> dr = find_double_ring(p, group);
  ASSERT_TRUE(dr.ok());
  EXPECT_TRUE(is_permutation_of(dr->second, group));
}

// Brute force over every ring (first GPU fixed): the search's key must be the optimum.
TEST(Rings, RandomTopologiesMatchBruteForce) {
  for (unsigned seed = 1; seed <= 25; ++seed) {
    const int n = 3 + static_cast<int>(seed % 5);  // 3..7 GPUs
    Profile p = random_machine(seed, n);
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    Result<Ring> ring = find_ring(p, all);
    ASSERT_TRUE(ring.ok()) << seed;
    ASSERT_TRUE(is_permutation_of(*ring, all)) << seed;
    ASSERT_EQ(ring->order.front(), 0) << seed;

    double best_bw = 0;
    int best_cross = 1 << 30;
    double best_t = 1e300;
    std::vector<int> perm = all;
    do {
      double bw = ring_bw(p, perm);
      int cross = ring_crossings(p, perm);
      double t = ring_time_by_definition(p, perm, kGiB);
      bool wider = bw > best_bw * (1 + 1e-9);
      bool same_bw = !wider && bw >= best_bw * (1 - 1e-9);
      if (wider || (same_bw && (cross < best_cross || (cross == best_cross && t < best_t)))) {
        best_bw = bw;
        best_cross = cross;
        best_t = t;
      }
    } while (std::next_permutation(perm.begin() + 1, perm.end()));
    EXPECT_NEAR(ring_bw(p, ring->order), best_bw, best_bw * 1e-9) << seed;
    EXPECT_EQ(ring_crossings(p, ring->order), best_cross) << seed;
    const double found_t = allgather_time_ring(p, *ring, kGiB).time_s;
    EXPECT_DOUBLE_EQ(found_t, ring_time_by_definition(p, ring->order, kGiB)) << seed;
    EXPECT_LE(found_t, best_t * (1 + 1e-9)) << seed;

    Result<DoubleRing> dr = find_double_ring(p, all);
    ASSERT_TRUE(dr.ok()) << seed;
    EXPECT_EQ(dr->first, *ring) << seed;
    ASSERT_TRUE(is_permutation_of(dr->second, all)) << seed;
    const double double_t = allgather_time_double_ring(p, *dr, kGiB).time_s;
    EXPECT_LE(double_t, found_t * (1 + 1e-9)) << seed;
    EXPECT_LE(double_t,
              allgather_time_double_ring(p, {*ring, reversed(*ring)}, kGiB).time_s * (1 + 1e-9))
        << seed;
  }
}

TEST(Rings, LargeGroupsUseTheHeuristic) {
  for (unsigned seed = 100; seed < 104; ++seed) {
    const int n = 12 + static_cast<int>(seed % 4);
    Profile p = random_machine(seed, n);
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    Result<Ring> ring = find_ring(p, all);
    ASSERT_TRUE(ring.ok());
    EXPECT_TRUE(is_permutation_of(*ring, all));
    Result<DoubleRing> dr = find_double_ring(p, all);
    ASSERT_TRUE(dr.ok());
    EXPECT_TRUE(is_permutation_of(dr->second, all));
    EXPECT_LE(time_of(allgather_time_double_ring(p, *dr, kGiB)),
              time_of(allgather_time_ring(p, *ring, kGiB)) * (1 + 1e-9));
  }
}

TEST(Rings, AsymmetricLinksDoubleRingNeverWorseThanRing) {
  // One direction of every link is 10x slower: the reverse ring would be slow, so the double
  // ring must find a better complement (or reuse the ring itself).
  Profile p = ring4(10 * kGB, 0);
  for (Link& l : p.links) l.reverse_bandwidth_bytes_per_s = 1 * kGB;
  Result<Ring> ring = find_ring(p, {0, 1, 2, 3});
  Result<DoubleRing> dr = find_double_ring(p, {0, 1, 2, 3});
  ASSERT_TRUE(ring.ok());
  ASSERT_TRUE(dr.ok());
  EXPECT_EQ(ring->order, (std::vector<int>{0, 1, 2, 3}));
  const double r = allgather_time_ring(p, *ring, kGiB).time_s;
  const double d = allgather_time_double_ring(p, *dr, kGiB).time_s;
  const double rev = allgather_time_double_ring(p, {*ring, reversed(*ring)}, kGiB).time_s;
  EXPECT_GT(rev, r);  // ring + reverse alone would lose here
  EXPECT_LE(d, r * (1 + 1e-9));
}

TEST(Rings, SearchIsDeterministic) {
  Profile p = random_machine(7, 8);
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  Result<DoubleRing> a = find_double_ring(p, all);
  Result<DoubleRing> b = find_double_ring(p, all);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
}

// The paper's testbed preset: NVLink pairs must be ring neighbours.
TEST(RingsPreset, A6000x8PairsNvlinkNeighbours) {
  Result<Profile> p = make_preset("a6000x8");
  ASSERT_TRUE(p.ok()) << p.error().message;
  std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  Result<Ring> ring = find_ring(*p, all);
  ASSERT_TRUE(ring.ok());
  EXPECT_TRUE(is_permutation_of(*ring, all));
  for (int i = 0; i < 8; i += 2) EXPECT_TRUE(adjacent(*ring, i, i + 1)) << i;
  Result<DoubleRing> dr = find_double_ring(*p, all);
  ASSERT_TRUE(dr.ok());
  PatternTime r = allgather_time_ring(*p, *ring, kGiB);
  PatternTime d = allgather_time_double_ring(*p, *dr, kGiB);
  PatternTime a = allgather_time_all2all(*p, all, kGiB);
  EXPECT_LE(d.time_s, r.time_s * (1 + 1e-9));
  // If the ring's bottleneck direction has an idle reverse, the double ring must win strictly.
  const HopLoad& neck = r.loads.front();
  bool reverse_idle = std::none_of(r.loads.begin(), r.loads.end(), [&](const HopLoad& l) {
    return l.hop.link == neck.hop.link && l.hop.forward != neck.hop.forward;
  });
  if (reverse_idle) {
    EXPECT_LT(d.time_s, r.time_s * (1 - 1e-9));
  }
  EXPECT_FALSE(r.bottleneck.empty());
  EXPECT_FALSE(a.bottleneck.empty());
  // The acceptance: all-to-all names the shared segments it piles onto, and they are
  // shared links of the preset.
  ASSERT_FALSE(a.congested.empty());
  EXPECT_GT(a.time_s, r.time_s);
  for (const HopLoad& l : a.loads) {
    if (std::find(a.congested.begin(), a.congested.end(), l.name) != a.congested.end()) {
      EXPECT_TRUE(p->links[l.hop.link].shared) << l.name;
    }
  }
  EXPECT_TRUE(r.congested.empty());
}

TEST(RingsPreset, EveryPresetHasValidRings) {
  for (const std::string& name : preset_names()) {
    Result<Profile> p = make_preset(name);
    ASSERT_TRUE(p.ok()) << name;
    std::vector<int> all(p->gpu_count());
    std::iota(all.begin(), all.end(), 0);
    Result<Ring> ring = find_ring(*p, all);
    ASSERT_TRUE(ring.ok()) << name;
    EXPECT_TRUE(is_permutation_of(*ring, all)) << name;
    Result<DoubleRing> dr = find_double_ring(*p, all);
    ASSERT_TRUE(dr.ok()) << name;
    EXPECT_LE(allgather_time_double_ring(*p, *dr, kGiB).time_s,
              allgather_time_ring(*p, *ring, kGiB).time_s * (1 + 1e-9))
        << name;
  }
}

}  // namespace
}  // namespace compass::hardware
