#pragma once
// The topology of the machine Compass runs on: GPUs and their NVLinks from NVML, each GPU's
// SM count, memory and compute capability from the CUDA driver API (both loaded with dlopen at
// run time, so nothing links them), the PCIe tree, link generations and NUMA nodes from sysfs.
// The result is the matrix `nvidia-smi topo -m` would print, turned into a profile by
// profile_from_topo with the measured device facts in place of the GPU table's.

#include <string>
#include <string_view>
#include <vector>

#include "compass/measure/topo_matrix.hpp"

namespace compass::measure {

/// What NVML says about one GPU.
struct LiveGpu {
  std::string name;                        ///< e.g. "NVIDIA A100-SXM4-80GB"
  std::string pci_bus_id;                  ///< "0000:07:00.0" (lower case, 4-digit domain)
  std::vector<std::string> nvlink_remote;  ///< bus id at the far end of each active NVLink
};

/// Queries NVML. Errors (no library, no driver, no device) start with "no GPU".
Result<std::vector<LiveGpu>> query_nvml();

/// What the CUDA driver API says about one GPU.
struct CudaGpu {
  int ordinal = 0;          ///< CUDA's device ordinal
  std::string name;         ///< cuDeviceGetName
  std::string pci_bus_id;   ///< normalised like LiveGpu::pci_bus_id
  int sm_count = 0;         ///< CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
  int cc_major = 0, cc_minor = 0;  ///< compute capability
  double memory_bytes = 0;  ///< cuDeviceTotalMem
};

/// Queries the CUDA driver API (libcuda.so.1, loaded with dlopen). Errors (no library, cuInit
/// failing, no device) start with "no GPU".
Result<std::vector<CudaGpu>> query_cuda_devices();

/// The PCIe link a GPU's traffic to the host crosses: the generation and width the GPU and the
/// port above it both support (sysfs max_link_speed / max_link_width of the two ends; GPUs
/// lower current_link_speed when idle, so the maximum is what a transfer gets).
struct PcieLinkInfo {
  int gen = 0;    ///< 1..6, from "2.5 GT/s" .. "64.0 GT/s"
  int width = 0;  ///< lanes
};

/// PCIe generation of a sysfs link speed ("16.0 GT/s PCIe", "8 GT/s"), or an error.
Result<int> pcie_gen_from_speed(std::string_view speed);

/// The PCIe link of each GPU of `bus_ids`, read from the sysfs tree at `sysfs_root`.
Result<std::vector<PcieLinkInfo>> pcie_links_from_sysfs(const std::string& sysfs_root,
                                                        const std::vector<std::string>& bus_ids);

/// The same data recorded as JSON ({"gpus": [{"name", "pci_bus_id", "nvlink_remote": [...]}]}),
/// for tests and for machines where NVML was queried elsewhere.
Result<std::vector<LiveGpu>> live_gpus_from_json(std::string_view text, std::string_view origin);

/// Normalises "00000000:07:00.0" (NVML) or "0000:07:00.0" to "0000:07:00.0"; error if malformed.
Result<std::string> normalise_bus_id(std::string_view id);

/// The topology matrix of `gpus` from a sysfs tree rooted at `sysfs_root`, laid out like the
/// kernel's: bus/pci/devices/<bdf> is a symlink to devices/pci<dom>:<bus>/<port>/.../<bdf>, so
/// the link's target names every bridge above the device; each device directory has a
/// numa_node file. SYS across NUMA nodes, NODE across host bridges, PHB across root
/// ports, PIX within one switch, PXB across nested bridges, NV# from the NVLinks (links to a
/// non-GPU end are NVSwitch links: every such pair gets NV<min count>).
Result<TopoMatrix> topo_from_sysfs(const std::string& sysfs_root, const std::vector<LiveGpu>& gpus);

/// The known GPU model key for an NVML name ("NVIDIA A100-SXM4-80GB" -> "a100").
Result<std::string> gpu_key_for_name(const std::string& nvml_name);

/// discover on this machine: NVML, then sysfs at `sysfs_root`; `gpu` overrides the model.
Result<hardware::Profile> discover_live(const std::string& sysfs_root, const std::string& gpu,
                                        const TopoProfileOptions& options);

/// The profile discover builds from its inputs (NVML's GPUs, the CUDA driver's answer or why
/// there is none, sysfs): a GPU model from the table (or `gpu`) for what cannot be queried
/// (tensor peaks, memory bandwidth), with the SM count, memory and architecture CUDA reports
/// and the PCIe generation and width sysfs reports put in its place, each said in the notes.
Result<hardware::Profile> profile_from_live(const std::vector<LiveGpu>& gpus,
                                            const Result<std::vector<CudaGpu>>& cuda,
                                            const std::string& sysfs_root, const std::string& gpu,
                                            const TopoProfileOptions& options);

}  // namespace compass::measure
