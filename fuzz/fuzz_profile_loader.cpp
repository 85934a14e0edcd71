// libFuzzer harness for the profile loader: any bytes must give a Profile or an Error, never a
// crash, hang or exception; a Profile that loads must round-trip exactly.
//
// With COMPASS_FUZZ_WRITE_SEEDS=<dir> set, the binary instead writes a seed corpus built from
// the presets into <dir> and exits (tools/run-fuzz.sh uses this, so the seeds need no CLI).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/measure/topo_matrix.hpp"

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

void write_seeds(const std::filesystem::path& dir) {
  using compass::hardware::make_preset;
  std::filesystem::create_directories(dir);
  for (const std::string& name : compass::hardware::preset_names()) {
    auto p = make_preset(name);
    if (!p.ok()) continue;
    const std::string text = compass::hardware::profile_to_json(*p);
    write_file(dir / (name + ".json"), text);
    // The same machine without routes (exercises route computation) and compact (shorter).
    nlohmann::json j = nlohmann::json::parse(text);
    j.erase("routes");
    write_file(dir / (name + "-noroutes.json"), j.dump());
    j.erase("notes");
    for (auto& l : j["links"]) l.erase("source");
    write_file(dir / (name + "-min.json"), j.dump());
  }
  write_file(dir / "empty.json", "{}");
  write_file(dir / "version.json", R"({"version": 1})");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  if (const char* dir = std::getenv("COMPASS_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Any exception escaping here is reported by libFuzzer as a crash, which is what we want.
  auto p = compass::hardware::profile_from_json(text, "fuzz.json");
  // `compass profile check` lists every error; it must agree with the loader on whether the
  // text loads.
  const auto errors = compass::hardware::check_profile_json(text, "fuzz.json");
  if (errors.empty() != p.ok()) {
    std::fprintf(stderr, "check found %zu errors but the loader %s\n", errors.size(),
                 p.ok() ? "loaded the profile" : p.error().message.c_str());
    __builtin_trap();
  }
  // The same bytes as an nvidia-smi topo -m matrix: an error or a matrix, never a crash.
  (void)compass::measure::parse_topo_matrix(text, "fuzz.txt");
  if (!p.ok()) return 0;
  const std::string saved = compass::hardware::profile_to_json(*p);
  auto again = compass::hardware::profile_from_json(saved, "fuzz-roundtrip.json");
  if (!again.ok()) {
    std::fprintf(stderr, "round trip failed: %s\n", again.error().message.c_str());
    __builtin_trap();
  }
  if (!(*again == *p) || compass::hardware::profile_to_json(*again) != saved) {
    std::fprintf(stderr, "round trip changed the profile\n");
    __builtin_trap();
  }
  return 0;
}
