// nvidia-smi topo -m matrices -> profiles, on the published matrices in tests/data/topo (each
// file names its source), plus the errors on text that cannot be read.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "compass/hardware/gpu_models.hpp"
#include "compass/hardware/live_topology.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/hardware/topo_matrix.hpp"

namespace compass::hardware {
namespace {

std::string data(const std::string& rel) {
  std::ifstream f(std::string(COMPASS_SOURCE_DIR) + "/tests/data/" + rel);
  std::ostringstream s;
  s << f.rdbuf();
  EXPECT_FALSE(s.str().empty()) << rel;
  return s.str();
}

Profile discover(const std::string& file, const std::string& gpu = "") {
  auto m = parse_topo_matrix(data("topo/" + file), file);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  auto model = find_gpu_model(gpu.empty() ? default_gpu_key(*m) : gpu);
  EXPECT_TRUE(model.ok());
  auto p = profile_from_topo(*m, *model, TopoProfileOptions{file, true, file});
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  return p.ok() ? *p : Profile{};
}

int count_kind(const Profile& p, NodeKind k) {
  return static_cast<int>(std::count_if(p.nodes.begin(), p.nodes.end(), [&](const Node& n) { return n.kind == k; }));
}

std::set<std::pair<std::string, std::string>> nvlink_pairs(const Profile& p) {
  std::set<std::pair<std::string, std::string>> out;
  for (const Link& l : p.links)
    if (l.kind == LinkKind::nvlink) out.insert({p.nodes[l.a].name, p.nodes[l.b].name});
  return out;
}

/// The non-GPU node a GPU's PCIe link goes to.
std::string pcie_parent(const Profile& p, int gpu) {
  for (const Link& l : p.links)
    if (l.kind == LinkKind::pcie && l.a == p.gpu_node(gpu)) return p.nodes[l.b].name;
  return "";
}

/// The socket above a node, following the PCIe uplinks.
std::string socket_of(const Profile& p, int gpu) {
  std::string at = pcie_parent(p, gpu);
  for (int guard = 0; guard < 8; ++guard) {
    for (const Link& l : p.links)
      if (p.nodes[l.a].name == at && (l.kind == LinkKind::pcie)) {
        at = p.nodes[l.b].name;
        break;
      }
    if (at.rfind("socket", 0) == 0) return at;
  }
  return at;
}

TEST(TopoMatrix, NvlinkBridgedPairsOnPcie) {
  const Profile p = discover("nvlink_pairs_4x3090.txt", "rtx3090");
  EXPECT_EQ(p.gpu_count(), 4);
  EXPECT_EQ(nvlink_pairs(p), (std::set<std::pair<std::string, std::string>>{{"gpu0", "gpu2"}, {"gpu1", "gpu3"}}));
  // PHB pairs (0,1) and (2,3) share a root complex; NODE across them; one NUMA node.
  EXPECT_EQ(pcie_parent(p, 0), pcie_parent(p, 1));
  EXPECT_EQ(pcie_parent(p, 2), pcie_parent(p, 3));
  EXPECT_NE(pcie_parent(p, 0), pcie_parent(p, 2));
  EXPECT_EQ(count_kind(p, NodeKind::cpu_socket), 1);
  EXPECT_EQ(count_kind(p, NodeKind::root_complex), 2);
  EXPECT_EQ(count_kind(p, NodeKind::pcie_switch), 0);
  // The bridged pair talks over NVLink: 4 links x 14.0625 GB/s.
  EXPECT_EQ(p.route(0, 2).hops.size(), 1u);
  EXPECT_DOUBLE_EQ(p.route_bandwidth(0, 2), 4 * 14.0625e9);
  EXPECT_TRUE(validate(p).ok());
}

TEST(TopoMatrix, NvlinkPairsOnTwoSockets) {
  const Profile p = discover("nvlink_pairs_8xa100_2socket.txt");  // default: a100 (NV12)
  EXPECT_EQ(p.devices[0].name, "A100 SXM4 80GB");
  EXPECT_EQ(nvlink_pairs(p).size(), 4u);
  EXPECT_TRUE(nvlink_pairs(p).count({"gpu6", "gpu7"}));
  EXPECT_EQ(count_kind(p, NodeKind::cpu_socket), 2);
  EXPECT_EQ(socket_of(p, 0), socket_of(p, 3));
  EXPECT_NE(socket_of(p, 3), socket_of(p, 4));
  // NODE between the pairs: each pair on its own root complex (the hidden PCIe relation of a
  // pair is assumed to be one root complex), two per socket.
  EXPECT_EQ(count_kind(p, NodeKind::root_complex), 4);
  EXPECT_EQ(pcie_parent(p, 0), pcie_parent(p, 1));
  EXPECT_NE(pcie_parent(p, 1), pcie_parent(p, 2));
  EXPECT_DOUBLE_EQ(p.route_bandwidth(0, 1), 12 * 25e9);
}

TEST(TopoMatrix, PcieOnlyTwoSockets) {
  const Profile p = discover("pcie_2socket_5x4090.txt", "rtx4090");
  EXPECT_TRUE(nvlink_pairs(p).empty());
  EXPECT_EQ(count_kind(p, NodeKind::cpu_socket), 2);
  EXPECT_EQ(count_kind(p, NodeKind::root_complex), 3);  // {0}, {1,2}, {3,4}
  EXPECT_EQ(pcie_parent(p, 1), pcie_parent(p, 2));
  EXPECT_EQ(pcie_parent(p, 3), pcie_parent(p, 4));
  EXPECT_NE(pcie_parent(p, 2), pcie_parent(p, 3));
  EXPECT_NE(socket_of(p, 0), socket_of(p, 1));
  EXPECT_EQ(socket_of(p, 1), socket_of(p, 4));
  // PCIe 4.0 x16 at the assumed 0.8 of 31.5 GB/s.
  EXPECT_NEAR(p.route_bandwidth(1, 2), 0.8 * 16 * 1.969e9, 1);
}

TEST(TopoMatrix, SysInsideOneNumaNodeAndNicRows) {
  const Profile p = discover("pcie_2socket_8x4090_sys.txt", "rtx4090");
  EXPECT_EQ(p.gpu_count(), 8);
  EXPECT_EQ(count_kind(p, NodeKind::cpu_socket), 2);     // NUMA 0 and 1
  EXPECT_EQ(count_kind(p, NodeKind::root_complex), 8);   // SYS everywhere: one each
  EXPECT_EQ(socket_of(p, 0), socket_of(p, 3));
  EXPECT_NE(socket_of(p, 3), socket_of(p, 4));
  const auto& notes = p.notes;
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("2 NIC columns (NIC0, NIC1) read but not modelled") != std::string::npos;
  }));
}

TEST(TopoMatrix, NvswitchBox) {
  const Profile p = discover("nvswitch_8xh100_nv18.txt");  // default: h100 (NV18)
  EXPECT_EQ(count_kind(p, NodeKind::nvswitch), 1);
  EXPECT_TRUE(nvlink_pairs(p).empty());
  EXPECT_EQ(count_kind(p, NodeKind::cpu_socket), 2);
  // Every pair goes through the switch at 18 x 25 GB/s.
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        ASSERT_EQ(p.route(a, b).hops.size(), 2u);
        EXPECT_DOUBLE_EQ(p.route_bandwidth(a, b), 450e9);
      }
  const Profile gb = discover("nvswitch_4xgb200_nv18.txt");
  EXPECT_EQ(count_kind(gb, NodeKind::nvswitch), 1);
  EXPECT_EQ(gb.gpu_count(), 4);
}

TEST(TopoMatrix, DirectNvlinkMeshIsNotASwitch) {
  // 4 x H100 with NV6 to each of 3 peers = 18 links: direct links, no switch. Four NUMA nodes.
  const Profile p = discover("nvlink_mesh_4xh100_nv6.txt", "h100");
  EXPECT_EQ(count_kind(p, NodeKind::nvswitch), 0);
  EXPECT_EQ(nvlink_pairs(p).size(), 6u);
  EXPECT_EQ(count_kind(p, NodeKind::cpu_socket), 4);
  EXPECT_DOUBLE_EQ(p.route_bandwidth(1, 3), 6 * 25e9);
}

TEST(TopoMatrix, DiscoveredProfilesSaveAndLoad) {
  for (const char* f : {"nvlink_pairs_4x3090.txt", "nvlink_pairs_8xa100_2socket.txt",
                        "pcie_2socket_5x4090.txt", "pcie_2socket_8x4090_sys.txt",
                        "nvswitch_8xh100_nv18.txt", "nvlink_mesh_4xh100_nv6.txt",
                        "nvswitch_4xgb200_nv18.txt"}) {
    const Profile p = discover(f);
    auto back = profile_from_json(profile_to_json(p), f);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, p) << f;
  }
}

std::string parse_error(const std::string& text) {
  auto m = parse_topo_matrix(text, "t.txt");
  return m.ok() ? std::string() : m.error().message;
}

TEST(TopoMatrix, BadInputIsOneClearError) {
  const std::string head = "        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\n";
  const std::string r0 = "GPU0     X      PHB     SYS     0-7     0\n";
  const std::string r1 = "GPU1    PHB      X      SYS     0-7     0\n";
  const std::string r2 = "GPU2    SYS     SYS      X      8-15    1\n";
  EXPECT_TRUE(parse_error(head + r0 + r1 + r2).empty());
  EXPECT_EQ(parse_error(""), "t.txt: empty file (expected the output of nvidia-smi topo -m)");
  EXPECT_EQ(parse_error("  \n\n"), "t.txt: empty file (expected the output of nvidia-smi topo -m)");
  EXPECT_EQ(parse_error("hello\n").rfind("t.txt: no matrix header", 0), 0u);
  EXPECT_EQ(parse_error(head + r0 + r1),
            "t.txt: truncated matrix: the header names 3 GPUs but there is no row for GPU2");
  EXPECT_EQ(parse_error(head + r0 + "GPU1    PHB      X\n" + r2),
            "t.txt: line 3: truncated row GPU1: 2 of 3 entries");
  EXPECT_EQ(parse_error(head + r0 + "GPU1    PHB      X      QPI     0-7     0\n" + r2),
            "t.txt: line 3: row GPU1 column GPU2: unknown link code 'QPI' (expected X, NV#, PIX, "
            "PXB, PHB, NODE or SYS)");
  EXPECT_EQ(parse_error(head + r0 + r1 + r2 + "GPU3    SYS     SYS     SYS      X\n"),
            "t.txt: line 5: row GPU3 but the header names 3 GPUs (GPU0..GPU2): mismatched GPU count");
  EXPECT_EQ(parse_error(head + r0 + "GPU1    NODE     X      SYS     0-7     0\n" + r2),
            "t.txt: asymmetric matrix: GPU0 to GPU1 is PHB but GPU1 to GPU0 is NODE");
  EXPECT_EQ(parse_error(head + "GPU0    PHB     PHB     SYS     0-7     0\n" + r1 + r2),
            "t.txt: row GPU0 column GPU0: 'PHB' on the diagonal (expected X)");
}

TEST(TopoMatrix, NvlinkOnAGpuWithoutNvlinkIsAnError) {
  auto m = parse_topo_matrix(data("topo/nvlink_pairs_4x3090.txt"), "f");
  ASSERT_TRUE(m.ok());
  auto p = profile_from_topo(*m, *find_gpu_model("rtx4090"), {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message,
            "GPU model rtx4090 has no NVLink but the matrix shows NV# entries (pass --gpu)");
}

TEST(LiveTopology, SysfsAndNvmlFixture) {
  const std::string root = std::string(COMPASS_SOURCE_DIR) + "/tests/data/sysfs/two-switches";
  auto gpus = live_gpus_from_json(data("sysfs/two-switches/nvml.json"), "nvml.json");
  ASSERT_TRUE(gpus.ok()) << gpus.error().message;
  auto m = topo_from_sysfs(root, *gpus);
  ASSERT_TRUE(m.ok()) << m.error().message;
  // GPU0,1 under one switch; GPU2 under a nested switch of another root port; GPU3 on the
  // other NUMA node; GPU0-GPU1 bridged by NVLink (4 links each way).
  EXPECT_EQ(m->gpu[0][1], (TopoEntry{TopoCode::nvlink, 4}));
  EXPECT_EQ(m->gpu[0][2].code, TopoCode::phb);
  EXPECT_EQ(m->gpu[2][3].code, TopoCode::sys);
  EXPECT_EQ(m->numa[3], 1);
  auto key = gpu_key_for_name((*gpus)[0].name);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "a6000");
  auto p = profile_from_topo(*m, *find_gpu_model(*key), {});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->gpu_count(), 4);
}

TEST(LiveTopology, BusIdsAreNormalised) {
  EXPECT_EQ(*normalise_bus_id("00000000:07:00.0"), "0000:07:00.0");
  EXPECT_EQ(*normalise_bus_id("0000:C7:00.0"), "0000:c7:00.0");
  EXPECT_FALSE(normalise_bus_id("07:00").ok());
}

TEST(LiveTopology, NoGpuHereSaysSo) {
  auto r = query_nvml();
  if (r.ok()) GTEST_SKIP() << "NVML found " << r->size() << " GPUs on this machine";
  EXPECT_EQ(r.error().message.rfind("no GPU", 0), 0u) << r.error().message;
}

}  // namespace
}  // namespace compass::hardware
