#include "compass/core/format.hpp"

#include <cmath>

#include <fmt/format.h>

namespace compass {

std::string format_duration(double s, int decimals) {
  const double a = std::fabs(s);
  if (a < 1e-3) return fmt::format("{:.1f} us", s * 1e6);
  if (a < 1.0) return fmt::format("{:.{}f} ms", s * 1e3, decimals);
  return fmt::format("{:.{}f} s", s, decimals);
}

}  // namespace compass
