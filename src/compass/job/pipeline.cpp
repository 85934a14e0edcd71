#include "compass/job/pipeline.hpp"

#include <algorithm>

namespace compass::job {

namespace {

struct Pass {
  int chunk;
  int microbatch;
  bool forward;
};

// The passes stage `s` runs, in order. 1F1B: p - s - 1 warm-up forwards, then forward /
// backward pairs, then the remaining backwards. Interleaved (Megatron-LM): forwards walk the
// chunks p micro-batches at a time, warm-up (p - s - 1) * 2 + (v - 1) * p.
std::vector<Pass> stage_order(int s, int p, int v, int m) {
  const int total = m * v;
  auto fwd = [&](int k) {
    if (v == 1) return Pass{0, k, true};
    const int in_group = k % (p * v);
    return Pass{in_group / p, (k / (p * v)) * p + k % p, true};
  };
  auto bwd = [&](int k) {
    if (v == 1) return Pass{0, k, false};
    const int in_group = k % (p * v);
    return Pass{v - 1 - in_group / p, (k / (p * v)) * p + k % p, false};
  };
  const int warmup =
      v == 1 ? std::min(p - s - 1, m) : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  std::vector<Pass> out;
  out.reserve(2 * total);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(fwd(f));
  while (f < total) {
    out.push_back(fwd(f++));
    out.push_back(bwd(b++));
  }
  while (b < total) out.push_back(bwd(b++));
  return out;
}

}  // namespace

Result<PipelineTasks> pipeline_tasks(const PipelineSpec& spec) {
  const int p = spec.stages, v = spec.chunks, m = spec.microbatches;
  if (p < 1 || v < 1 || m < 1)
    return make_error("pipeline: stages {}, chunks {} and micro-batches {} must be positive", p, v,
                      m);
  constexpr long kMaxTasks = 20'000'000;
  if (2L * p * v * m > kMaxTasks)
    return make_error("pipeline: {} stages x {} chunks x {} micro-batches is too many tasks", p, v,
                      m);
  if (v > 1 && m % p != 0)
    return make_error("interleaved pipeline: {} micro-batches is not a multiple of {} stages", m,
                      p);
  const int vs = p * v;
  if (static_cast<int>(spec.forward_s.size()) != vs ||
      static_cast<int>(spec.backward_s.size()) != vs ||
      static_cast<int>(spec.send_s.size()) != vs - 1)
    return make_error("pipeline: expected {} forward and backward times and {} send times", vs,
                      vs - 1);
  for (const auto* times : {&spec.forward_s, &spec.backward_s, &spec.send_s})
    for (double t : *times)
      if (!(t >= 0)) return make_error("pipeline: times must be >= 0");

  PipelineTasks out;
  // Task ids: forward of (virtual stage u, micro-batch j) = (u * m + j) * 2, its backward + 1.
  const auto id = [m](int u, int j, bool forward) { return (u * m + j) * 2 + (forward ? 0 : 1); };
  const std::size_t n = static_cast<std::size_t>(2) * vs * m;
  out.list.tasks.reserve(n);
  out.list.deps.reserve(2 * n);
  out.list.dep_begin.reserve(n + 1);
  out.info.reserve(n);
  // Added in id order: a forward, then its backward.
  for (int u = 0; u < vs; ++u) {
    const int stage = u % p, chunk = u / p;
    for (int j = 0; j < m; ++j) {
      const Task f{stage, spec.forward_s[u]};
      if (u > 0)
        out.list.add(f, {{id(u - 1, j, true), spec.send_s[u - 1]}});
      else
        out.list.add(f, {});
      const Task b{stage, spec.backward_s[u]};
      if (u + 1 < vs)
        out.list.add(b, {{id(u, j, true), 0}, {id(u + 1, j, false), spec.send_s[u]}});
      else
        out.list.add(b, {{id(u, j, true), 0}});
      out.info.push_back({stage, chunk, j, true});
      out.info.push_back({stage, chunk, j, false});
    }
  }
  out.list.order.resize(p);
  for (int s = 0; s < p; ++s)
    for (const Pass& pass : stage_order(s, p, v, m))
      out.list.order[s].push_back(id(pass.chunk * p + s, pass.microbatch, pass.forward));
  return out;
}

}  // namespace compass::job
