#pragma once
// Reading the text `nvidia-smi topo -m` prints (the GPU/NIC matrix with X, NV#, PIX, PXB, PHB,
// NODE, SYS and the CPU Affinity / NUMA Affinity / GPU NUMA ID columns) and turning it into a
// profile: NVLink pairs or an NVSwitch, PCIe switches, root complexes and sockets.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compass/hardware/gpu_models.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::measure {

/// What one matrix entry says about the path between two devices.
enum class TopoCode { self, nvlink, pix, pxb, phb, node, sys };

struct TopoEntry {
  TopoCode code = TopoCode::self;
  int nvlinks = 0;  ///< NV# count for TopoCode::nvlink
  bool operator==(const TopoEntry&) const = default;
};

struct TopoMatrix {
  std::vector<std::string> gpus;             ///< column labels "GPU0", ...
  std::vector<std::vector<TopoEntry>> gpu;   ///< gpu[i][j]
  std::vector<std::string> nics;             ///< other columns (NIC0, mlx5_0, ...)
  std::vector<std::vector<TopoEntry>> nic;   ///< nic[i][k]: GPU i to NIC k
  std::vector<std::string> cpu_affinity;     ///< per GPU, "" when not printed
  std::vector<std::optional<int>> numa;      ///< per GPU NUMA affinity, empty when N/A
};

/// The most GPUs a matrix may name: `nvidia-smi topo -m` describes one machine, and the
/// profile built from it holds a link per GPU pair in the worst case.
inline constexpr int kMaxTopoGpus = 64;
/// The most columns (GPUs and NICs) of a header.
inline constexpr int kMaxTopoColumns = 1024;

/// Parses the matrix; lines before the header and from "Legend:" on are ignored, as are lines
/// starting with '#'. Errors (one line, prefixed with `origin`): empty text, no header,
/// truncated matrix or row, unknown link code, a row the header does not name, a diagonal
/// that is not X, an asymmetric entry, more than kMaxTopoGpus GPUs or kMaxTopoColumns columns
/// (refused from the header, before any row is stored).
Result<TopoMatrix> parse_topo_matrix(std::string_view text, std::string_view origin);

struct TopoProfileOptions {
  std::string name = "discovered";
  bool p2p = true;
  std::string origin;  ///< where the matrix came from, for the notes
};

/// The GPU model a matrix suggests when none is given: NV18 -> h100, NV12 -> a100, other NV#
/// -> a6000, no NVLink -> a6000; the choice is an assumption the profile's notes state.
std::string default_gpu_key(const TopoMatrix& m);

/// Builds a profile (routes computed, validated). Bandwidths come from `gpu`'s PCIe generation
/// and width (times kPcieEfficiency) and NVLink count x per-link rate; every assumption is
/// written into the notes and the links' sources.
Result<hardware::Profile> profile_from_topo(const TopoMatrix& m, const hardware::GpuModel& gpu,
                                            const TopoProfileOptions& options);

}  // namespace compass::measure
