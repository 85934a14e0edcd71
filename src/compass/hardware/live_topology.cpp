#include "compass/hardware/live_topology.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace compass::hardware {

namespace {

namespace fs = std::filesystem;

// The few NVML entry points used, declared by their documented C signatures.
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr int kNvmlSuccess = 0;
constexpr unsigned kNvmlMaxLinks = 18;
struct NvmlPciInfo {  // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
};

struct DlClose {
  void operator()(void* h) const {
    if (h) dlclose(h);
  }
};

std::string read_first_line(const fs::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

/// The directory of PCI device `bdf` below devices/ (the chain of bridges above it is its
/// path), searched breadth-first to a bounded depth.
std::optional<fs::path> find_pci_device(const fs::path& devices, const std::string& bdf) {
  std::vector<fs::path> layer;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(devices, ec))
    if (e.path().filename().string().rfind("pci", 0) == 0) layer.push_back(e.path());
  for (int depth = 0; depth < 16 && !layer.empty(); ++depth) {
    std::vector<fs::path> next;
    for (const fs::path& dir : layer) {
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        if (!e.is_directory(ec) || e.is_symlink(ec)) continue;
        const std::string leaf = e.path().filename().string();
        if (leaf == bdf) return e.path();
        // PCI addresses look like 0000:00:01.0; recurse only into those.
        if (leaf.size() == 12 && leaf[4] == ':' && leaf[7] == ':' && leaf[10] == '.')
          next.push_back(e.path());
      }
    }
    layer = std::move(next);
  }
  return std::nullopt;
}

struct PciPlace {
  std::string host_bridge;          ///< "pci0000:00"
  std::vector<std::string> chain;   ///< bridges from the root port down, then the device
  int numa = -1;
};

}  // namespace

Result<std::string> normalise_bus_id(std::string_view id) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  const std::string s(id);
  char tail = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4 ||
      domain > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
    return make_error("malformed PCI bus id '{}'", id);
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, dev, fn);
}

Result<std::vector<LiveGpu>> query_nvml() {
  std::unique_ptr<void, DlClose> lib(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib) return make_error("no GPU: the NVIDIA driver's NVML library (libnvidia-ml.so.1) is not installed");
  Nvml n;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib.get(), name));
    return fn != nullptr;
  };
  if (!sym(n.init, "nvmlInit_v2") || !sym(n.shutdown, "nvmlShutdown") ||
      !sym(n.count, "nvmlDeviceGetCount_v2") || !sym(n.handle, "nvmlDeviceGetHandleByIndex_v2") ||
      !sym(n.name, "nvmlDeviceGetName") || !sym(n.pci, "nvmlDeviceGetPciInfo_v3") ||
      !sym(n.link_state, "nvmlDeviceGetNvLinkState") ||
      !sym(n.remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2"))
    return make_error("no GPU: libnvidia-ml.so.1 lacks the NVML functions Compass needs");
  if (n.init() != kNvmlSuccess) return make_error("no GPU: NVML did not initialise (no driver loaded?)");
  std::vector<LiveGpu> out;
  unsigned count = 0;
  if (n.count(&count) != kNvmlSuccess || count == 0) {
    n.shutdown();
    return make_error("no GPU: NVML reports no device");
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    if (n.handle(i, &d) != kNvmlSuccess) continue;
    LiveGpu g;
    char name[96] = {0};
    if (n.name(d, name, sizeof name) == kNvmlSuccess) g.name = name;
    NvmlPciInfo pci{};
    if (n.pci(d, &pci) == kNvmlSuccess) {
      auto id = normalise_bus_id(pci.bus_id);
      if (id.ok()) g.pci_bus_id = *id;
    }
    for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
      int active = 0;
      if (n.link_state(d, l, &active) != kNvmlSuccess || !active) continue;
      NvmlPciInfo remote{};
      if (n.remote_pci(d, l, &remote) != kNvmlSuccess) continue;
      auto id = normalise_bus_id(remote.bus_id);
      if (id.ok()) g.nvlink_remote.push_back(*id);
    }
    out.push_back(std::move(g));
  }
  n.shutdown();
  if (out.empty()) return make_error("no GPU: NVML lists devices but none could be queried");
  return out;
}

Result<std::vector<LiveGpu>> live_gpus_from_json(std::string_view text, std::string_view origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const std::exception&) {
    return make_error("{}: malformed JSON", origin);
  }
  if (!j.is_object() || !j.contains("gpus") || !j["gpus"].is_array())
    return make_error("{}: expected an object with a \"gpus\" array", origin);
  std::vector<LiveGpu> out;
  for (std::size_t i = 0; i < j["gpus"].size(); ++i) {
    const auto& g = j["gpus"][i];
    const std::string path = fmt::format("{}: gpus[{}]", origin, i);
    if (!g.is_object() || !g.contains("name") || !g["name"].is_string() ||
        !g.contains("pci_bus_id") || !g["pci_bus_id"].is_string())
      return make_error("{}: needs \"name\" and \"pci_bus_id\" strings", path);
    LiveGpu x;
    x.name = g["name"].get<std::string>();
    COMPASS_ASSIGN(x.pci_bus_id, normalise_bus_id(g["pci_bus_id"].get<std::string>()));
    if (g.contains("nvlink_remote")) {
      if (!g["nvlink_remote"].is_array()) return make_error("{}.nvlink_remote: expected an array", path);
      for (const auto& r : g["nvlink_remote"]) {
        if (!r.is_string()) return make_error("{}.nvlink_remote: expected bus id strings", path);
        COMPASS_ASSIGN(std::string id, normalise_bus_id(r.get<std::string>()));
        x.nvlink_remote.push_back(id);
      }
    }
    out.push_back(std::move(x));
  }
  if (out.empty()) return make_error("{}: no GPU listed", origin);
  return out;
}

Result<TopoMatrix> topo_from_sysfs(const std::string& sysfs_root, const std::vector<LiveGpu>& gpus) {
  const fs::path devices = fs::path(sysfs_root) / "devices";
  std::error_code ec;
  if (!fs::is_directory(devices, ec)) return make_error("{}: no devices directory", sysfs_root);
  const int n = static_cast<int>(gpus.size());
  std::vector<PciPlace> place(n);
  for (int g = 0; g < n; ++g) {
    auto dir = find_pci_device(devices, gpus[g].pci_bus_id);
    if (!dir)
      return make_error("{}: GPU {} at {} is not in the PCI tree", sysfs_root, g, gpus[g].pci_bus_id);
    const fs::path rel = fs::relative(*dir, devices, ec);
    auto it = rel.begin();
    place[g].host_bridge = it->string();
    for (++it; it != rel.end(); ++it) place[g].chain.push_back(it->string());
    const std::string numa = read_first_line(*dir / "numa_node");
    try {
      place[g].numa = numa.empty() ? -1 : std::stoi(numa);
    } catch (const std::exception&) {
      place[g].numa = -1;
    }
  }
  TopoMatrix m;
  for (int g = 0; g < n; ++g) m.gpus.push_back(fmt::format("GPU{}", g));
  m.gpu.assign(n, std::vector<TopoEntry>(n));
  m.nic.assign(n, {});
  m.cpu_affinity.assign(n, "");
  m.numa.assign(n, std::nullopt);
  std::map<std::string, int> by_bus;
  for (int g = 0; g < n; ++g) {
    by_bus[gpus[g].pci_bus_id] = g;
    if (place[g].numa >= 0) m.numa[g] = place[g].numa;
  }
  // NVLinks: to another GPU directly, or to a switch (any other end).
  std::vector<std::map<int, int>> direct(n);
  std::vector<int> to_switch(n, 0);
  for (int g = 0; g < n; ++g)
    for (const std::string& r : gpus[g].nvlink_remote) {
      auto it = by_bus.find(r);
      if (it != by_bus.end())
        ++direct[g][it->second];
      else
        ++to_switch[g];
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      TopoEntry& e = m.gpu[i][j];
      const int nv = std::min(direct[i].count(j) ? direct[i].at(j) : 0,
                              direct[j].count(i) ? direct[j].at(i) : 0) +
                     std::min(to_switch[i], to_switch[j]);
      if (nv > 0) {
        e = TopoEntry{TopoCode::nvlink, nv};
        continue;
      }
      const PciPlace &a = place[i], &b = place[j];
      if (a.numa >= 0 && b.numa >= 0 && a.numa != b.numa) {
        e.code = TopoCode::sys;
      } else if (a.host_bridge != b.host_bridge) {
        e.code = TopoCode::node;
      } else {
        std::size_t common = 0;
        while (common < a.chain.size() && common < b.chain.size() && a.chain[common] == b.chain[common])
          ++common;
        if (common == 0) {
          e.code = TopoCode::phb;  // different root ports of one host bridge
        } else {
          // Below the deepest shared bridge: one downstream port each is a single switch.
          const bool single = a.chain.size() == common + 2 && b.chain.size() == common + 2;
          e.code = single ? TopoCode::pix : TopoCode::pxb;
        }
      }
    }
  return m;
}

Result<std::string> gpu_key_for_name(const std::string& nvml_name) {
  std::string up = nvml_name;
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  const std::pair<const char*, const char*> table[] = {
      {"H200", "h200"}, {"H100", "h100"}, {"A100", "a100"}, {"V100", "v100"},
      {"A6000", "a6000"}, {"3090", "rtx3090"}, {"4090", "rtx4090"}};
  for (const auto& [needle, key] : table)
    if (up.find(needle) != std::string::npos) return std::string(key);
  return make_error("GPU '{}' is not in the known GPU table; pass --gpu", nvml_name);
}

Result<Profile> discover_live(const std::string& sysfs_root, const std::string& gpu,
                              const TopoProfileOptions& options) {
  COMPASS_ASSIGN(std::vector<LiveGpu> gpus, query_nvml());
  COMPASS_ASSIGN(TopoMatrix m, topo_from_sysfs(sysfs_root, gpus));
  COMPASS_ASSIGN(std::string key, gpu.empty() ? gpu_key_for_name(gpus[0].name) : Result<std::string>(gpu));
  COMPASS_ASSIGN(GpuModel model, find_gpu_model(key));
  COMPASS_ASSIGN(Profile p, profile_from_topo(m, model, options));
  p.notes.insert(p.notes.begin(),
                 fmt::format("discovered on this machine: NVML names the GPUs '{}'; SM count and "
                             "memory from the GPU table, not measured",
                             gpus[0].name));
  return p;
}

}  // namespace compass::hardware
