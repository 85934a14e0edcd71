#pragma once
// The megatron-core release a printed Megatron-LM launch needs: most flags Compass prints are in
// every release since 0.8; the uneven pipeline splits and the FP8 recipe flags came later, and an
// older Megatron-LM refuses them when it parses its arguments.

#include <span>
#include <string>

namespace compass::plan {

/// The oldest megatron-core release whose Megatron-LM takes every flag Compass prints except
/// those megatron_core_needed() lists (megatron/training/arguments.py at core_r0.8.0).
inline constexpr int kMegatronCoreBaseMinor = 8;

/// megatron-core 0.`minor` or newer, because of `flag` (empty for the base release).
struct MegatronCoreNeed {
  int minor = kMegatronCoreBaseMinor;
  std::string flag;
};

/// The release `args` (Megatron-LM arguments, one word each) need: 0.9 for
/// --decoder-first/last-pipeline-num-layers, 0.11 for
/// --account-for-embedding/loss-in-pipeline-split, 0.12 for --fp8-recipe and
/// --first-last-layers-bf16 (the release each first appears in; the last two were added while main
/// was 0.12.0rc0), else the base release. The newest wins; of equals, the first in `args`.
MegatronCoreNeed megatron_core_needed(std::span<const std::string> args);

/// "megatron-core 0.11 or newer (Megatron-LM's --account-for-embedding-in-pipeline-split)";
/// "megatron-core 0.8 or newer" for the base release.
std::string describe(const MegatronCoreNeed& need);

/// The requirement line a launch of `args` carries (describe() and where to read the installed
/// version); empty when the base release takes every flag.
std::string megatron_core_requirement(std::span<const std::string> args);

}  // namespace compass::plan
