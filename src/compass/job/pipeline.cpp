#include "compass/job/pipeline.hpp"

#include <algorithm>
#include <array>

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

Status check_spec(const PipelineSpec& spec) {
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
  return Status::success();
}

// Task ids: forward of (virtual stage u, micro-batch j) = (u * m + j) * 2, its backward + 1,
// added in id order. A forward waits for the previous virtual stage's forward of its
// micro-batch (one send later); a backward for its own forward and the next virtual stage's
// backward (one send later). The times are set by set_times.
PipelineTasks structure(int p, int v, int m) {
  PipelineTasks out;
  const auto id = [m](int u, int j, bool forward) { return (u * m + j) * 2 + (forward ? 0 : 1); };
  const int vs = p * v;
  const std::size_t n = static_cast<std::size_t>(2) * vs * m;
  out.list.tasks.reserve(n);
  out.list.deps.reserve(2 * n);
  out.list.dep_begin.reserve(n + 1);
  out.info.reserve(n);
  for (int u = 0; u < vs; ++u) {
    const int stage = u % p, chunk = u / p;
    for (int j = 0; j < m; ++j) {
      if (u > 0)
        out.list.add({stage, 0}, {{id(u - 1, j, true), 0}});
      else
        out.list.add({stage, 0}, {});
      if (u + 1 < vs)
        out.list.add({stage, 0}, {{id(u, j, true), 0}, {id(u + 1, j, false), 0}});
      else
        out.list.add({stage, 0}, {{id(u, j, true), 0}});
      out.info.push_back({stage, chunk, j, true});
      out.info.push_back({stage, chunk, j, false});
    }
  }
  out.list.order.resize(p);
  for (int s = 0; s < p; ++s) {
    const std::vector<Pass> passes = stage_order(s, p, v, m);
    out.list.order[s].reserve(passes.size());
    for (const Pass& pass : passes)
      out.list.order[s].push_back(id(pass.chunk * p + s, pass.microbatch, pass.forward));
  }
  return out;
}

// The durations and send lags of a structure() of spec's shape (spec checked).
void set_times(PipelineTasks& tasks, const PipelineSpec& spec) {
  const int p = spec.stages;
  const int vs = p * spec.chunks;
  for (std::size_t t = 0; t < tasks.info.size(); ++t) {
    const PipelineTaskInfo& in = tasks.info[t];
    const int u = in.chunk * p + in.stage;
    const int first = tasks.list.dep_begin[t];
    if (in.forward) {
      tasks.list.tasks[t].duration_s = spec.forward_s[u];
      if (u > 0) tasks.list.deps[first].lag_s = spec.send_s[u - 1];
    } else {
      tasks.list.tasks[t].duration_s = spec.backward_s[u];
      if (u + 1 < vs) tasks.list.deps[first + 1].lag_s = spec.send_s[u];
    }
  }
}

}  // namespace

Result<PipelineTasks> pipeline_tasks(const PipelineSpec& spec) {
  COMPASS_TRY(check_spec(spec));
  PipelineTasks out = structure(spec.stages, spec.chunks, spec.microbatches);
  set_times(out, spec);
  return out;
}

Result<const PipelineTasks*> PipelineCache::tasks(const PipelineSpec& spec) {
  COMPASS_TRY(check_spec(spec));
  const std::array<int, 3> shape{spec.stages, spec.chunks, spec.microbatches};
  if (!kept_ || shape != shape_) {
    kept_.reset();  // the old list's memory is free before the new one is built
    kept_ = structure(spec.stages, spec.chunks, spec.microbatches);
    shape_ = shape;
  }
  set_times(*kept_, spec);
  return &*kept_;
}

}  // namespace compass::job
