#include "compass/job/flops.hpp"

#include "compass/job/memory.hpp"

namespace compass::job {

namespace {

struct ForwardFlops {
  double layers_matmul = 0;
  double layers_attention = 0;
  double head = 0;
};

ForwardFlops forward(const workload::ModelConfig& m, std::int64_t seq) {
  const ParamCounts pc = param_counts(m);
  const double h = static_cast<double>(m.hidden);
  ForwardFlops f;
  f.layers_matmul = 2 * (pc.per_layer - 2 * h) * m.layers;
  f.layers_attention = 4.0 * static_cast<double>(seq) * h * m.layers;
  f.head = 2 * static_cast<double>(m.vocab) * h;
  return f;
}

}  // namespace

double model_flops_per_token(const workload::ModelConfig& m, std::int64_t seq) {
  const ForwardFlops f = forward(m, seq);
  return 3 * (f.layers_matmul + f.layers_attention + f.head);
}

double hardware_flops_per_token(const workload::ModelConfig& m, std::int64_t seq, Recompute r) {
  const ForwardFlops f = forward(m, seq);
  double extra = 0;
  if (r == Recompute::full) extra = f.layers_matmul + f.layers_attention;
  if (r == Recompute::selective) extra = f.layers_attention;
  return model_flops_per_token(m, seq) + extra;
}

}  // namespace compass::job
