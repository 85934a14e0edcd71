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
    case StrategyKind::fuse_hier: return "fuse:hier";
    case StrategyKind::fuse_synth: return "fuse:synth";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view s) {
  if (s == "sequential") return Strategy{StrategyKind::sequential, 0};
  if (s == "fuse:all2all") return Strategy{StrategyKind::fuse_all2all, 0};
  if (s == "fuse:ring") return Strategy{StrategyKind::fuse_ring, 0};
  if (s == "fuse:double-ring") return Strategy{StrategyKind::fuse_double_ring, 0};
  if (s == "fuse:hier") return Strategy{StrategyKind::fuse_hier, 0};
  if (s == "fuse:synth") return Strategy{StrategyKind::fuse_synth, 0};
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
      "fuse:double-ring, fuse:hier, fuse:synth or all)",
      s);
}

bool is_fused(StrategyKind k) {
  return k != StrategyKind::sequential && k != StrategyKind::decompose;
}

int simplicity_rank(StrategyKind k) {
  switch (k) {
    case StrategyKind::sequential: return 0;
    case StrategyKind::decompose: return 1;
    case StrategyKind::fuse_ring: return 2;
    case StrategyKind::fuse_all2all: return 3;
    case StrategyKind::fuse_double_ring: return 4;
    case StrategyKind::fuse_hier: return 5;
    case StrategyKind::fuse_synth: return 6;
  }
  return 7;
}

std::vector<Strategy> all_strategies(int decompose_parts) {
  return {Strategy{StrategyKind::sequential, 0}, Strategy{StrategyKind::decompose, decompose_parts},
          Strategy{StrategyKind::fuse_all2all, 0}, Strategy{StrategyKind::fuse_ring, 0},
          Strategy{StrategyKind::fuse_double_ring, 0}, Strategy{StrategyKind::fuse_hier, 0},
          Strategy{StrategyKind::fuse_synth, 0}};
}

}  // namespace compass::schedule
