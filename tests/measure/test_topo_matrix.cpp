// nvidia-smi topo -m matrices -> profiles, on the published matrices in tests/data/topo (each
// file names its source), plus the errors on text that cannot be read.

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "compass/hardware/gpu_models.hpp"
#include "compass/measure/live_topology.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/measure/topo_matrix.hpp"
#include "../test_files.hpp"

namespace compass::measure {

using namespace hardware;  // the profiles built from the matrices
namespace {

std::string topo_data(const std::string& rel) { return compass::testing::test_data(rel); }

Profile discover(const std::string& file, const std::string& gpu = "") {
  auto m = parse_topo_matrix(topo_data("topo/" + file), file);
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
  // Both NICs are PHB to GPU6 only: they hang on GPU6's root complex.
  EXPECT_EQ(count_kind(p, NodeKind::nic), 2);
  for (const Link& l : p.links)
    if (l.name == "pcie-nic0" || l.name == "pcie-nic1") {
      EXPECT_EQ(p.nodes[l.a].kind, NodeKind::nic);
      EXPECT_EQ(p.nodes[l.b].name, pcie_parent(p, 6));
    }
  const auto& notes = p.notes;
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("nic1 (NIC1) at ") != std::string::npos && n.find("PHB") != std::string::npos;
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

std::string topo_error(const std::string& text) {
  auto m = parse_topo_matrix(text, "t.txt");
  return m.ok() ? std::string() : m.error().message;
}

TEST(TopoMatrix, BadInputIsOneClearError) {
  const std::string head = "        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\n";
  const std::string r0 = "GPU0     X      PHB     SYS     0-7     0\n";
  const std::string r1 = "GPU1    PHB      X      SYS     0-7     0\n";
  const std::string r2 = "GPU2    SYS     SYS      X      8-15    1\n";
  EXPECT_TRUE(topo_error(head + r0 + r1 + r2).empty());
  EXPECT_EQ(topo_error(""), "t.txt: empty file (expected the output of nvidia-smi topo -m)");
  EXPECT_EQ(topo_error("  \n\n"), "t.txt: empty file (expected the output of nvidia-smi topo -m)");
  EXPECT_EQ(topo_error("hello\n").rfind("t.txt: no matrix header", 0), 0u);
  EXPECT_EQ(topo_error(head + r0 + r1),
            "t.txt: truncated matrix: the header names 3 GPUs but there is no row for GPU2");
  EXPECT_EQ(topo_error(head + r0 + "GPU1    PHB      X\n" + r2),
            "t.txt: line 3: truncated row GPU1: 2 of 3 entries");
  EXPECT_EQ(topo_error(head + r0 + "GPU1    PHB      X      QPI     0-7     0\n" + r2),
            "t.txt: line 3: row GPU1 column GPU2: unknown link code 'QPI' (expected X, NV#, PIX, "
            "PXB, PHB, NODE or SYS)");
  EXPECT_EQ(topo_error(head + r0 + r1 + r2 + "GPU3    SYS     SYS     SYS      X\n"),
            "t.txt: line 5: row GPU3 but the header names 3 GPUs (GPU0..GPU2): mismatched GPU count");
  EXPECT_EQ(topo_error(head + r0 + "GPU1    NODE     X      SYS     0-7     0\n" + r2),
            "t.txt: asymmetric matrix: GPU0 to GPU1 is PHB but GPU1 to GPU0 is NODE");
  EXPECT_EQ(topo_error(head + "GPU0    PHB     PHB     SYS     0-7     0\n" + r1 + r2),
            "t.txt: row GPU0 column GPU0: 'PHB' on the diagonal (expected X)");
}

TEST(TopoMatrix, NvlinkOnAGpuWithoutNvlinkIsAnError) {
  auto m = parse_topo_matrix(topo_data("topo/nvlink_pairs_4x3090.txt"), "f");
  ASSERT_TRUE(m.ok());
  auto p = profile_from_topo(*m, *find_gpu_model("rtx4090"), {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().message,
            "GPU model rtx4090 has no NVLink but the matrix shows NV# entries (pass --gpu)");
}

const std::string kSysfs = std::string(COMPASS_SOURCE_DIR) + "/tests/data/sysfs/two-sockets";

std::vector<LiveGpu> fixture_gpus() {
  auto gpus = live_gpus_from_json(topo_data("sysfs/two-sockets/nvml.json"), "nvml.json");
  EXPECT_TRUE(gpus.ok()) << gpus.error().message;
  return gpus.ok() ? *gpus : std::vector<LiveGpu>{};
}

TEST(LiveTopology, SysfsAndNvmlFixture) {
  const std::vector<LiveGpu> gpus = fixture_gpus();
  ASSERT_EQ(gpus.size(), 6u);
  auto m = topo_from_sysfs(kSysfs, gpus);
  ASSERT_TRUE(m.ok()) << m.error().message;
  // Every relation nvidia-smi topo -m prints, from the bridges above each GPU (README.md there).
  EXPECT_EQ(m->gpu[0][1].code, TopoCode::pix);                  // one switch
  EXPECT_EQ(m->gpu[2][3], (TopoEntry{TopoCode::nvlink, 4}));    // NVLink bridge, 4 links
  EXPECT_EQ(m->gpu[0][2].code, TopoCode::phb);                  // two root ports, one bridge
  EXPECT_EQ(m->gpu[1][3].code, TopoCode::phb);
  EXPECT_EQ(m->gpu[0][4].code, TopoCode::node);                 // two host bridges, one node
  EXPECT_EQ(m->gpu[3][4].code, TopoCode::node);
  for (int g = 0; g < 5; ++g) EXPECT_EQ(m->gpu[g][5].code, TopoCode::sys) << g;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(m->gpu[i][j], m->gpu[j][i]) << i << "," << j;
  EXPECT_EQ(m->numa[0], 0);
  EXPECT_EQ(m->numa[5], 1);
  auto key = gpu_key_for_name(gpus[0].name);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "a6000");
  auto p = profile_from_topo(*m, *find_gpu_model(*key), {});
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->gpu_count(), 6);
}

TEST(LiveTopology, PxbBelowNestedSwitches) {
  // GPU2 sits two switches deep, GPU3 one: more than one bridge between them. Without the
  // NVLink bridge the matrix shows PXB.
  std::vector<LiveGpu> gpus = fixture_gpus();
  ASSERT_EQ(gpus.size(), 6u);
  gpus[2].nvlink_remote.clear();
  gpus[3].nvlink_remote.clear();
  auto m = topo_from_sysfs(kSysfs, gpus);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->gpu[2][3].code, TopoCode::pxb);
}

TEST(LiveTopology, PcieLinksFromSysfs) {
  EXPECT_EQ(*pcie_gen_from_speed("16.0 GT/s PCIe"), 4);
  EXPECT_EQ(*pcie_gen_from_speed("8 GT/s"), 3);  // older kernels print no decimals
  EXPECT_EQ(*pcie_gen_from_speed("32.0 GT/s PCIe"), 5);
  EXPECT_EQ(*pcie_gen_from_speed("2.5 GT/s PCIe"), 1);
  EXPECT_FALSE(pcie_gen_from_speed("Unknown").ok());
  EXPECT_FALSE(pcie_gen_from_speed("12.0 GT/s PCIe").ok());
  auto links = pcie_links_from_sysfs(kSysfs, {"0000:03:00.0", "0000:81:00.0"});
  ASSERT_TRUE(links.ok()) << links.error().message;
  // Idle GPUs report 2.5 GT/s as their current speed; the maximum both ends support counts.
  EXPECT_EQ((*links)[0].gen, 4);
  EXPECT_EQ((*links)[0].width, 16);
  EXPECT_EQ((*links)[1].gen, 3);  // a Gen4 GPU in a Gen3 port
  auto missing = pcie_links_from_sysfs(kSysfs, {"0000:99:00.0"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("0000:99:00.0"), std::string::npos);
}

TEST(LiveTopology, ProfileTakesDeviceFactsFromCuda) {
  const std::vector<LiveGpu> gpus = fixture_gpus();
  ASSERT_EQ(gpus.size(), 6u);
  // What cuDeviceGet* would return: CUDA's own order (fastest first), matched by bus id.
  std::vector<CudaGpu> cuda;
  for (int i = 5; i >= 0; --i)
    cuda.push_back(CudaGpu{5 - i, "NVIDIA RTX A6000", gpus[i].pci_bus_id, 84, 8, 6,
                           47.5 * (1 << 30)});
  TopoProfileOptions options;
  options.name = "fixture";
  auto p = profile_from_live(gpus, Result<std::vector<CudaGpu>>(cuda), kSysfs, "", options);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->gpu_count(), 6);
  ASSERT_EQ(p->devices.size(), 1u);
  EXPECT_EQ(p->devices[0].sm_count, 84);
  EXPECT_DOUBLE_EQ(p->devices[0].memory_bytes, 47.5 * (1 << 30));
  EXPECT_EQ(p->devices[0].arch, "sm_86");
  const std::string notes = fmt::format("{}", fmt::join(p->notes, "\n"));
  EXPECT_NE(notes.find("from the CUDA driver: 84 SMs"), std::string::npos) << notes;
  EXPECT_NE(notes.find("GPU5 Gen3 x16"), std::string::npos) << notes;
  // The slowest GPU link (Gen3 x16) is the PCIe rate of the profile.
  const double gen3 = *pcie_raw_bytes_per_s(3, 16) * kPcieEfficiency;
  bool saw_pcie = false;
  for (const Link& l : p->links)
    if (l.kind == LinkKind::pcie) {
      saw_pcie = true;
      EXPECT_DOUBLE_EQ(l.bandwidth_bytes_per_s, gen3) << l.name;
    }
  EXPECT_TRUE(saw_pcie);

  // Without the CUDA driver: the table's facts, and the notes say why.
  auto table = profile_from_live(gpus, Result<std::vector<CudaGpu>>(make_error("no GPU: test")),
                                 kSysfs, "", options);
  ASSERT_TRUE(table.ok()) << table.error().message;
  EXPECT_EQ(table->devices[0].sm_count, find_gpu_model("a6000")->device.sm_count);
  const std::string tnotes = fmt::format("{}", fmt::join(table->notes, "\n"));
  EXPECT_NE(tnotes.find("SM count and memory from the GPU table, not queried: no GPU: test"),
            std::string::npos)
      << tnotes;

  // A CUDA device list that does not contain NVML's GPU 0 is an error, not a silent mix-up.
  cuda.erase(std::remove_if(cuda.begin(), cuda.end(),
                            [&](const CudaGpu& c) { return c.pci_bus_id == gpus[0].pci_bus_id; }),
             cuda.end());
  auto mismatch = profile_from_live(gpus, Result<std::vector<CudaGpu>>(cuda), kSysfs, "", options);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.error().message.find(gpus[0].pci_bus_id), std::string::npos);
}

TEST(LiveTopology, RealSysfsOfThisMachine) {
  // The kernel's own tree: every PCI function listed in /sys/bus/pci/devices resolves to a
  // place below /sys/devices/pci* (whatever the machine; no GPU needed).
  std::error_code ec;
  if (!std::filesystem::is_directory("/sys/bus/pci/devices", ec))
    GTEST_SKIP() << "no /sys/bus/pci on this machine";
  std::vector<std::string> ids;
  for (const auto& e : std::filesystem::directory_iterator("/sys/bus/pci/devices", ec))
    ids.push_back(e.path().filename().string());
  if (ids.empty()) GTEST_SKIP() << "no PCI devices listed";
  std::vector<LiveGpu> fake;
  for (const std::string& id : ids) fake.push_back(LiveGpu{"device " + id, id, {}});
  auto m = topo_from_sysfs("/sys", fake);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->gpu.size(), ids.size());
}

TEST(LiveTopology, SysfsErrorsNameTheDevice) {
  std::vector<LiveGpu> gpus = fixture_gpus();
  ASSERT_FALSE(gpus.empty());
  gpus[0].pci_bus_id = "0000:99:00.0";
  auto m = topo_from_sysfs(kSysfs, gpus);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("0000:99:00.0"), std::string::npos) << m.error().message;
  EXPECT_FALSE(topo_from_sysfs(kSysfs + "/no-such-dir", gpus).ok());
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
  auto c = query_cuda_devices();
  if (c.ok()) GTEST_SKIP() << "the CUDA driver lists " << c->size() << " GPUs";
  EXPECT_EQ(c.error().message.rfind("no GPU", 0), 0u) << c.error().message;
}

}  // namespace
}  // namespace compass::measure
