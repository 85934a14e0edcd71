#include "compass/backends/launch/doctor.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <thread>
#include <map>

#include <fmt/format.h>

#if COMPASS_WITH_MPI
// The C API only: keep Open MPI and MPICH from pulling in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

extern char** environ;

namespace compass::backends::launch {

ProgramOutput run_with_timeout(const std::vector<std::string>& argv, double timeout_s) {
  ProgramOutput out;
  if (argv.empty() || argv[0].empty()) return out;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return out;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  // A process group of its own, so a timeout kills whatever the program started too.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return out;
  }
  out.started = true;
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_s);
  constexpr std::size_t kMaxOutput = 64 * 1024;
  bool open = true;
  int status = 0;
  bool reaped = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      out.timed_out = true;
      break;
    }
    if (open) {
      pollfd pfd{fds[0], POLLIN, 0};
      const int n = poll(&pfd, 1, static_cast<int>(std::min<long long>(left.count(), 50)));
      if (n > 0) {
        std::array<char, 4096> buf{};
        const ssize_t got = read(fds[0], buf.data(), buf.size());
        if (got > 0) {
          if (out.output.size() < kMaxOutput)
            out.output.append(buf.data(), static_cast<std::size_t>(got));
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          open = false;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      reaped = true;
      if (!open) break;
      // Drain what is left without waiting for children that keep the pipe open.
      pollfd pfd{fds[0], POLLIN, 0};
      while (poll(&pfd, 1, 0) > 0) {
        std::array<char, 4096> buf{};
        const ssize_t got = read(fds[0], buf.data(), buf.size());
        if (got <= 0) break;
        if (out.output.size() < kMaxOutput) out.output.append(buf.data(), static_cast<std::size_t>(got));
      }
      break;
    }
  }
  close(fds[0]);
  if (!reaped) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  } else {
    kill(-pid, SIGKILL);  // children the program left behind
  }
  if (!out.timed_out) {
    if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) out.exit_code = 128 + WTERMSIG(status);
  }
  return out;
}

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::ok: return "ok";
    case Verdict::warn: return "warn";
    case Verdict::missing: return "missing";
  }
  return "?";
}

namespace {

// A dlopen handle closed on scope exit. RTLD_NODELETE keeps the library mapped after dlclose:
// libraries such as NCCL's keep allocations in their own globals, which would otherwise look
// like leaks to LeakSanitizer (and unloading the CUDA libraries is not safe anyway).
class Library {
 public:
  explicit Library(const char* name)
      : handle_(dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) {
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
constexpr int kAttrMulticastSupported = 132;  // CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED

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

// The first non-empty line `<program> --version` prints (stdout and stderr), or what went
// wrong ("no answer within 5 s").
std::string first_line_of_version(const std::string& program) {
  const ProgramOutput r = run_with_timeout({program, "--version"}, kProgramTimeoutS);
  if (!r.started) return "cannot start it";
  if (r.timed_out) return fmt::format("no answer to --version within {:g} s", kProgramTimeoutS);
  std::string_view rest(r.output);
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    std::string line(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) return line;
  }
  return "no version printed";
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

  int multicast = 0;
  for (int i = 0; i < n; ++i) {
    int v = 0;
    if (attr(&v, kAttrMulticastSupported, handles[static_cast<std::size_t>(i)]) == 0 && v != 0)
      ++multicast;
  }
  report.findings.push_back(
      {"multicast", multicast == n ? Verdict::ok : Verdict::missing,
       multicast == n ? "every GPU supports CUDA multicast (TE's userbuffers use it)"
                      : fmt::format("{} of {} GPUs support CUDA multicast: launch TE's "
                                    "userbuffers with UB_SKIPMC=1 (compass export te sets it)",
                                    multicast, n)});

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

// "12.2.1" from cuBLAS's integer version (major*10000 + minor*100 + patch for 11+).
std::string cublas_version_text(std::size_t v) {
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

// The CUDA runtime and cuBLAS(Lt) the dynamic loader finds, with what atomic GEMM needs.
void probe_cuda_libraries(RuntimeReport& report) {
  using RuntimeGetVersion = int (*)(int*);
  std::string runtime;
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
    Library lib(name);
    auto get = lib.symbol<RuntimeGetVersion>("cudaRuntimeGetVersion");
    int v = 0;
    if (get != nullptr && get(&v) == 0 && v > 0) {
      runtime = fmt::format("{} {}.{}", name, v / 1000, (v % 1000) / 10);
      break;
    }
  }
  report.findings.push_back({"cudart", runtime.empty() ? Verdict::missing : Verdict::ok,
                             runtime.empty() ? "no CUDA runtime library found by the loader "
                                               "(torch wheels bundle their own: see cublas-wheel "
                                               "under python)"
                                             : runtime});
  using CublasLtGetVersion = std::size_t (*)();
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"}) {
    Library lib(name);
    auto get = lib.symbol<CublasLtGetVersion>("cublasLtGetVersion");
    if (get == nullptr) continue;
    const std::size_t v = get();
    const bool atomic_ok = v >= 120200 && v < 130000;
    report.findings.push_back(
        {"cublas", Verdict::ok,
         fmt::format("{} {}: TE's atomic GEMM {} (it needs cuBLAS and CUDA >= 12.2 and < 13)",
                     name, cublas_version_text(v), atomic_ok ? "possible" : "unavailable")});
    return;
  }
  report.findings.push_back({"cublas", Verdict::missing,
                             "no cuBLASLt library found by the loader (TE's atomic GEMM needs "
                             "cuBLAS >= 12.2 and < 13)"});
}

// torch, TransformerEngine, Megatron-core and the pip cuBLAS wheel, by their installed package
// metadata (python3 -c, no package imported, so it takes a fraction of a second).
void probe_python_packages(RuntimeReport& report) {
  const std::string python = find_on_path("python3");
  const char* items[] = {"torch", "te", "megatron-core"};
  if (python.empty()) {
    for (const char* item : items)
      report.findings.push_back({item, Verdict::missing, "no python3 on PATH"});
    return;
  }
  static const char* kScript =
      "import importlib.metadata as m\n"
      "for key, names in (('torch', ['torch']), ('te', ['transformer_engine', "
      "'transformer-engine', 'transformer_engine_torch']), ('megatron-core', ['megatron-core', "
      "'megatron_core']), ('cublas-wheel', ['nvidia-cublas-cu12', 'nvidia-cublas'])):\n"
      "    for n in names:\n"
      "        try:\n"
      "            print(key, m.version(n))\n"
      "            break\n"
      "        except Exception:\n"
      "            pass\n"
      "print('end')\n";
  const ProgramOutput r = run_with_timeout({python, "-c", kScript}, kProgramTimeoutS);
  // One "key version" line per installed package, then "end".
  std::map<std::string, std::string> versions;
  std::string why;
  bool ended = false;
  if (!r.started) why = fmt::format("cannot start {}", python);
  else if (r.timed_out) why = fmt::format("{} gave no answer within {:g} s", python, kProgramTimeoutS);
  else {
    std::string_view rest(r.output);
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      const std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
      if (line == "end") ended = true;
      const auto sp = line.find(' ');
      if (sp != std::string_view::npos)
        versions[std::string(line.substr(0, sp))] = std::string(line.substr(sp + 1));
    }
    if (!ended) why = fmt::format("{} printed no package list (exit {})", python, r.exit_code);
  }
  for (const char* item : items) {
    if (!why.empty()) {
      report.findings.push_back({item, Verdict::warn, why});
      continue;
    }
    const auto it = versions.find(item);
    if (it == versions.end()) {
      report.findings.push_back({item, Verdict::missing, fmt::format("not installed for {}", python)});
      continue;
    }
    std::string detail = fmt::format("{} (for {})", it->second, python);
    if (std::string_view(item) == "torch" && versions.count("cublas-wheel"))
      detail += fmt::format("; its cuBLAS wheel {}", versions["cublas-wheel"]);
    report.findings.push_back({item, Verdict::ok, detail});
  }
}

// Megatron-LM's tensor-parallel overlap needs kernels issued in order on one hardware queue.
void probe_max_connections(RuntimeReport& report) {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const bool one = v != nullptr && std::string_view(v) == "1";
  report.findings.push_back(
      {"max-conn", one ? Verdict::ok : Verdict::warn,
       one ? "CUDA_DEVICE_MAX_CONNECTIONS=1"
           : fmt::format("CUDA_DEVICE_MAX_CONNECTIONS is {}; Megatron-LM's TP overlap needs 1 "
                         "(compass export te's launch script sets it)",
                         v == nullptr ? std::string("unset") : fmt::format("'{}'", v))});
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
    report.findings.push_back({"multicast", Verdict::missing, "no GPU"});
    report.findings.push_back({"cuda-ipc", Verdict::missing, "no GPU"});
  }
  probe_cuda_libraries(report);
  probe_nccl(report);
  probe_mpi(report);
  probe_env_launch(report);
  probe_python_packages(report);
  probe_max_connections(report);
  return report;
}

}  // namespace compass::backends::launch
