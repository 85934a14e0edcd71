#pragma once
// What the multi-process runtime can use on this machine: the NVIDIA driver and its GPUs with
// their peer-access / NVLink matrix, CUDA IPC, NCCL and MPI. Every library is loaded with
// dlopen at the time of the probe, so the probe (and the binary) works on machines without a
// driver, NCCL or MPI and reports each absence as a finding rather than failing.

#include <fmt/format.h>

#include <string>
#include <vector>

namespace compass::backends::launch {

/// How usable one item is.
enum class Verdict { ok, warn, missing };

std::string_view to_string(Verdict v);

/// One line of the report: an item, its verdict and a sentence of detail.
struct Finding {
  std::string item;
  Verdict verdict = Verdict::missing;
  std::string detail;
};

/// One GPU as the driver sees it (CUDA ordinal order).
struct GpuInfo {
  int ordinal = 0;
  std::string name;
  std::string pci_bus_id;
  int compute_major = 0, compute_minor = 0;
  double memory_bytes = 0;
  bool unified_addressing = false;
};

/// Access between two GPUs: cuDeviceCanAccessPeer, and an NVLink between them per NVML.
struct PeerAccess {
  bool p2p = false;
  bool nvlink = false;
  bool nvlink_known = false;  ///< NVML answered for this pair
};

struct RuntimeReport {
  std::vector<Finding> findings;  ///< one per item, in a fixed order
  std::vector<GpuInfo> gpus;
  std::vector<std::vector<PeerAccess>> peers;  ///< [i][j], empty without 2+ GPUs
  int nccl_version = 0;                        ///< e.g. 22803 for 2.28.3; 0 when not loaded
};

/// Probes the driver (libcuda.so.1), NVML (libnvidia-ml.so.1), NCCL (libnccl.so.2), MPI
/// (mpirun on PATH, the MPI library compass was built with) and what a TransformerEngine /
/// Megatron-LM launch needs (CUDA multicast, the CUDA runtime and cuBLAS versions, torch,
/// TransformerEngine and Megatron-core through python3, CUDA_DEVICE_MAX_CONNECTIONS). Every
/// external program runs with an argument vector (no shell) and kProgramTimeoutS. Never fails:
/// what is absent is a finding with Verdict::missing.
RuntimeReport probe_runtime();

/// How long doctor lets one external program run before killing it (and its children).
inline constexpr double kProgramTimeoutS = 5.0;

/// What an external program did: its exit code, stdout and stderr together, and whether it
/// ran past the timeout (then it was killed with its process group).
struct ProgramOutput {
  bool started = false;
  bool timed_out = false;
  int exit_code = -1;
  std::string output;
};

/// Runs argv[0] (a path) with `argv`, stdin from /dev/null, in a process group of its own,
/// for at most `timeout_s`; never involves a shell. Output beyond 64 KiB is dropped.
ProgramOutput run_with_timeout(const std::vector<std::string>& argv, double timeout_s);

/// NCCL's integer version (major*10000 + minor*100 + patch for 2.9+) as "2.28.3". Inline, so
/// that the backends use it without linking this layer.
inline std::string nccl_version_text(int code) {
  if (code <= 0) return "unknown";
  // NCCL 2.9 and later encode major*10000 + minor*100 + patch; older ones major*1000 + ...
  if (code >= 10000) return fmt::format("{}.{}.{}", code / 10000, (code / 100) % 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code / 100) % 10, code % 100);
}

}  // namespace compass::backends::launch
