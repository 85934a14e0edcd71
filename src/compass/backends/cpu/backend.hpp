#pragma once
// The CPU backend under the shared backend contract (backends/backend.hpp): check, prepare,
// run. The operator's inputs (and, with a check, its FP64 reference) are made once and shared
// by the prepared schedules of every strategy of that operator.
#include <cstdint>
#include <memory>
#include <optional>

#include "compass/backends/backend.hpp"
#include "compass/backends/cpu/executor.hpp"
#include "compass/backends/cpu/operator_data.hpp"

namespace compass::backends::cpu {

/// The operator's global operands and, with RunOptions::check, the FP64 reference.
struct Inputs {
  OperatorData data;
  std::optional<HostMatrix<double>> reference;
};

/// Stateless check of a schedule: its operator has the blocks the executor binds
/// (check_operator) and the graph is executable (check_executable).
Status check(const schedule::Schedule& s);

/// Checks the whole footprint against the memory limit (X and W, the reference with a check,
/// and `workspace_bytes` for the largest workspace), then makes the inputs.
Result<std::shared_ptr<const Inputs>> make_inputs(const workload::OperatorSpec& op,
                                                  const RunOptions& o,
                                                  std::int64_t workspace_bytes);

/// One schedule bound to its inputs, with its workspace allocated.
class Prepared {
 public:
  /// Errors: the workspace does not fit, or the buffers do not match the operator.
  static Result<Prepared> create(const schedule::Schedule& s,
                                 std::shared_ptr<const Inputs> inputs,
                                 const ExecutorOptions& options = {});
  /// warmup + repeat runs (inputs reset before each), then the check against the reference
  /// when the options ask for it and the inputs carry one.
  Result<Measurement> run(const RunOptions& o);

 private:
  Prepared(const schedule::Schedule& s, std::shared_ptr<const Inputs> inputs,
           const ExecutorOptions& options, Workspace ws)
      : s_(s), inputs_(std::move(inputs)), options_(options), ws_(std::move(ws)) {}
  schedule::Schedule s_;
  std::shared_ptr<const Inputs> inputs_;
  ExecutorOptions options_;
  Workspace ws_;
};

}  // namespace compass::backends::cpu
