#include "compass/hardware/gpu_models.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "compass/core/units.hpp"
#include "compass/hardware/presets.hpp"

namespace compass::hardware {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

DeviceSpec preset(const char* name) { return preset_device(name).value(); }

DeviceSpec rtx_3090() {
  return DeviceSpec{"GeForce RTX 3090",
                    "sm_86",
                    82,
                    {{DType::fp32, 35.6 * kTFLOPS},
                     {DType::fp16, 71 * kTFLOPS},
                     {DType::bf16, 71 * kTFLOPS}},
                    936 * kGB,
                    24 * kGB,
                    2};
}

DeviceSpec v100_sxm2() {
  return DeviceSpec{"Tesla V100 SXM2 32GB",
                    "sm_70",
                    80,
                    {{DType::fp32, 15.7 * kTFLOPS}, {DType::fp16, 125 * kTFLOPS}},
                    900 * kGB,
                    32 * kGB,
                    4};
}

std::vector<GpuModel> build_table() {
  const char* preset_source = "device as in the presets (docs/presets.md)";
  return {
      {"a6000", preset("RTX A6000"), 4, 16, 3, 4, 14.0625 * kGB,
       fmt::format("{}; PCIe 4.0 x16; NVLink bridge of 4 third-generation links, 112.5 GB/s "
                   "both directions together (NVIDIA RTX A6000 datasheet)",
                   preset_source)},
      {"rtx3090", rtx_3090(), 4, 16, 3, 4, 14.0625 * kGB,
       "82 SMs, 71 TFLOP/s dense FP16/BF16 tensor with FP32 accumulate, 35.6 FP32, 24 GB at 936 "
       "GB/s (NVIDIA GA102 architecture whitepaper); PCIe 4.0 x16; NVLink bridge of 4 links, "
       "112.5 GB/s both directions (same whitepaper); 2 copy engines (assumed)"},
      {"rtx4090", preset("GeForce RTX 4090"), 4, 16, 0, 0, 0,
       fmt::format("{}; PCIe 4.0 x16; no NVLink", preset_source)},
      {"v100", v100_sxm2(), 3, 16, 2, 6, 25 * kGB,
       "80 SMs, 125 TFLOP/s FP16 tensor, 15.7 FP32, 32 GB at 900 GB/s (NVIDIA V100 datasheet); "
       "PCIe 3.0 x16; 6 NVLink2 links, 300 GB/s both directions (same datasheet); 4 copy engines "
       "(assumed)"},
      {"a100", preset("A100 SXM4 80GB"), 4, 16, 3, 12, 25 * kGB,
       fmt::format("{}; PCIe 4.0 x16; 12 NVLink3 links, 600 GB/s both directions (NVIDIA A100 "
                   "datasheet)",
                   preset_source)},
      {"h100", preset("H100 SXM5 80GB"), 5, 16, 4, 18, 25 * kGB,
       fmt::format("{}; PCIe 5.0 x16; 18 NVLink4 links, 900 GB/s both directions (NVIDIA H100 "
                   "datasheet)",
                   preset_source)},
      {"h200", preset("H200 SXM 141GB"), 5, 16, 4, 18, 25 * kGB,
       fmt::format("{}; PCIe 5.0 x16; 18 NVLink4 links, 900 GB/s both directions (NVIDIA H200 "
                   "datasheet)",
                   preset_source)},
  };
}

}  // namespace

const std::vector<GpuModel>& known_gpu_models() {
  static const std::vector<GpuModel> table = build_table();
  return table;
}

Result<GpuModel> find_gpu_model(const std::string& name) {
  const std::string want = lower(name);
  std::vector<std::string> keys;
  for (const GpuModel& m : known_gpu_models()) {
    if (lower(m.key) == want || lower(m.device.name) == want) return m;
    keys.push_back(m.key);
  }
  return make_error("unknown GPU model '{}' (known: {})", name, fmt::join(keys, ", "));
}

Result<double> pcie_raw_bytes_per_s(int gen, int width) {
  double lane = 0;
  switch (gen) {
    case 3: lane = 0.985 * kGB; break;
    case 4: lane = 1.969 * kGB; break;
    case 5: lane = 3.938 * kGB; break;
    default: return make_error("PCIe generation {} is not known (3, 4 or 5)", gen);
  }
  if (width <= 0 || width > 32) return make_error("PCIe width x{} is not valid", width);
  return lane * width;
}

}  // namespace compass::hardware
