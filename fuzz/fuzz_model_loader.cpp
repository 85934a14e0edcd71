// libFuzzer harness for the model loader: any bytes give a ModelConfig or an Error, never a
// crash, exception or undefined behaviour; a model that loads round-trips exactly.
// Seeds: fuzz/corpus/model.

#include <cstdint>
#include <cstdio>
#include <string>

#include "compass/workload/model_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto m = compass::workload::model_from_json(text, "fuzz.json");
  if (!m.ok()) return 0;
  const std::string saved = compass::workload::model_to_json(*m);
  auto again = compass::workload::model_from_json(saved, "fuzz-roundtrip.json");
  if (!again.ok() || compass::workload::model_to_json(*again) != saved) {
    std::fprintf(stderr, "model round trip failed\n");
    __builtin_trap();
  }
  return 0;
}
