// libFuzzer harness for the argument check of multi-process runs (backends/launch/session.hpp):
// the bytes are split at NUL into the agreement messages the ranks exchange at start-up, as a
// hostile or broken peer could send them, and into the numbers a rank sends to rank 0. Neither
// check may crash, hang or accept a message it did not make; equal messages must agree.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "compass/backends/launch/session.hpp"

namespace launch = compass::backends::launch;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> messages;
  std::size_t at = 0;
  while (messages.size() < 16) {
    const std::size_t end = bytes.find('\0', at);
    messages.push_back(bytes.substr(at, end == std::string::npos ? std::string::npos : end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  (void)launch::check_agreement(messages);

  // A description decoded from the first message agrees with itself, whatever it holds.
  const std::size_t nl = messages.front().find('\n');
  if (nl != std::string::npos) {
    auto d = launch::decode_description(messages.front().substr(nl + 1));
    if (d.ok()) {
      const std::string m = launch::agreement_message(*d);
      if (!launch::check_agreement({m, m}).ok()) __builtin_trap();
      auto back = launch::decode_description(launch::encode_description(*d));
      if (!back.ok() || *back != *d) __builtin_trap();
    }
  }

  // The same bytes as the numbers of two ranks (whole doubles only).
  std::vector<double> numbers(size / sizeof(double));
  if (!numbers.empty()) std::memcpy(numbers.data(), data, numbers.size() * sizeof(double));
  const std::size_t half = numbers.size() / 2;
  const std::vector<std::vector<double>> ranks{
      std::vector<double>(numbers.begin(), numbers.begin() + half),
      std::vector<double>(numbers.begin() + half, numbers.end())};
  for (std::size_t iterations : {std::size_t{0}, std::size_t{1}, half > 3 ? half - 3 : 0})
    (void)launch::combine_numbers(ranks, iterations);
  return 0;
}
