#include "compass/hardware/presets.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <map>

#include "compass/core/units.hpp"
#include "compass/hardware/profile_io.hpp"

// Every number here is explained, with its source or marked assumed, in docs/presets.md.
namespace compass::hardware {

namespace {

// Sources quoted in Link::source and the notes.
constexpr const char* kNvlinkBridge =
    "NVLink bridge: 4 links x 14.0625 GB/s = 56.25 GB/s per direction (docs/presets.md); latency "
    "assumed 1.5 us";
constexpr const char* kPcieP2p =
    "PCIe 4.0 x16 GPU P2P measured 25-27 GB/s per direction (docs/presets.md), 26 used; latency "
    "assumed 1 us";
constexpr const char* kPcieUplink =
    "assumed: PCIe 4.0 x16 switch uplink, same effective 26 GB/s as a GPU x16 link; latency "
    "assumed 1 us";
constexpr const char* kCrossSocket =
    "assumed: 20 GB/s per direction effective for GPU P2P across sockets (slower than "
    "same-switch, docs/presets.md); latency assumed 1 us";
constexpr const char* kHostMemory =
    "assumed: 100 GB/s per direction for DMA into host DRAM (about half of 8-channel "
    "DDR4-3200); latency assumed 0.5 us";
constexpr const char* kStaged =
    "PCIe 4.0 x16 through host memory (P2P off) measured 20-22 GB/s per direction "
    "(docs/presets.md), 21 used; latency assumed 1 us";

DeviceSpec rtx_a6000() {
  return DeviceSpec{"RTX A6000",
                    "sm_86",
                    84,
                    {{DType::fp32, 38.7 * kTFLOPS},
                     {DType::fp16, 154.8 * kTFLOPS},
                     {DType::bf16, 154.8 * kTFLOPS}},
                    768 * kGB,
                    48 * kGB,
                    2};
}

DeviceSpec rtx_4090() {
  return DeviceSpec{"GeForce RTX 4090",
                    "sm_89",
                    128,
                    {{DType::fp32, 82.6 * kTFLOPS},
                     {DType::fp16, 165.2 * kTFLOPS},
                     {DType::bf16, 165.2 * kTFLOPS},
                     {DType::fp8, 330.3 * kTFLOPS}},
                    1008 * kGB,
                    24 * kGB,
                    2};
}

DeviceSpec a100_sxm_80gb() {
  return DeviceSpec{
      "A100 SXM4 80GB",
      "sm_80",
      108,
      {{DType::fp32, 19.5 * kTFLOPS}, {DType::fp16, 312 * kTFLOPS}, {DType::bf16, 312 * kTFLOPS}},
      2039 * kGB,
      80 * kGB,
      4};
}

DeviceSpec h100_sxm() {
  return DeviceSpec{"H100 SXM5 80GB",
                    "sm_90",
                    132,
                    {{DType::fp32, 66.9 * kTFLOPS},
                     {DType::fp16, 989.4 * kTFLOPS},
                     {DType::bf16, 989.4 * kTFLOPS},
                     {DType::fp8, 1978.9 * kTFLOPS}},
                    3350 * kGB,
                    80 * kGB,
                    4};
}

DeviceSpec h200_sxm() {
  DeviceSpec d = h100_sxm();
  d.name = "H200 SXM 141GB";
  d.memory_bandwidth_bytes_per_s = 4800 * kGB;
  d.memory_bytes = 141 * kGB;
  return d;
}

/// Adds nodes and links by name.
class Builder {
 public:
  Builder(std::string name, std::string description) {
    p_.name = std::move(name);
    p_.description = std::move(description);
  }
  Profile& profile() { return p_; }

  int node(const std::string& name, NodeKind kind, const std::string& device = "") {
    index_[name] = static_cast<int>(p_.nodes.size());
    p_.nodes.push_back(Node{name, kind, device});
    return index_[name];
  }
  void link(const std::string& name, LinkKind kind, const std::string& a, const std::string& b,
            double bandwidth, double latency_s, bool shared, const std::string& source) {
    p_.links.push_back(Link{name, kind, index_.at(a), index_.at(b), bandwidth, bandwidth, latency_s,
                            shared, source});
  }

 private:
  Profile p_;
  std::map<std::string, int> index_;
};

/// The dual-socket PCIe layout shared by a6000x8/x4 and rtx4090x8: per socket two PCIe
/// switches, two GPUs per switch, each switch on an x16 uplink to the socket's root complex.
void pcie_tree(Builder& b, int gpus, double gpu_link_bw, const char* gpu_link_source,
               double uplink_bw, const char* uplink_source) {
  const int switches = (gpus + 1) / 2;
  const int sockets = (switches + 1) / 2;
  for (int s = 0; s < switches; ++s) b.node(fmt::format("pcie-sw{}", s), NodeKind::pcie_switch);
  for (int k = 0; k < sockets; ++k) b.node(fmt::format("rc{}", k), NodeKind::root_complex);
  for (int k = 0; k < sockets; ++k) b.node(fmt::format("mem{}", k), NodeKind::host_memory);
  for (int g = 0; g < gpus; ++g)
    b.link(fmt::format("pcie-gpu{}", g), LinkKind::pcie, fmt::format("gpu{}", g),
           fmt::format("pcie-sw{}", g / 2), gpu_link_bw, 1e-6, false, gpu_link_source);
  for (int s = 0; s < switches; ++s)
    b.link(fmt::format("pcie-sw{}-up", s), LinkKind::pcie, fmt::format("pcie-sw{}", s),
           fmt::format("rc{}", s / 2), uplink_bw, 1e-6, true, uplink_source);
  for (int k = 0; k < sockets; ++k)
    b.link(fmt::format("mem{}", k), LinkKind::memory, fmt::format("rc{}", k),
           fmt::format("mem{}", k), 100 * kGB, 0.5e-6, true, kHostMemory);
  for (int k = 0; k + 1 < sockets; ++k)
    b.link(fmt::format("xsocket-{}-{}", k, k + 1), LinkKind::inter_socket, fmt::format("rc{}", k),
           fmt::format("rc{}", k + 1), 20 * kGB, 1e-6, true, kCrossSocket);
}

Profile a6000(int gpus) {
  Builder b(fmt::format("a6000x{}", gpus),
            gpus == 8 ? "8x RTX A6000, NVLink-bridged pairs, PCIe 4.0 switches, two sockets (the "
                        "paper's testbed)"
                      : "4x RTX A6000 on one socket: GPUs 0-3 of a6000x8");
  b.profile().devices.push_back(rtx_a6000());
  for (int g = 0; g < gpus; ++g) b.node(fmt::format("gpu{}", g), NodeKind::gpu, "RTX A6000");
  pcie_tree(b, gpus, 26 * kGB, kPcieP2p, 26 * kGB, kPcieUplink);
  for (int g = 0; g + 1 < gpus; g += 2)
    b.link(fmt::format("nvlink-{}-{}", g, g + 1), LinkKind::nvlink, fmt::format("gpu{}", g),
           fmt::format("gpu{}", g + 1), 56.25 * kGB, 1.5e-6, false, kNvlinkBridge);
  Profile& p = b.profile();
  p.calibration.gemm_efficiency = 123.0 / 154.8;
  p.calibration.source =
      "gemm_efficiency: measured BF16 matmul about 123 TFLOP/s of 154.8 peak (docs/presets.md)";
  p.notes = {
      "RTX A6000: 84 SMs, 154.8 TFLOP/s dense BF16/FP16, 38.7 FP32, 48 GB at 768 GB/s "
      "(docs/presets.md); 2 copy engines (assumed)",
      "NVLink bridges pair GPUs (0,1)(2,3)(4,5)(6,7): 56.25 GB/s per direction",
      "assumed PCIe layout: two PCIe 4.0 switches per socket, one NVLink pair per switch, each "
      "GPU on its own x16 link (26 GB/s, measured P2P 25-27), switch uplinks x16 (26 GB/s, "
      "shared)",
  };
  if (gpus == 8) {
    p.notes.push_back(
        "GPUs 0-3 on socket 0, 4-7 on socket 1; cross-socket link 20 GB/s per "
        "direction (assumed, shared)");
  } else {
    p.notes.push_back("GPUs 0-3 on one socket (no cross-socket link)");
  }
  p.notes.push_back("latencies assumed: NVLink 1.5 us, PCIe hop 1 us, host memory 0.5 us");
  return std::move(p);
}

Profile rtx4090x8() {
  Builder b("rtx4090x8",
            "8x RTX 4090, PCIe 4.0 only, no P2P (staged through host memory), two sockets");
  b.profile().devices.push_back(rtx_4090());
  for (int g = 0; g < 8; ++g) b.node(fmt::format("gpu{}", g), NodeKind::gpu, "GeForce RTX 4090");
  pcie_tree(b, 8, 21 * kGB, kStaged, 21 * kGB,
            "assumed: PCIe 4.0 x16 switch uplink at the staged 21 GB/s; latency assumed 1 us");
  Profile& p = b.profile();
  p.p2p = false;
  p.notes = {
      "RTX 4090: 128 SMs, 165.2 TFLOP/s dense BF16/FP16 with FP32 accumulate, 330.3 FP8, 82.6 "
      "FP32, 24 GB at 1008 GB/s (NVIDIA Ada whitepaper); 2 copy engines (assumed)",
      "no NVLink and no GPU P2P: every transfer is staged through host memory "
      "(gpu -> switch -> root complex -> DRAM -> ... -> gpu)",
      "assumed PCIe layout as a6000x8: two PCIe 4.0 switches per socket, two GPUs per switch, "
      "GPUs 0-3 on socket 0, 4-7 on socket 1",
      "PCIe links 21 GB/s per direction (staged copies measured 20-22, docs/presets.md); "
      "cross-socket 20 GB/s (assumed); host DRAM 100 GB/s (assumed)",
      "latencies assumed: PCIe hop 1 us, host memory 0.5 us",
  };
  return std::move(p);
}

Profile nvswitch_box(const std::string& name, const std::string& description,
                     const DeviceSpec& device, double link_bw, const std::string& source,
                     std::vector<std::string> notes) {
  Builder b(name, description);
  b.profile().devices.push_back(device);
  for (int g = 0; g < 8; ++g) b.node(fmt::format("gpu{}", g), NodeKind::gpu, device.name);
  b.node("nvswitch", NodeKind::nvswitch);
  for (int g = 0; g < 8; ++g)
    b.link(fmt::format("nvl-gpu{}", g), LinkKind::nvswitch, fmt::format("gpu{}", g), "nvswitch",
           link_bw, 0.75e-6, false, source);
  b.profile().notes = std::move(notes);
  return std::move(b.profile());
}

Profile a100x8() {
  return nvswitch_box(
      "a100x8", "DGX A100-like: 8x A100 SXM4 80GB on NVSwitch", a100_sxm_80gb(), 230 * kGB,
      "nominal 12 NVLink3 x 25 GB/s = 300 GB/s per direction; effective 230 GB/s = DGX A100 "
      "all-reduce bus bandwidth (docs/presets.md), which equals the per-direction rate each GPU "
      "link sustains in a ring; latency assumed 0.75 us per hop",
      {"A100 SXM4 80GB: 108 SMs, 312 TFLOP/s dense BF16/FP16, 19.5 FP32, 2039 GB/s, 80 GB "
       "(NVIDIA A100 datasheet); 4 copy engines (assumed)",
       "the six NVSwitch chips are modelled as one non-blocking switch node",
       "each GPU link 230 GB/s per direction effective (DGX A100 all-reduce bus bandwidth; "
       "nominal 300)",
       "latency assumed 0.75 us per hop (1.5 us GPU to GPU)"});
}

Profile h100x8() {
  return nvswitch_box(
      "h100x8", "DGX H100-like: 8x H100 SXM5 80GB on NVSwitch", h100_sxm(), 370 * kGB,
      "nominal 18 NVLink4 x 25 GB/s = 450 GB/s per direction; effective 370 GB/s per direction "
      "at application level (docs/presets.md); latency assumed 0.75 us per hop",
      {"H100 SXM5 80GB: 132 SMs, 989.4 TFLOP/s dense BF16/FP16, 1978.9 FP8, 66.9 FP32, 3.35 "
       "TB/s, 80 GB (NVIDIA H100 datasheet); 4 copy engines (assumed)",
       "the NVSwitch chips are modelled as one non-blocking switch node",
       "each GPU link 370 GB/s per direction effective (docs/presets.md; nominal 450)",
       "latency assumed 0.75 us per hop (1.5 us GPU to GPU)"});
}

Profile h200x1() {
  Builder b("h200x1", "one H200 SXM 141GB (the GPU the project can borrow)");
  b.profile().devices.push_back(h200_sxm());
  b.node("gpu0", NodeKind::gpu, "H200 SXM 141GB");
  Profile& p = b.profile();
  p.calibration.gemm_efficiency = 790.0 / 989.4;
  p.calibration.copy_bandwidth_bytes_per_s = 4.3e12;
  p.calibration.source =
      "measured on the borrowed H200 (docs/presets.md): BF16 matmul about 790 TFLOP/s of 989.4 "
      "peak, device copy about 4.3 TB/s";
  p.notes = {
      "H200 SXM: 132 SMs, 989.4 TFLOP/s dense BF16/FP16 (as H100), 1978.9 FP8, 66.9 FP32, "
      "4.8 TB/s HBM3e, 141 GB (NVIDIA H200 datasheet); 4 copy engines (assumed)",
      "a single GPU: no links and no routes",
  };
  return std::move(p);
}

struct PresetEntry {
  const char* name;
  std::function<Profile()> build;
};

const std::vector<PresetEntry>& registry() {
  static const std::vector<PresetEntry> entries = {
      {"a6000x8", [] { return a6000(8); }},
      {"a6000x4", [] { return a6000(4); }},
      {"rtx4090x8", rtx4090x8},
      {"a100x8", a100x8},
      {"h100x8", h100x8},
      {"h200x1", h200x1},
  };
  return entries;
}

const PresetEntry* find_preset(const std::string& name) {
  for (const PresetEntry& e : registry())
    if (name == e.name) return &e;
  return nullptr;
}

Error unknown_preset(const std::string& name) {
  return make_error("unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", "));
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const PresetEntry& e : registry()) names.emplace_back(e.name);
  return names;
}

Result<std::string> preset_description(const std::string& name) {
  const PresetEntry* e = find_preset(name);
  if (!e) return unknown_preset(name);
  // Built on demand: the description lives with the layout it describes.
  return e->build().description;
}

Result<Profile> make_preset(const std::string& name) {
  const PresetEntry* e = find_preset(name);
  if (!e) return unknown_preset(name);
  Profile p = e->build();
  Status routed = compute_missing_routes(p);
  COMPASS_CHECK(routed.ok(), "preset {}: {}", name, routed.error().message);
  Status valid = validate(p);
  COMPASS_CHECK(valid.ok(), "preset {}: {}", name, valid.error().message);
  return p;
}

Result<DeviceSpec> preset_device(const std::string& device_name) {
  for (const DeviceSpec& d : {rtx_a6000(), rtx_4090(), a100_sxm_80gb(), h100_sxm(), h200_sxm()})
    if (d.name == device_name) return d;
  return make_error("no preset uses a device named '{}'", device_name);
}

Profile make_multinode_nvswitch(int nodes, int gpus_per_node) {
  COMPASS_CHECK(nodes >= 1 && gpus_per_node >= 1, "make_multinode_nvswitch({}, {})", nodes,
                gpus_per_node);
  const int n = nodes * gpus_per_node;
  COMPASS_CHECK(2 * n + nodes + 1 <= 4096, "make_multinode_nvswitch: {} GPUs is too many", n);
  Profile p;
  p.name = fmt::format("h100-{}x{}", nodes, gpus_per_node);
  p.description = fmt::format(
      "{} servers of {} H100-like GPUs on NVSwitch, one 400 Gb/s NIC per GPU into one network "
      "switch",
      nodes, gpus_per_node);
  p.devices.push_back(h100_sxm());
  const std::string device = p.devices[0].name;
  // Node layout: GPUs 0..n-1, then one NVSwitch per server, one NIC per GPU, the network.
  p.nodes.reserve(2 * n + nodes + 1);
  for (int g = 0; g < n; ++g)
    p.nodes.push_back(Node{fmt::format("gpu{}", g), NodeKind::gpu, device});
  const int first_switch = n;
  for (int k = 0; k < nodes; ++k)
    p.nodes.push_back(Node{fmt::format("node{}-nvswitch", k), NodeKind::nvswitch, ""});
  const int first_nic = n + nodes;
  for (int g = 0; g < n; ++g) p.nodes.push_back(Node{fmt::format("nic{}", g), NodeKind::nic, ""});
  const int net = static_cast<int>(p.nodes.size());
  p.nodes.push_back(Node{"net", NodeKind::network, ""});
  // Links of GPU g: 3g to its NVSwitch, 3g+1 to its NIC, 3g+2 from the NIC to the network.
  p.links.reserve(3 * n);
  for (int g = 0; g < n; ++g) {
    p.links.push_back(Link{fmt::format("nvl-gpu{}", g), LinkKind::nvswitch, g,
                           first_switch + g / gpus_per_node, 370 * kGB, 370 * kGB, 0.75e-6, false,
                           "effective 370 GB/s per direction (docs/presets.md); latency assumed"});
    p.links.push_back(Link{fmt::format("pcie-nic{}", g), LinkKind::pcie, g, first_nic + g, 55 * kGB,
                           55 * kGB, 1e-6, false,
                           "assumed: PCIe 5.0 x16 between GPU and NIC, 55 GB/s effective"});
    p.links.push_back(Link{fmt::format("ib-nic{}", g), LinkKind::network, first_nic + g, net,
                           50 * kGB, 50 * kGB, 2e-6, true,
                           "400 Gb/s InfiniBand = 50 GB/s per direction; latency assumed 2 us"});
  }
  p.routes.reserve(static_cast<std::size_t>(n) * (n - 1));
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      if (s / gpus_per_node == d / gpus_per_node)
        p.routes.push_back(Route{s, d, {Hop{3 * s, true}, Hop{3 * d, false}}});
      else
        p.routes.push_back(Route{s,
                                 d,
                                 {Hop{3 * s + 1, true}, Hop{3 * s + 2, true}, Hop{3 * d + 2, false},
                                  Hop{3 * d + 1, false}}});
    }
  p.notes = {"generated by make_multinode_nvswitch for scale tests; H100-like numbers",
             "inside a server via its NVSwitch; across servers gpu -> nic -> net -> nic -> gpu"};
  return p;
}

}  // namespace compass::hardware
