// libFuzzer harness for the schedule JSON loader: any bytes give a Schedule or an Error, never
// a crash, exception or undefined behaviour (integer fields given as floats or out of range
// included); a schedule that loads round-trips exactly. Seeds: fuzz/corpus/schedule.

#include <cstdint>
#include <cstdio>
#include <string>

#include "compass/schedule/schedule.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto s = compass::schedule::schedule_from_json(text);
  if (!s.ok()) return 0;
  const std::string saved = compass::schedule::schedule_to_json(*s);
  auto again = compass::schedule::schedule_from_json(saved);
  if (!again.ok() || compass::schedule::schedule_to_json(*again) != saved) {
    std::fprintf(stderr, "schedule round trip failed\n");
    __builtin_trap();
  }
  return 0;
}
