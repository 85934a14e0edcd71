#pragma once
// The topology of the machine Compass runs on: GPUs and their NVLinks from NVML (loaded with
// dlopen at run time, so nothing links it), the PCIe tree and NUMA nodes from sysfs. The result
// is the matrix `nvidia-smi topo -m` would print, turned into a profile by profile_from_topo.

#include <string>
#include <string_view>
#include <vector>

#include "compass/hardware/topo_matrix.hpp"

namespace compass::hardware {

/// What NVML says about one GPU.
struct LiveGpu {
  std::string name;                        ///< e.g. "NVIDIA A100-SXM4-80GB"
  std::string pci_bus_id;                  ///< "0000:07:00.0" (lower case, 4-digit domain)
  std::vector<std::string> nvlink_remote;  ///< bus id at the far end of each active NVLink
};

/// Queries NVML. Errors (no library, no driver, no device) start with "no GPU".
Result<std::vector<LiveGpu>> query_nvml();

/// The same data recorded as JSON ({"gpus": [{"name", "pci_bus_id", "nvlink_remote": [...]}]}),
/// for tests and for machines where NVML was queried elsewhere.
Result<std::vector<LiveGpu>> live_gpus_from_json(std::string_view text, std::string_view origin);

/// Normalises "00000000:07:00.0" (NVML) or "0000:07:00.0" to "0000:07:00.0"; error if malformed.
Result<std::string> normalise_bus_id(std::string_view id);

/// The topology matrix of `gpus` from a sysfs tree rooted at `sysfs_root` (devices/pci*/...
/// with numa_node files): SYS across NUMA nodes, NODE across host bridges, PHB across root
/// ports, PIX within one switch, PXB across nested bridges, NV# from the NVLinks (links to a
/// non-GPU end are NVSwitch links: every such pair gets NV<min count>).
Result<TopoMatrix> topo_from_sysfs(const std::string& sysfs_root, const std::vector<LiveGpu>& gpus);

/// The known GPU model key for an NVML name ("NVIDIA A100-SXM4-80GB" -> "a100").
Result<std::string> gpu_key_for_name(const std::string& nvml_name);

/// discover on this machine: NVML, then sysfs at `sysfs_root`; `gpu` overrides the model.
Result<Profile> discover_live(const std::string& sysfs_root, const std::string& gpu,
                              const TopoProfileOptions& options);

}  // namespace compass::hardware
