#pragma once
// Known GPU models: the device specification plus the link facts a topology matrix does not
// carry (PCIe generation and width, NVLink generation, link count and per-link rate), each
// with its source. Used to turn an `nvidia-smi topo -m` matrix into a profile.

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

struct GpuModel {
  std::string key;           ///< the --gpu name, e.g. "a6000"
  DeviceSpec device;
  int pcie_gen = 4;          ///< PCIe generation of the GPU's host link
  int pcie_width = 16;       ///< lanes
  int nvlink_gen = 0;        ///< 0: no NVLink
  int nvlink_links = 0;      ///< NVLink links per GPU (a bridge may use fewer)
  double nvlink_link_bytes_per_s = 0;  ///< one link, one direction, signalling rate
  std::string source;        ///< where the numbers come from
};

/// Every known model, in display order.
const std::vector<GpuModel>& known_gpu_models();
/// The model whose key or device name equals `name` (case-insensitive); the error lists the
/// known keys.
Result<GpuModel> find_gpu_model(const std::string& name);

/// Raw PCIe rate of one direction of a link: lanes x per-lane rate after line coding
/// (Gen3 0.985, Gen4 1.969, Gen5 3.938 GB/s per lane); an error for other generations.
Result<double> pcie_raw_bytes_per_s(int gen, int width);

/// Fraction of the raw PCIe rate a GPU-to-GPU copy sustains, assumed 0.8: the a6000x8 preset's
/// measured 25-27 GB/s on a 31.5 GB/s Gen4 x16 link is 0.79-0.86 of raw.
inline constexpr double kPcieEfficiency = 0.8;

}  // namespace compass::hardware
