// Presets: the facts each one encodes, and the generated multi-node machine.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {
namespace {

Profile preset(const std::string& name) {
  auto p = make_preset(name);
  if (!p.ok()) ADD_FAILURE() << p.error().message;
  return p.ok() ? *p : Profile{};
}

std::vector<std::string> route_links(const Profile& p, int s, int d) {
  std::vector<std::string> out;
  for (const Hop& h : p.route(s, d).hops) out.push_back(p.links[h.link].name);
  return out;
}

bool crosses(const Profile& p, int s, int d, LinkKind kind) {
  for (const Hop& h : p.route(s, d).hops)
    if (p.links[h.link].kind == kind) return true;
  return false;
}

TEST(Presets, NamesDescriptionsAndValidity) {
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"a6000x8", "a6000x4", "rtx4090x8", "a100x8",
                                                      "h100x8", "h200x1"}));
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    Profile p = preset(name);
    EXPECT_EQ(p.name, name);
    EXPECT_TRUE(validate(p).ok());
    auto d = preset_description(name);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(*d, p.description);
    EXPECT_FALSE(p.notes.empty());
    for (const Link& l : p.links) EXPECT_FALSE(l.source.empty()) << l.name;
    const int n = p.gpu_count();
    EXPECT_EQ(p.routes.size(), static_cast<std::size_t>(n * (n - 1)));
  }
  auto unknown = make_preset("a6000x9");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            "unknown preset 'a6000x9' (known: a6000x8, a6000x4, rtx4090x8, a100x8, h100x8, "
            "h200x1)");
  EXPECT_FALSE(preset_description("x").ok());
}

TEST(Presets, GpuCountsAndDevices) {
  EXPECT_EQ(preset("a6000x8").gpu_count(), 8);
  EXPECT_EQ(preset("a6000x4").gpu_count(), 4);
  EXPECT_EQ(preset("rtx4090x8").gpu_count(), 8);
  EXPECT_EQ(preset("a100x8").gpu_count(), 8);
  EXPECT_EQ(preset("h100x8").gpu_count(), 8);
  EXPECT_EQ(preset("h200x1").gpu_count(), 1);

  const DeviceSpec a6000 = preset("a6000x8").gpu_device(0);
  EXPECT_EQ(a6000.sm_count, 84);
  EXPECT_DOUBLE_EQ(a6000.peak_flops.at(DType::bf16), 154.8e12);
  EXPECT_DOUBLE_EQ(a6000.peak_flops.at(DType::fp32), 38.7e12);
  EXPECT_DOUBLE_EQ(a6000.memory_bandwidth_bytes_per_s, 768e9);
  EXPECT_DOUBLE_EQ(a6000.memory_bytes, 48e9);
  EXPECT_EQ(preset("rtx4090x8").gpu_device(0).sm_count, 128);
  EXPECT_EQ(preset("a100x8").gpu_device(0).sm_count, 108);
  EXPECT_DOUBLE_EQ(preset("a100x8").gpu_device(0).peak_flops.at(DType::bf16), 312e12);
  EXPECT_DOUBLE_EQ(preset("h100x8").gpu_device(0).memory_bandwidth_bytes_per_s, 3.35e12);
  const DeviceSpec h200 = preset("h200x1").gpu_device(0);
  EXPECT_EQ(h200.sm_count, 132);
  EXPECT_DOUBLE_EQ(h200.memory_bandwidth_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.memory_bytes, 141e9);
}

TEST(Presets, A6000x8NvlinkPairsAndPcieLayout) {
  const Profile p = preset("a6000x8");
  EXPECT_TRUE(p.p2p);
  std::set<std::pair<int, int>> nvlink_pairs;
  for (const Link& l : p.links)
    if (l.kind == LinkKind::nvlink) {
      EXPECT_DOUBLE_EQ(l.bandwidth_bytes_per_s, 56.25e9);
      EXPECT_DOUBLE_EQ(l.reverse_bandwidth_bytes_per_s, 56.25e9);
      nvlink_pairs.insert({std::min(l.a, l.b), std::max(l.a, l.b)});
    }
  EXPECT_EQ(nvlink_pairs, (std::set<std::pair<int, int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));

  // NVLink neighbours talk over the bridge only.
  for (int g = 0; g < 8; g += 2) {
    EXPECT_EQ(route_links(p, g, g + 1),
              std::vector<std::string>{fmt::format("nvlink-{}-{}", g, g + 1)});
    EXPECT_EQ(route_links(p, g + 1, g),
              std::vector<std::string>{fmt::format("nvlink-{}-{}", g, g + 1)});
    EXPECT_DOUBLE_EQ(p.route_bandwidth(g, g + 1), 56.25e9);
  }
  // Same socket, other switch: up through both switch uplinks.
  EXPECT_EQ(route_links(p, 0, 2),
            (std::vector<std::string>{"pcie-gpu0", "pcie-sw0-up", "pcie-sw1-up", "pcie-gpu2"}));
  EXPECT_DOUBLE_EQ(p.route_bandwidth(0, 2), 26e9);
  // Across sockets: the cross-socket link is the bottleneck.
  EXPECT_EQ(route_links(p, 3, 4),
            (std::vector<std::string>{"pcie-gpu3", "pcie-sw1-up", "xsocket-0-1", "pcie-sw2-up",
                                      "pcie-gpu4"}));
  EXPECT_DOUBLE_EQ(p.route_bandwidth(3, 4), 20e9);
  for (int s = 0; s < 8; ++s)
    for (int d = 0; d < 8; ++d)
      if (s != d) {
        EXPECT_EQ(crosses(p, s, d, LinkKind::inter_socket), (s < 4) != (d < 4));
      }
  // Shared segments are the uplinks, the cross-socket link and host memory.
  for (const Link& l : p.links)
    EXPECT_EQ(l.shared, l.name.find("-up") != std::string::npos ||
                            l.kind == LinkKind::inter_socket || l.kind == LinkKind::memory)
        << l.name;
}

TEST(Presets, A6000x8WorkedExampleLoads) {
  // The worked example of docs/rings.md: the one-way ring 0->1->...->7->0 crosses the sockets once in each
  // direction; all-to-all sends 16 shards across each direction.
  const Profile p = preset("a6000x8");
  int ring_fwd = 0, ring_rev = 0, a2a_fwd = 0, a2a_rev = 0;
  for (int s = 0; s < 8; ++s)
    for (int d = 0; d < 8; ++d) {
      if (s == d) continue;
      for (const Hop& h : p.route(s, d).hops) {
        if (p.links[h.link].kind != LinkKind::inter_socket) continue;
        (h.forward ? a2a_fwd : a2a_rev)++;
        if (d == (s + 1) % 8) (h.forward ? ring_fwd : ring_rev)++;
      }
    }
  EXPECT_EQ(ring_fwd, 1);
  EXPECT_EQ(ring_rev, 1);
  EXPECT_EQ(a2a_fwd, 16);
  EXPECT_EQ(a2a_rev, 16);
}

TEST(Presets, A6000x4IsOneSocket) {
  const Profile p = preset("a6000x4");
  for (const Link& l : p.links) EXPECT_NE(l.kind, LinkKind::inter_socket);
  EXPECT_EQ(route_links(p, 0, 1), std::vector<std::string>{"nvlink-0-1"});
  EXPECT_EQ(route_links(p, 1, 3),
            (std::vector<std::string>{"pcie-gpu1", "pcie-sw0-up", "pcie-sw1-up", "pcie-gpu3"}));
}

TEST(Presets, Rtx4090x8StagesThroughHostMemory) {
  const Profile p = preset("rtx4090x8");
  EXPECT_FALSE(p.p2p);
  for (const Link& l : p.links) EXPECT_NE(l.kind, LinkKind::nvlink);
  for (int s = 0; s < 8; ++s)
    for (int d = 0; d < 8; ++d) {
      if (s == d) continue;
      EXPECT_TRUE(crosses(p, s, d, LinkKind::memory)) << s << "->" << d;
      EXPECT_LE(p.route_bandwidth(s, d), 21e9);
    }
  EXPECT_EQ(route_links(p, 0, 1), (std::vector<std::string>{"pcie-gpu0", "pcie-sw0-up", "mem0",
                                                            "mem0", "pcie-sw0-up", "pcie-gpu1"}));
  EXPECT_DOUBLE_EQ(p.route_bandwidth(0, 1), 21e9);
  EXPECT_DOUBLE_EQ(p.route_bandwidth(0, 7), 20e9);  // crosses the sockets too
}

TEST(Presets, NvswitchBoxes) {
  for (const auto& [name, bw] : {std::pair{"a100x8", 230e9}, std::pair{"h100x8", 370e9}}) {
    SCOPED_TRACE(name);
    const Profile p = preset(name);
    for (int s = 0; s < 8; ++s)
      for (int d = 0; d < 8; ++d) {
        if (s == d) continue;
        EXPECT_EQ(p.route(s, d).hops.size(), 2u);
        EXPECT_DOUBLE_EQ(p.route_bandwidth(s, d), bw);
        EXPECT_DOUBLE_EQ(p.route_latency_s(s, d), 1.5e-6);
      }
  }
}

TEST(Presets, H200x1HasNoRoutes) {
  const Profile p = preset("h200x1");
  EXPECT_TRUE(p.links.empty());
  EXPECT_TRUE(p.routes.empty());
  ASSERT_TRUE(p.calibration.gemm_efficiency.has_value());
  EXPECT_NEAR(*p.calibration.gemm_efficiency * 989.4e12, 790e12, 1e6);
}

TEST(Multinode, MatchesTheGenericRouteSearch) {
  Profile direct = make_multinode_nvswitch(3, 4);
  EXPECT_EQ(direct.gpu_count(), 12);
  ASSERT_TRUE(validate(direct).ok()) << validate(direct).error().message;
  Profile searched = direct;
  searched.routes.clear();
  ASSERT_TRUE(compute_missing_routes(searched).ok());
  EXPECT_EQ(searched.routes, direct.routes);
  EXPECT_EQ(route_links(direct, 0, 3), (std::vector<std::string>{"nvl-gpu0", "nvl-gpu3"}));
  EXPECT_EQ(route_links(direct, 0, 4),
            (std::vector<std::string>{"pcie-nic0", "ib-nic0", "ib-nic4", "pcie-nic4"}));
  EXPECT_DOUBLE_EQ(direct.route_bandwidth(0, 4), 50e9);
  // And it round-trips through JSON like any profile.
  auto back = profile_from_json(profile_to_json(direct));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, direct);
}

TEST(Multinode, ThousandGpus) {
  Profile p = make_multinode_nvswitch(128, 8);
  EXPECT_EQ(p.gpu_count(), 1024);
  EXPECT_EQ(p.routes.size(), 1024u * 1023u);
  EXPECT_TRUE(validate(p).ok());
  EXPECT_EQ(p.route(1023, 0).dst, 0);
  EXPECT_EQ(p.route(1023, 1022).hops.size(), 2u);
  EXPECT_EQ(p.route(0, 1023).hops.size(), 4u);
}

}  // namespace
}  // namespace compass::hardware
