#include "compass/backends/cpu/backend.hpp"

#include <fmt/format.h>

#include "compass/backends/cpu/memory.hpp"

namespace compass::backends::cpu {

Status check(const schedule::Schedule& s) {
  COMPASS_TRY(check_operator(s.op));
  return check_executable(s);
}

Result<std::shared_ptr<const Inputs>> make_inputs(const workload::OperatorSpec& op,
                                                  const RunOptions& o,
                                                  std::int64_t workspace_bytes) {
  const std::int64_t total =
      operator_data_bytes(op) + (o.check ? reference_bytes(op) : 0) + workspace_bytes;
  COMPASS_TRY(check_memory(total, 0,
                           fmt::format("M={} N={} K={} tp={} (inputs, {}buffers)", op.m, op.n,
                                       op.k, op.tp, o.check ? "FP64 reference, " : "")));
  auto in = std::make_shared<Inputs>();
  COMPASS_ASSIGN(in->data, make_operator_data(op, o.seed));
  if (o.check) {
    COMPASS_ASSIGN(in->reference, reference_output(in->data));
  }
  return std::shared_ptr<const Inputs>(std::move(in));
}

Result<Prepared> Prepared::create(const schedule::Schedule& s,
                                  std::shared_ptr<const Inputs> inputs,
                                  const ExecutorOptions& options) {
  COMPASS_ASSIGN(Workspace ws, Workspace::create(s, inputs->data, options));
  return Prepared(s, std::move(inputs), options, std::move(ws));
}

Result<Measurement> Prepared::run(const RunOptions& o) {
  COMPASS_TRY(check_options(o));
  Measurement m;
  for (int i = 0; i < o.warmup + o.repeat; ++i) {
    ws_.reset(inputs_->data);
    COMPASS_ASSIGN(const RunStats stats, cpu::run(s_, ws_, options_));
    m.threads = stats.threads;
    if (i >= o.warmup) m.times_s.push_back(stats.wall_s);
  }
  summarise_times(m);
  if (o.check && inputs_->reference) {
    const ErrorStats e = compare_outputs(s_, ws_, *inputs_->reference);
    m.check.add(e.max_abs_error, e.max_ref_abs);
    m.check.judge(kCheckTolerance);
  }
  return m;
}

}  // namespace compass::backends::cpu
