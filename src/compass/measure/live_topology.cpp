#include "compass/measure/live_topology.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "compass/core/json_text.hpp"

namespace compass::measure {

using namespace hardware;  // what these read and write: profiles, GPU models, links

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

/// The directory of PCI device `bdf`: the kernel's bus/pci/devices/<bdf> symlink resolved, so
/// its path below devices/ is the host bridge, then every bridge down to the device.
Result<fs::path> pci_device_dir(const fs::path& root, const std::string& bdf) {
  const fs::path link = root / "bus" / "pci" / "devices" / bdf;
  std::error_code ec;
  if (!fs::exists(link, ec))
    return make_error("{}: PCI device {} is not listed in bus/pci/devices", root.string(), bdf);
  fs::path dir = fs::canonical(link, ec);
  if (ec) return make_error("{}: cannot resolve {}", root.string(), link.string());
  return dir;
}

int read_int(const fs::path& p, int fallback) {
  const std::string text = read_first_line(p);
  try {
    return text.empty() ? fallback : std::stoi(text);
  } catch (const std::exception&) {
    return fallback;
  }
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

Result<std::vector<CudaGpu>> query_cuda_devices() {
  // Driver API entry points by their documented C signatures (CUdevice is an int, CUresult an
  // enum whose success value is 0), so no CUDA header or library is needed to build this.
  std::unique_ptr<void, DlClose> lib(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!lib)
    return make_error("no GPU: the NVIDIA driver's CUDA library (libcuda.so.1) is not installed");
  int (*init)(unsigned) = nullptr;
  int (*count)(int*) = nullptr;
  int (*get)(int*, int) = nullptr;
  int (*name)(char*, int, int) = nullptr;
  int (*attribute)(int*, int, int) = nullptr;
  int (*total_mem)(std::size_t*, int) = nullptr;
  int (*bus_id)(char*, int, int) = nullptr;
  auto sym = [&](auto& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib.get(), symbol));
    return fn != nullptr;
  };
  if (!sym(init, "cuInit") || !sym(count, "cuDeviceGetCount") || !sym(get, "cuDeviceGet") ||
      !sym(name, "cuDeviceGetName") || !sym(attribute, "cuDeviceGetAttribute") ||
      !sym(total_mem, "cuDeviceTotalMem_v2") || !sym(bus_id, "cuDeviceGetPCIBusId"))
    return make_error("no GPU: libcuda.so.1 lacks the driver API functions Compass needs");
  if (const int rc = init(0); rc != 0)
    return make_error("no GPU: cuInit failed with CUDA error {}", rc);
  int n = 0;
  if (count(&n) != 0 || n <= 0) return make_error("no GPU: the CUDA driver reports no device");
  constexpr int kMultiprocessorCount = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  constexpr int kComputeMajor = 75;         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  constexpr int kComputeMinor = 76;         // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
  std::vector<CudaGpu> out;
  for (int i = 0; i < n; ++i) {
    int dev = 0;
    if (get(&dev, i) != 0) return make_error("no GPU: cuDeviceGet({}) failed", i);
    CudaGpu g;
    g.ordinal = i;
    char text[128] = {0};
    if (name(text, sizeof text, dev) == 0) g.name = text;
    char bus[32] = {0};
    if (bus_id(bus, sizeof bus, dev) != 0)
      return make_error("no GPU: cuDeviceGetPCIBusId failed for device {}", i);
    COMPASS_ASSIGN(g.pci_bus_id, normalise_bus_id(bus));
    if (attribute(&g.sm_count, kMultiprocessorCount, dev) != 0 ||
        attribute(&g.cc_major, kComputeMajor, dev) != 0 ||
        attribute(&g.cc_minor, kComputeMinor, dev) != 0)
      return make_error("no GPU: cuDeviceGetAttribute failed for device {}", i);
    std::size_t bytes = 0;
    if (total_mem(&bytes, dev) == 0) g.memory_bytes = static_cast<double>(bytes);
    out.push_back(std::move(g));
  }
  return out;
}

Result<int> pcie_gen_from_speed(std::string_view speed) {
  double gts = 0;
  char unit[8] = {0};
  const std::string s(speed);
  if (std::sscanf(s.c_str(), "%lf %7s", &gts, unit) != 2 || std::string(unit) != "GT/s")
    return make_error("unrecognised PCIe link speed '{}'", speed);
  // Per-lane signalling rate of each generation.
  const std::pair<double, int> rates[] = {{2.5, 1}, {5.0, 2}, {8.0, 3}, {16.0, 4}, {32.0, 5}, {64.0, 6}};
  for (const auto& [rate, gen] : rates)
    if (std::abs(gts - rate) < 0.01) return gen;
  return make_error("unrecognised PCIe link speed '{}'", speed);
}

Result<std::vector<PcieLinkInfo>> pcie_links_from_sysfs(const std::string& sysfs_root,
                                                        const std::vector<std::string>& bus_ids) {
  std::vector<PcieLinkInfo> out;
  for (const std::string& bdf : bus_ids) {
    COMPASS_ASSIGN(const fs::path dir, pci_device_dir(sysfs_root, bdf));
    // The link trains to what both ends support: the GPU and the port directly above it.
    PcieLinkInfo link{99, 1 << 10};
    for (const fs::path& end : {dir, dir.parent_path()}) {
      const std::string speed = read_first_line(end / "max_link_speed");
      const int width = read_int(end / "max_link_width", -1);
      if (speed.empty() || width <= 0) {
        if (end == dir) return make_error("{}: {} has no max_link_speed/max_link_width", sysfs_root, bdf);
        continue;  // the device sits directly on a host bridge: no port above it
      }
      COMPASS_ASSIGN(const int gen, pcie_gen_from_speed(speed));
      link.gen = std::min(link.gen, gen);
      link.width = std::min(link.width, width);
    }
    out.push_back(link);
  }
  return out;
}

Result<std::vector<LiveGpu>> live_gpus_from_json(std::string_view text, std::string_view origin) {
  COMPASS_ASSIGN(const nlohmann::json j, parse_json_text(text, origin));
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
  std::error_code ec;
  const fs::path devices = fs::canonical(fs::path(sysfs_root) / "devices", ec);
  if (ec || !fs::is_directory(devices, ec))
    return make_error("{}: no devices directory", sysfs_root);
  const int n = static_cast<int>(gpus.size());
  std::vector<PciPlace> place(n);
  for (int g = 0; g < n; ++g) {
    COMPASS_ASSIGN(const fs::path dir, pci_device_dir(sysfs_root, gpus[g].pci_bus_id));
    const fs::path rel = dir.lexically_relative(devices);
    if (rel.empty() || *rel.begin() == ".." || std::distance(rel.begin(), rel.end()) < 2)
      return make_error("{}: GPU {} at {} is not below devices/pci*", sysfs_root, g,
                        gpus[g].pci_bus_id);
    auto it = rel.begin();
    place[g].host_bridge = it->string();
    for (++it; it != rel.end(); ++it) place[g].chain.push_back(it->string());
    place[g].numa = read_int(dir / "numa_node", -1);
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

Result<Profile> profile_from_live(const std::vector<LiveGpu>& gpus,
                                  const Result<std::vector<CudaGpu>>& cuda,
                                  const std::string& sysfs_root, const std::string& gpu,
                                  const TopoProfileOptions& options) {
  COMPASS_ASSIGN(TopoMatrix m, topo_from_sysfs(sysfs_root, gpus));
  COMPASS_ASSIGN(std::string key, gpu.empty() ? gpu_key_for_name(gpus[0].name) : Result<std::string>(gpu));
  COMPASS_ASSIGN(GpuModel model, find_gpu_model(key));
  std::vector<std::string> notes;
  notes.push_back(fmt::format("discovered on this machine: NVML lists {} GPU{} ('{}'); tensor "
                              "peaks and memory bandwidth from the GPU table ({})",
                              gpus.size(), gpus.size() == 1 ? "" : "s", gpus[0].name, model.key));
  // SM count, memory and architecture: what the CUDA driver reports for NVML's GPU 0.
  if (cuda.ok()) {
    const CudaGpu* match = nullptr;
    for (const CudaGpu& c : *cuda)
      if (c.pci_bus_id == gpus[0].pci_bus_id) match = &c;
    if (match == nullptr)
      return make_error("the CUDA driver lists no GPU at {} where NVML has GPU 0",
                        gpus[0].pci_bus_id);
    for (const LiveGpu& g : gpus) {
      const bool seen = std::any_of(cuda->begin(), cuda->end(), [&](const CudaGpu& c) {
        return c.pci_bus_id == g.pci_bus_id;
      });
      if (!seen)
        notes.push_back(fmt::format("the CUDA driver does not list the GPU at {} (hidden by "
                                    "CUDA_VISIBLE_DEVICES?); its device facts are GPU 0's",
                                    g.pci_bus_id));
    }
    for (const CudaGpu& c : *cuda)
      if (c.sm_count != match->sm_count || c.memory_bytes != match->memory_bytes ||
          c.name != match->name)
        notes.push_back(fmt::format("GPUs differ: CUDA device {} is a {} with {} SMs; the "
                                    "profile describes every GPU as GPU 0",
                                    c.ordinal, c.name, c.sm_count));
    notes.push_back(fmt::format("from the CUDA driver: {} SMs, {:.1f} GiB, compute capability "
                                "{}.{} (table: {} SMs, {:.1f} GiB)",
                                match->sm_count, match->memory_bytes / double(1 << 30),
                                match->cc_major, match->cc_minor, model.device.sm_count,
                                model.device.memory_bytes / double(1 << 30)));
    model.device.sm_count = match->sm_count;
    model.device.memory_bytes = match->memory_bytes;
    model.device.arch = fmt::format("sm_{}{}", match->cc_major, match->cc_minor);
  } else {
    notes.push_back(fmt::format("SM count and memory from the GPU table, not queried: {}",
                                cuda.error().message));
  }
  // PCIe generation and width: what sysfs says the GPUs' links train to (the slowest of them).
  std::vector<std::string> ids;
  for (const LiveGpu& g : gpus) ids.push_back(g.pci_bus_id);
  COMPASS_ASSIGN(const std::vector<PcieLinkInfo> links, pcie_links_from_sysfs(sysfs_root, ids));
  PcieLinkInfo slowest = links[0];
  for (const PcieLinkInfo& l : links)
    if (l.gen * l.width < slowest.gen * slowest.width) slowest = l;
  std::vector<std::string> per_gpu;
  for (std::size_t g = 0; g < links.size(); ++g)
    per_gpu.push_back(fmt::format("GPU{} Gen{} x{}", g, links[g].gen, links[g].width));
  notes.push_back(fmt::format("PCIe from sysfs (max_link_speed/width of each GPU and the port "
                              "above it): {}; the profile uses Gen{} x{} (table: Gen{} x{})",
                              fmt::join(per_gpu, ", "), slowest.gen, slowest.width,
                              model.pcie_gen, model.pcie_width));
  model.pcie_gen = slowest.gen;
  model.pcie_width = slowest.width;
  COMPASS_ASSIGN(Profile p, profile_from_topo(m, model, options));
  p.notes.insert(p.notes.begin(), notes.begin(), notes.end());
  return p;
}

Result<Profile> discover_live(const std::string& sysfs_root, const std::string& gpu,
                              const TopoProfileOptions& options) {
  COMPASS_ASSIGN(std::vector<LiveGpu> gpus, query_nvml());
  return profile_from_live(gpus, query_cuda_devices(), sysfs_root, gpu, options);
}

}  // namespace compass::measure
