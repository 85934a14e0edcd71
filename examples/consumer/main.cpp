// Plans a Llama-2 13B layer at TP 8 on the built-in 8x RTX A6000 machine through the installed
// library and prints Compass's predicted speedup over Megatron-LM (exit 1 if planning fails).

#include <cstdio>

#include "compass/hardware/presets.hpp"
#include "compass/plan/layer_plan.hpp"
#include "compass/workload/model_config.hpp"

int main() {
  const auto profile = compass::hardware::make_preset("a6000x8");
  const auto model = compass::workload::resolve_model("llama2-13b");
  if (!profile.ok() || !model.ok()) return 1;
  compass::workload::ParallelConfig pc;
  pc.tp = 8;
  pc.seq = 4096;
  const auto lp = compass::plan::plan_layer(*profile, *model, pc);
  if (!lp.ok()) {
    std::fprintf(stderr, "plan failed: %s\n", lp.error().message.c_str());
    return 1;
  }
  std::printf("llama2-13b on a6000x8, tp 8: compass over megatron %.3fx (%zu TP operators)\n",
              lp->megatron.total_s / lp->compass.total_s, lp->ops.size());
  return 0;
}
