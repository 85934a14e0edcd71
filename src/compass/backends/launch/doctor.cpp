#include "compass/backends/launch/doctor.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include <fmt/format.h>

#if COMPASS_WITH_MPI
// The C API only: keep Open MPI and MPICH from pulling in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace compass::backends::launch {

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::warn: return "warn";
    case Verdict::missing: return "missing";
  }
  return "?";
}

namespace {

// A dlopen handle closed on scope exit.
class Library {
 public:
  explicit Library(const char* name) : handle_(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) {
      const char* e = dlerror();
      error_ = e != nullptr ? e : "unknown dlopen error";
    }
  }
  ~Library() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  bool loaded() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }
  template <typename F>
  F symbol(const char* name) const {
    return handle_ != nullptr ? reinterpret_cast<F>(dlsym(handle_, name)) : nullptr;
  }

 private:
  void* handle_ = nullptr;
  std::string error_;
};

// Driver API entry points, declared with plain types so no CUDA header is needed (CUdevice is
// an int, CUresult an enum whose success value is 0).
using CuInit = int (*)(unsigned);
using CuDriverGetVersion = int (*)(int*);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetName = int (*)(char*, int, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);
using CuDeviceTotalMem = int (*)(std::size_t*, int);
using CuDeviceCanAccessPeer = int (*)(int*, int, int);
using CuDeviceGetPCIBusId = int (*)(char*, int, int);
constexpr int kAttrUnifiedAddressing = 41;
constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;

// NVML entry points (nvmlDevice_t is an opaque pointer, nvmlReturn_t an enum, 0 = success).
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlHandleByPci = int (*)(const char*, void**);
using NvmlP2PStatus = int (*)(void*, void*, int, int*);
constexpr int kNvmlP2PCapsNvlink = 2;
constexpr int kNvmlP2PStatusOk = 0;

using NcclGetVersion = int (*)(int*);

// A short shell-free search of PATH.
std::string find_on_path(const char* program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string_view rest(path);
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return {};
}

// The first line `<program> --version` prints (stdout and stderr), or empty.
std::string first_line_of_version(const std::string& program) {
  // The path comes from PATH lookup of a fixed name; quote it for the shell anyway.
  std::string quoted = "'";
  for (char c : program) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((quoted + " --version 2>&1").c_str(), "r"),
                                             pclose);
  if (!pipe) return {};
  std::array<char, 256> line{};
  std::string out;
  while (fgets(line.data(), static_cast<int>(line.size()), pipe.get()) != nullptr) {
    out = line.data();
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (!out.empty()) break;
  }
  return out;
}

void probe_gpus(RuntimeReport& report) {
  Library cuda("libcuda.so.1");
  if (!cuda.loaded()) {
    report.findings.push_back({"driver", Verdict::missing,
                               fmt::format("libcuda.so.1 not loadable ({}): no NVIDIA driver",
                                           cuda.error())});
    report.findings.push_back({"gpus", Verdict::missing, "no GPU"});
    return;
  }
  auto init = cuda.symbol<CuInit>("cuInit");
  auto driver_version = cuda.symbol<CuDriverGetVersion>("cuDriverGetVersion");
  auto count = cuda.symbol<CuDeviceGetCount>("cuDeviceGetCount");
  auto get = cuda.symbol<CuDeviceGet>("cuDeviceGet");
  auto name = cuda.symbol<CuDeviceGetName>("cuDeviceGetName");
  auto attr = cuda.symbol<CuDeviceGetAttribute>("cuDeviceGetAttribute");
  auto mem = cuda.symbol<CuDeviceTotalMem>("cuDeviceTotalMem_v2");
  auto peer = cuda.symbol<CuDeviceCanAccessPeer>("cuDeviceCanAccessPeer");
  auto bus = cuda.symbol<CuDeviceGetPCIBusId>("cuDeviceGetPCIBusId");
  if (!init || !driver_version || !count || !get || !name || !attr || !mem || !peer || !bus) {
    report.findings.push_back(
        {"driver", Verdict::missing, "libcuda.so.1 lacks a driver API entry point"});
    report.findings.push_back({"gpus", Verdict::missing, "no GPU"});
    return;
  }
  int version = 0;
  (void)driver_version(&version);
  const int init_rc = init(0);
  const std::string driver_text =
      fmt::format("libcuda.so.1, CUDA driver API {}.{}", version / 1000, (version % 1000) / 10);
  int n = 0;
  if (init_rc != 0 || count(&n) != 0 || n <= 0) {
    report.findings.push_back(
        {"driver", init_rc == 0 ? Verdict::ok : Verdict::missing,
         init_rc == 0 ? driver_text : fmt::format("{}: cuInit failed (error {})", driver_text, init_rc)});
    report.findings.push_back({"gpus", Verdict::missing, "no GPU"});
    return;
  }
  report.findings.push_back({"driver", Verdict::ok, driver_text});

  std::vector<int> handles(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    GpuInfo g;
    g.ordinal = i;
    int dev = 0;
    (void)get(&dev, i);
    handles[static_cast<std::size_t>(i)] = dev;
    std::array<char, 256> buf{};
    if (name(buf.data(), static_cast<int>(buf.size()), dev) == 0) g.name = buf.data();
    buf.fill(0);
    if (bus(buf.data(), static_cast<int>(buf.size()), dev) == 0) g.pci_bus_id = buf.data();
    int v = 0;
    if (attr(&v, kAttrComputeMajor, dev) == 0) g.compute_major = v;
    if (attr(&v, kAttrComputeMinor, dev) == 0) g.compute_minor = v;
    if (attr(&v, kAttrUnifiedAddressing, dev) == 0) g.unified_addressing = v != 0;
    std::size_t bytes = 0;
    if (mem(&bytes, dev) == 0) g.memory_bytes = static_cast<double>(bytes);
    report.gpus.push_back(std::move(g));
  }
  std::string names;
  for (const GpuInfo& g : report.gpus)
    names += fmt::format("{}{}: {} (sm_{}{}, {:.0f} GiB)", names.empty() ? "" : "; ", g.ordinal,
                         g.name, g.compute_major, g.compute_minor, g.memory_bytes / (1 << 30));
  report.findings.push_back({"gpus", Verdict::ok, fmt::format("{} GPU{}: {}", n, n == 1 ? "" : "s", names)});

  // Peer access and NVLink between every pair.
  if (n >= 2) {
    Library nvml("libnvidia-ml.so.1");
    auto nvml_init = nvml.symbol<NvmlInit>("nvmlInit_v2");
    auto nvml_shutdown = nvml.symbol<NvmlShutdown>("nvmlShutdown");
    auto by_pci = nvml.symbol<NvmlHandleByPci>("nvmlDeviceGetHandleByPciBusId_v2");
    auto p2p_status = nvml.symbol<NvmlP2PStatus>("nvmlDeviceGetP2PStatus");
    const bool have_nvml = nvml_init && nvml_shutdown && by_pci && p2p_status && nvml_init() == 0;
    std::vector<void*> nv(static_cast<std::size_t>(n), nullptr);
    if (have_nvml)
      for (int i = 0; i < n; ++i)
        (void)by_pci(report.gpus[static_cast<std::size_t>(i)].pci_bus_id.c_str(),
                     &nv[static_cast<std::size_t>(i)]);
    report.peers.assign(static_cast<std::size_t>(n),
                        std::vector<PeerAccess>(static_cast<std::size_t>(n)));
    int pairs = 0, p2p_pairs = 0, nvlink_pairs = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        if (i == j) continue;
        PeerAccess& a = report.peers[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
        int can = 0;
        a.p2p = peer(&can, handles[static_cast<std::size_t>(i)],
                     handles[static_cast<std::size_t>(j)]) == 0 && can != 0;
        void* hi = nv[static_cast<std::size_t>(i)];
        void* hj = nv[static_cast<std::size_t>(j)];
        int status = -1;
        if (hi != nullptr && hj != nullptr && p2p_status(hi, hj, kNvmlP2PCapsNvlink, &status) == 0) {
          a.nvlink_known = true;
          a.nvlink = status == kNvmlP2PStatusOk;
        }
        ++pairs;
        p2p_pairs += a.p2p ? 1 : 0;
        nvlink_pairs += a.nvlink ? 1 : 0;
      }
    if (have_nvml) (void)nvml_shutdown();
    const Verdict v = p2p_pairs == pairs ? Verdict::ok : p2p_pairs > 0 ? Verdict::warn : Verdict::missing;
    report.findings.push_back(
        {"p2p", v,
         fmt::format("peer access on {} of {} ordered GPU pairs; NVLink on {}{}", p2p_pairs, pairs,
                     nvlink_pairs, have_nvml ? "" : " (NVML not loadable: NVLink unknown)")});
  } else {
    report.findings.push_back({"p2p", Verdict::missing, "one GPU: no peer pairs"});
  }

  bool uva = true;
  for (const GpuInfo& g : report.gpus) uva = uva && g.unified_addressing;
  report.findings.push_back(
      {"cuda-ipc", uva ? Verdict::ok : Verdict::missing,
       uva ? "every GPU has unified addressing: cudaIpcGetMemHandle can share buffers between "
             "processes"
           : "a GPU lacks unified addressing: no CUDA IPC"});
}

void probe_nccl(RuntimeReport& report) {
  Library nccl("libnccl.so.2");
  if (!nccl.loaded()) {
    report.findings.push_back(
        {"nccl", Verdict::missing,
         fmt::format("libnccl.so.2 not loadable ({}); add its directory to LD_LIBRARY_PATH",
                     nccl.error())});
    return;
  }
  auto get_version = nccl.symbol<NcclGetVersion>("ncclGetVersion");
  int code = 0;
  if (!get_version || get_version(&code) != 0) {
    report.findings.push_back({"nccl", Verdict::warn, "libnccl.so.2 loads but ncclGetVersion failed"});
    return;
  }
  report.nccl_version = code;
  const bool multi_rank = code >= 23000;
  report.findings.push_back(
      {"nccl", Verdict::ok,
       fmt::format("libnccl.so.2 {} loads; two ranks on one GPU {}", nccl_version_text(code),
                   multi_rank ? "possible with NCCL_MULTI_RANK_GPU_ENABLE=1"
                              : "refused (needs NCCL 2.30+)")});
}

void probe_mpi(RuntimeReport& report) {
  const std::string mpirun = find_on_path("mpirun");
  std::string launcher = mpirun.empty() ? std::string("no mpirun on PATH")
                                        : fmt::format("{} ({})", mpirun, first_line_of_version(mpirun));
#if COMPASS_WITH_MPI
  std::array<char, MPI_MAX_LIBRARY_VERSION_STRING> buf{};
  int len = 0;
  MPI_Get_library_version(buf.data(), &len);
  std::string lib(buf.data(), static_cast<std::size_t>(std::max(0, len)));
  if (const auto cut = lib.find_first_of(",\n"); cut != std::string::npos) lib.resize(cut);
  report.findings.push_back({"mpi", mpirun.empty() ? Verdict::warn : Verdict::ok,
                             fmt::format("built with {}; launcher: {}", lib, launcher)});
#else
  report.findings.push_back(
      {"mpi", Verdict::missing,
       fmt::format("compass built without MPI (--launch mpi unavailable); launcher: {}",
                   launcher)});
#endif
}

void probe_env_launch(RuntimeReport& report) {
  const char* names[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};
  std::string set, unset;
  for (const char* n : names) {
    const char* v = std::getenv(n);
    (v != nullptr ? set : unset) += fmt::format("{}{}{}", (v != nullptr ? set : unset).empty() ? "" : " ",
                                                n, v != nullptr ? fmt::format("={}", v) : "");
  }
  if (unset.empty())
    report.findings.push_back({"env-launch", Verdict::ok, fmt::format("set: {}", set)});
  else
    report.findings.push_back(
        {"env-launch", set.empty() ? Verdict::ok : Verdict::warn,
         set.empty() ? "torchrun variables not set (only needed for --launch env)"
                     : fmt::format("incomplete: {} set, {} missing", set, unset)});
}

}  // namespace

RuntimeReport probe_runtime() {
  RuntimeReport report;
  probe_gpus(report);
  if (report.gpus.empty()) {
    report.findings.push_back({"p2p", Verdict::missing, "no GPU"});
    report.findings.push_back({"cuda-ipc", Verdict::missing, "no GPU"});
  }
  probe_nccl(report);
  probe_mpi(report);
  probe_env_launch(report);
  return report;
}

}  // namespace compass::backends::launch
