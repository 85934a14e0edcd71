#include "compass/plan/megatron_flags.hpp"

#include <fmt/format.h>

#include <string_view>

namespace compass::plan {

namespace {

struct FlagRelease {
  std::string_view flag;
  int minor;
};

// Found by the first commit that adds each flag to megatron/training/arguments.py and the
// release tags (or, for the last two, the version of main) that contain it.
constexpr FlagRelease kLater[] = {
    {"--decoder-first-pipeline-num-layers", 9},
    {"--decoder-last-pipeline-num-layers", 9},
    {"--account-for-embedding-in-pipeline-split", 11},
    {"--account-for-loss-in-pipeline-split", 11},
    {"--fp8-recipe", 12},
    {"--first-last-layers-bf16", 12},
};

}  // namespace

MegatronCoreNeed megatron_core_needed(std::span<const std::string> args) {
  MegatronCoreNeed need;
  for (const std::string& a : args)
    for (const FlagRelease& f : kLater)
      if (a == f.flag && f.minor > need.minor) need = {f.minor, std::string(f.flag)};
  return need;
}

std::string describe(const MegatronCoreNeed& need) {
  if (need.flag.empty()) return fmt::format("megatron-core 0.{} or newer", need.minor);
  return fmt::format("megatron-core 0.{} or newer (Megatron-LM's {})", need.minor, need.flag);
}

std::string megatron_core_requirement(std::span<const std::string> args) {
  const MegatronCoreNeed need = megatron_core_needed(args);
  if (need.minor <= kMegatronCoreBaseMinor) return "";
  return describe(need) + "; compass doctor prints the installed version";
}

}  // namespace compass::plan
