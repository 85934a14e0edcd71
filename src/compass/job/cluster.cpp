#include "compass/job/cluster.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "compass/core/json_text.hpp"
#include "compass/core/units.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_io.hpp"

// Every number of the built-in clusters is listed with its source in docs/job.md.
namespace compass::job {

namespace {

// Latencies of the InfiniBand fabrics (assumed, docs/job.md): NIC to NIC 2 us through one
// switch, 0.5 us per further switch hop, three hops across a leaf-spine fat tree.
NetworkSpec fat_tree(const std::string& source) {
  return NetworkSpec{1.0, 0.5e-6, 3, source};
}

Cluster from_preset(const std::string& preset) {
  Result<hardware::Profile> p = hardware::make_preset(preset);
  COMPASS_CHECK(p.ok(), "cluster node preset {}", preset);
  Cluster c;
  c.node = std::move(p).value();
  return c;
}

Cluster dgx_a100() {
  Cluster c = from_preset("a100x8");
  c.name = "dgx-a100";
  c.description = "DGX A100 nodes: 8x A100 SXM4 80GB on NVSwitch, 8x HDR 200 Gb/s compute NICs";
  c.nic = NicSpec{8,
                  200,
                  0.9,
                  2e-6,
                  true,
                  "DGX A100 User Guide: 8 single-port ConnectX-6 HDR 200 Gb/s for the cluster "
                  "network, one per GPU; efficiency and latency assumed"};
  c.network = fat_tree("assumed: non-blocking rail-optimised fat tree (DGX SuperPOD design)");
  return c;
}

Cluster dgx_h100() {
  Cluster c = from_preset("h100x8");
  c.name = "dgx-h100";
  c.description = "DGX H100 nodes: 8x H100 SXM5 80GB on NVSwitch, 8x NDR 400 Gb/s compute NICs";
  c.nic = NicSpec{8,
                  400,
                  0.9,
                  2e-6,
                  true,
                  "DGX H100 User Guide: 4 OSFP ports serving 8 single-port ConnectX-7 NDR "
                  "400 Gb/s, one per GPU; efficiency and latency assumed"};
  c.network = fat_tree("assumed: non-blocking rail-optimised fat tree (DGX SuperPOD design)");
  return c;
}

Cluster a6000_box() {
  Cluster c = from_preset("a6000x8");
  c.name = "a6000x8-2nic";
  c.description = "PCIe boxes of the paper's kind: 8x RTX A6000, two 100 Gb/s NICs per node";
  c.nic = NicSpec{2,
                  100,
                  0.9,
                  2e-6,
                  false,
                  "assumed: two ConnectX-5/6 class 100 Gb/s NICs per PCIe server, shared by the "
                  "GPUs; efficiency and latency assumed"};
  c.network = fat_tree("assumed: non-blocking two-level Ethernet/InfiniBand tree");
  return c;
}

// GB200 NVL72: one NVLink domain of 72 Blackwell GPUs. The device is built here: no machine
// preset uses it.
hardware::DeviceSpec gb200_gpu() {
  hardware::DeviceSpec d;
  d.name = "B200 (GB200 NVL72)";
  d.arch = "sm_100";
  d.sm_count = 148;
  d.peak_flops = {
      {DType::fp32, 80e12}, {DType::fp16, 2.5e15}, {DType::bf16, 2.5e15}, {DType::fp8, 5e15}};
  d.memory_bandwidth_bytes_per_s = 8e12;
  d.memory_bytes = 186 * kGB;
  d.copy_engines = 4;
  return d;
}

hardware::Profile nvl72_domain() {
  hardware::Profile p;
  p.name = "gb200-nvl72";
  p.description = "72 B200 GPUs of a GB200 NVL72 rack on one NVLink5 switch domain";
  p.devices.push_back(gb200_gpu());
  constexpr int kGpus = 72;
  for (int g = 0; g < kGpus; ++g)
    p.nodes.push_back(
        hardware::Node{fmt::format("gpu{}", g), hardware::NodeKind::gpu, p.devices[0].name});
  p.nodes.push_back(hardware::Node{"nvswitch", hardware::NodeKind::nvswitch, ""});
  // Effective rate assumed at the same 82% of nominal that h100x8 uses (370 of 450 GB/s).
  const double bw = 900 * kGB * 370.0 / 450.0;
  for (int g = 0; g < kGpus; ++g)
    p.links.push_back(hardware::Link{fmt::format("nvl-gpu{}", g), hardware::LinkKind::nvswitch, g,
                                     kGpus, bw, bw, 0.75e-6, false,
                                     "NVLink5 900 GB/s per direction per GPU nominal; effective "
                                     "82% assumed as h100x8; latency assumed 0.75 us per hop"});
  p.notes = {
      "B200 in GB200 NVL72: 2.5 PFLOP/s dense BF16, 5 FP8, 186 GB HBM3e at 8 TB/s "
      "(NVIDIA GB200 NVL72 specifications, per GPU = rack / 72)",
      "the NVLink switch trays are modelled as one non-blocking switch node"};
  Status routed = hardware::compute_missing_routes(p);
  COMPASS_CHECK(routed.ok(), "nvl72: {}", routed.error().message);
  return p;
}

Cluster gb200_nvl72() {
  Cluster c;
  c.node = nvl72_domain();
  c.name = "gb200-nvl72";
  c.description = "GB200 NVL72 racks: 72 B200 GPUs on NVLink5, one 400 Gb/s NIC per GPU";
  c.nic = NicSpec{72,
                  400,
                  0.9,
                  2e-6,
                  true,
                  "ConnectX-7 400 Gb/s, one per GPU (4 per 4-GPU compute tray, MLPerf GB200 "
                  "NVL72 system descriptions); efficiency and latency assumed"};
  c.network = fat_tree("assumed: non-blocking rail-optimised fat tree between racks");
  return c;
}

struct Entry {
  const char* name;
  std::function<Cluster()> build;
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
      {"dgx-a100", dgx_a100},
      {"dgx-h100", dgx_h100},
      {"a6000x8-2nic", a6000_box},
      {"gb200-nvl72", gb200_nvl72},
  };
  return entries;
}

Result<std::string> read_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return make_error("{}: not a regular file", path);
  constexpr std::uintmax_t kMaxBytes = std::uintmax_t{64} << 20;
  if (fs::file_size(path, ec) > kMaxBytes) return make_error("{}: file too large", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot open for reading", path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

template <typename T>
Result<T> field(const nlohmann::json& j, const char* key, T fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const nlohmann::json& v = j.at(key);
  if constexpr (std::is_same_v<T, int>) {
    // An integer as written: never a fraction cut short, nor a count past int's range.
    if (!json_integer(v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()))
      return make_error("{}: {}: expected an integer, got {}", where, key, v.dump());
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    return make_error("{}: {}: wrong type", where, key);
  }
}

// A misspelt field would fall back to its default without a word: every key must be known.
Status known_keys(const nlohmann::json& j, std::initializer_list<const char*> known,
                  const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; }))
      return make_error("{}: unknown field '{}' (known: {})", where, it.key(),
                        fmt::join(known, ", "));
  return Status::success();
}

// The NICs a machine profile lists (e.g. read by `compass discover` from nvidia-smi topo -m).
int profile_nics(const hardware::Profile& p) {
  return static_cast<int>(
      std::count_if(p.nodes.begin(), p.nodes.end(),
                    [](const hardware::Node& n) { return n.kind == hardware::NodeKind::nic; }));
}

}  // namespace

double Cluster::nic_bytes_per_s_per_gpu() const {
  const double node_bytes_per_s = nic.count * nic.gbps * 1e9 / 8 * nic.efficiency;
  return node_bytes_per_s / gpus_per_node() / network.oversubscription;
}

double Cluster::inter_node_latency_s() const {
  return nic.latency_s + std::max(0, network.hops - 1) * network.hop_latency_s;
}

std::vector<std::string> cluster_names() {
  std::vector<std::string> names;
  for (const Entry& e : registry()) names.emplace_back(e.name);
  return names;
}

Result<Cluster> builtin_cluster(const std::string& name) {
  for (const Entry& e : registry())
    if (name == e.name) return e.build();
  return make_error("unknown cluster '{}' (known: {})", name, fmt::join(cluster_names(), ", "));
}

Status validate(const Cluster& c) {
  if (c.node.gpu_count() < 1) return make_error("cluster {}: the node has no GPU", c.name);
  if (c.max_nodes < 0) return make_error("cluster {}: nodes must be >= 0", c.name);
  if (c.nic.count < 1 || c.nic.count > 1024)
    return make_error("cluster {}: nic.count must be in 1..1024", c.name);
  if (!(c.nic.gbps > 0) || c.nic.gbps > 1e6)
    return make_error("cluster {}: nic.gbps must be in (0, 1e6]", c.name);
  if (!(c.nic.efficiency > 0 && c.nic.efficiency <= 1))
    return make_error("cluster {}: nic.efficiency must be in (0, 1]", c.name);
  if (!(c.nic.latency_s >= 0 && c.nic.latency_s < 1))
    return make_error("cluster {}: nic.latency_us must be in [0, 1e6)", c.name);
  if (!(c.network.oversubscription >= 1 && c.network.oversubscription <= 1000))
    return make_error("cluster {}: network.oversubscription must be in [1, 1000]", c.name);
  if (!(c.network.hop_latency_s >= 0 && c.network.hop_latency_s < 1))
    return make_error("cluster {}: network.hop_latency_us must be in [0, 1e6)", c.name);
  if (c.network.hops < 1 || c.network.hops > 16)
    return make_error("cluster {}: network.hops must be in 1..16", c.name);
  return Status::success();
}

Result<Cluster> cluster_from_json(const std::string& text, const std::string& origin) {
  COMPASS_ASSIGN(const nlohmann::json j, parse_json_text(text, origin));
  if (!j.is_object()) return make_error("{}: expected a JSON object", origin);
  // A machine profile (its "nodes" is the list of topology nodes) is a one-node cluster.
  if (j.contains("nodes") && j["nodes"].is_array()) {
    COMPASS_ASSIGN(hardware::Profile p, hardware::profile_from_json(text, origin));
    Cluster c;
    c.name = p.name;
    c.description = "one node: " + p.description;
    c.node = std::move(p);
    c.max_nodes = 1;
    c.nic.count = std::max(1, profile_nics(c.node));
    c.nic.source = "a machine profile: one node, no network";
    return c;
  }
  Cluster c;
  if (!j.contains("node"))
    return make_error("{}: missing \"node\" (a preset name or a profile)", origin);
  if (j["node"].is_string()) {
    COMPASS_ASSIGN(c.node, hardware::make_preset(j["node"].get<std::string>()));
  } else if (j["node"].is_object()) {
    COMPASS_ASSIGN(c.node, hardware::profile_from_json(j["node"].dump(), origin + ": node"));
  } else {
    return make_error("{}: node: expected a preset name or a profile object", origin);
  }
  COMPASS_ASSIGN(c.name, field<std::string>(j, "name", "cluster", origin));
  COMPASS_ASSIGN(c.description, field<std::string>(j, "description", "", origin));
  COMPASS_ASSIGN(c.max_nodes, field<int>(j, "nodes", 0, origin));
  COMPASS_ASSIGN(c.notes, field<std::vector<std::string>>(j, "notes", {}, origin));
  const nlohmann::json nic = j.value("nic", nlohmann::json::object());
  const nlohmann::json net = j.value("network", nlohmann::json::object());
  if (!nic.is_object() || !net.is_object())
    return make_error("{}: nic and network must be objects", origin);
  const std::string nw = origin + ": nic", tw = origin + ": network";
  COMPASS_TRY(
      known_keys(j, {"name", "description", "nodes", "node", "nic", "network", "notes"}, origin));
  COMPASS_TRY(known_keys(
      nic, {"count", "gbps", "efficiency", "latency_us", "rail_optimized", "source"}, nw));
  COMPASS_TRY(known_keys(net, {"oversubscription", "hop_latency_us", "hops", "source"}, tw));
  // Without a count, the NICs the node's profile lists (one when it lists none).
  COMPASS_ASSIGN(c.nic.count, field<int>(nic, "count", std::max(1, profile_nics(c.node)), nw));
  COMPASS_ASSIGN(c.nic.gbps, field<double>(nic, "gbps", c.nic.gbps, nw));
  COMPASS_ASSIGN(c.nic.efficiency, field<double>(nic, "efficiency", c.nic.efficiency, nw));
  COMPASS_ASSIGN(double nic_us, field<double>(nic, "latency_us", c.nic.latency_s * 1e6, nw));
  c.nic.latency_s = nic_us * 1e-6;
  COMPASS_ASSIGN(c.nic.rail_optimized, field<bool>(nic, "rail_optimized", true, nw));
  COMPASS_ASSIGN(c.nic.source, field<std::string>(nic, "source", "", nw));
  COMPASS_ASSIGN(c.network.oversubscription,
                 field<double>(net, "oversubscription", c.network.oversubscription, tw));
  COMPASS_ASSIGN(double hop_us,
                 field<double>(net, "hop_latency_us", c.network.hop_latency_s * 1e6, tw));
  c.network.hop_latency_s = hop_us * 1e-6;
  COMPASS_ASSIGN(c.network.hops, field<int>(net, "hops", c.network.hops, tw));
  COMPASS_ASSIGN(c.network.source, field<std::string>(net, "source", "", tw));
  if (Status s = validate(c); !s.ok()) return make_error("{}: {}", origin, s.error().message);
  return c;
}

std::string cluster_to_json(const Cluster& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["description"] = c.description;
  j["nodes"] = c.max_nodes;
  j["node"] = nlohmann::ordered_json::parse(hardware::profile_to_json(c.node));
  j["nic"] = {{"count", c.nic.count},
              {"gbps", c.nic.gbps},
              {"efficiency", c.nic.efficiency},
              {"latency_us", c.nic.latency_s * 1e6},
              {"rail_optimized", c.nic.rail_optimized},
              {"source", c.nic.source}};
  j["network"] = {{"oversubscription", c.network.oversubscription},
                  {"hop_latency_us", c.network.hop_latency_s * 1e6},
                  {"hops", c.network.hops},
                  {"source", c.network.source}};
  j["notes"] = c.notes;
  return j.dump(2) + "\n";
}

Result<Cluster> resolve_cluster(const std::string& name_or_path) {
  for (const Entry& e : registry())
    if (name_or_path == e.name) return e.build();
  std::error_code ec;
  if (!name_or_path.empty() && std::filesystem::exists(name_or_path, ec)) {
    COMPASS_ASSIGN(std::string text, read_text(name_or_path));
    return cluster_from_json(text, name_or_path);
  }
  const auto presets = hardware::preset_names();
  if (std::find(presets.begin(), presets.end(), name_or_path) != presets.end()) {
    Cluster c = from_preset(name_or_path);
    c.name = name_or_path;
    c.description = "one node: " + c.node.description;
    c.max_nodes = 1;
    c.nic.source = "a machine preset: one node, no network";
    return c;
  }
  return make_error("unknown cluster '{}': not a built-in cluster ({}), machine preset or file",
                    name_or_path, fmt::join(cluster_names(), ", "));
}

}  // namespace compass::job
