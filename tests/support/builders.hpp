#pragma once
// Builders shared by the tests of several layers: an operator from its numbers, and a preset
// with the comm plan of its first GPUs. Header-only; include as "support/builders.hpp".

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/operator.hpp"

namespace compass::testing {

/// An operator of `kind` with global M, N, K at TP degree `tp`.
inline workload::OperatorSpec op_of(workload::OpKind kind, std::int64_t m, std::int64_t n,
                                    std::int64_t k, int tp, DType dtype = DType::bf16) {
  return workload::OperatorSpec{.kind = kind, .m = m, .n = n, .k = k, .tp = tp, .dtype = dtype};
}

/// GPUs 0..n-1.
inline std::vector<int> first_gpus(int n) {
  std::vector<int> g(static_cast<std::size_t>(n));
  std::iota(g.begin(), g.end(), 0);
  return g;
}

/// A preset and the comm plan of its first `tp` GPUs (the test fails on an unknown preset).
struct PresetPlan {
  hardware::Profile profile;
  schedule::CommPlan plan;
};
inline PresetPlan preset_plan(const std::string& preset, int tp) {
  PresetPlan out{hardware::make_preset(preset).value(), {}};
  out.plan = schedule::comm_plan_for(out.profile, first_gpus(tp)).value();
  return out;
}

}  // namespace compass::testing
