#pragma once
// Machines compiled into the binary, so the tool works with no files.

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// Names of all presets, in display order.
std::vector<std::string> preset_names();
/// One-line description of a preset.
Result<std::string> preset_description(const std::string& name);
/// Builds a preset (routes computed, validated); error for unknown names lists the known ones.
Result<Profile> make_preset(const std::string& name);

/// The GPU specification the presets use for a device name ("RTX A6000", "H100 SXM5 80GB", ...);
/// an error for other names.
Result<DeviceSpec> preset_device(const std::string& device_name);

/// A generated multi-node machine: `nodes` servers of `gpus_per_node` GPUs on an NVSwitch, one
/// NIC per GPU into a single network switch (for scale tests).
Profile make_multinode_nvswitch(int nodes, int gpus_per_node);

}  // namespace compass::hardware
