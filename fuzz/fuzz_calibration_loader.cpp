// libFuzzer harness for the calibration section of a profile (what compass calibrate writes
// and validate reads): the input is placed as "calibration" into a valid machine, so every
// execution reaches the calibration parser and validator. Any bytes give a Profile or an
// Error; a profile that loads round-trips exactly. Seeds: fuzz/corpus/calibration.

#include <cstdint>
#include <cstdio>
#include <string>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_io.hpp"

namespace {

// The a6000x8 preset with its calibration replaced by a marker to splice the input into.
const std::string& machine_template() {
  static const std::string text = [] {
    auto p = compass::hardware::make_preset("a6000x8");
    if (!p.ok()) __builtin_trap();
    p->calibration = {};
    std::string json = compass::hardware::profile_to_json(*p);
    const std::string key = "\"calibration\": ";
    const auto at = json.find(key);
    if (at == std::string::npos) __builtin_trap();
    // The calibration object ends at the first "}" after its key (its members are flat, the
    // gemm array empty).
    const auto end = json.find('}', at);
    return json.substr(0, at + key.size()) + "@CAL@" + json.substr(end + 1);
  }();
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text = machine_template();
  text.replace(text.find("@CAL@"), 5, std::string(reinterpret_cast<const char*>(data), size));
  auto p = compass::hardware::profile_from_json(text, "fuzz.json");
  if (!p.ok()) return 0;
  const std::string saved = compass::hardware::profile_to_json(*p);
  auto again = compass::hardware::profile_from_json(saved, "fuzz-roundtrip.json");
  if (!again.ok() || !(*again == *p)) {
    std::fprintf(stderr, "calibration round trip failed\n");
    __builtin_trap();
  }
  return 0;
}
