#pragma once
// Seeded random machines for property tests and the bound/pattern studies: valid Profiles
// (routes computed, hardware::validate passes) of the families real boxes come in.

#include <cstdint>
#include <string_view>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// The shape of a random machine.
enum class TopologyFamily {
  pcie_tree,    ///< GPUs on PCIe switches, switches on root complexes, sockets in a chain
  one_root,     ///< every GPU on one PCIe switch (one root)
  switch_chain, ///< PCIe switches in a chain of shared uplinks, GPUs spread over them
  nvswitch,     ///< every GPU on one NVSwitch node, per-GPU link bandwidths may differ
  staged,       ///< a PCIe tree with p2p off: every transfer goes through host memory
};

/// "pcie-tree", "one-root", "switch-chain", "nvswitch", "staged".
std::string_view to_string(TopologyFamily f);

/// A valid random machine of `gpus` GPUs (1..64) of the given family, the same for the same
/// seed. PCIe and NVSwitch link bandwidths are drawn from small sets (directions may differ);
/// PCIe families get NVLink bridges between random GPU pairs. The device has 1 to 4 copy
/// engines.
Profile random_topology(std::uint64_t seed, int gpus, TopologyFamily family);

/// A random family (drawn from the seed) among all of them.
Profile random_topology(std::uint64_t seed, int gpus);

}  // namespace compass::hardware
