#include "compass/schedule/strategy.hpp"
#include "compass/schedule/limits.hpp"

#include <charconv>

namespace compass::schedule {

std::string to_string(const Strategy& s) {
  switch (s.kind) {
    case StrategyKind::sequential: return "sequential";
    case StrategyKind::decompose: return fmt::format("decompose:{}", s.parts);
    case StrategyKind::fuse_all2all: return "fuse:all2all";
    case StrategyKind::fuse_ring: return "fuse:ring";
    case StrategyKind::fuse_double_ring: return "fuse:double-ring";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view s) {
  if (s == "sequential") return Strategy{StrategyKind::sequential, 0};
  if (s == "fuse:all2all") return Strategy{StrategyKind::fuse_all2all, 0};
  if (s == "fuse:ring") return Strategy{StrategyKind::fuse_ring, 0};
  if (s == "fuse:double-ring") return Strategy{StrategyKind::fuse_double_ring, 0};
  constexpr std::string_view prefix = "decompose:";
  if (s.substr(0, prefix.size()) == prefix) {
    std::string_view num = s.substr(prefix.size());
    int d = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), d);
    if (ec != std::errc() || ptr != num.data() + num.size() || d < 1)
      return make_error("strategy '{}': the decomposition degree must be a positive integer", s);
    if (d > kMaxDecomposeParts)
      return make_error("strategy '{}': the decomposition degree must be at most {}", s,
                        kMaxDecomposeParts);
    return Strategy{StrategyKind::decompose, d};
  }
  return make_error(
      "unknown strategy '{}' (expected sequential, decompose:D, fuse:all2all, fuse:ring, "
      "fuse:double-ring or all)",
      s);
}

int simplicity_rank(StrategyKind k) {
  switch (k) {
    case StrategyKind::sequential: return 0;
    case StrategyKind::decompose: return 1;
    case StrategyKind::fuse_ring: return 2;
    case StrategyKind::fuse_all2all: return 3;
    case StrategyKind::fuse_double_ring: return 4;
  }
  return 5;
}

std::vector<Strategy> all_strategies(int decompose_parts) {
  return {Strategy{StrategyKind::sequential, 0}, Strategy{StrategyKind::decompose, decompose_parts},
          Strategy{StrategyKind::fuse_all2all, 0}, Strategy{StrategyKind::fuse_ring, 0},
          Strategy{StrategyKind::fuse_double_ring, 0}};
}

}  // namespace compass::schedule
