#include "compass/core/format.hpp"

#include <cctype>
#include <cmath>

#include <fmt/format.h>

namespace compass {

std::string format_duration(double s, int decimals) {
  if (!std::isfinite(s)) return "n/a";
  const double a = std::fabs(s);
  if (a < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (a < 1.0) return fmt::format("{:.{}f} ms", s * 1e3, decimals);
  return fmt::format("{:.{}f} s", s, decimals);
}

std::string format_ratio(double r, int decimals) {
  if (!std::isfinite(r)) return "n/a";
  return fmt::format("{:.{}f}x", r, decimals);
}

std::vector<std::string> split_ws(std::string_view line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    std::size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    if (j > i) out.emplace_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace compass
