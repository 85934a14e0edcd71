#pragma once
// The contract every backend follows (CPU, CUDA, SimGrid). A backend runs a schedule in three
// steps:
//   1. check:   a stateless check of the schedule against the backend and the machine
//               (no allocation; errors name the task or buffer at fault);
//   2. prepare: everything one run needs (buffers, inputs, streams, the platform), once;
//   3. run:     a cheap, repeatable execution that returns a Measurement.
// Every backend has the same shape (cpu/backend.hpp, cuda/cuda_backend.hpp, sim/simulator.hpp):
// a free `check(...)`, a `Prepared` type with `static Result<Prepared> create(...)` taking what
// the backend needs once (its own options: threads, streams, the machine), and
// `Result<Measurement> run(const RunOptions&)` taking what may change from run to run. The
// options, the measurement and the output-error rule below are shared, so callers run and
// format every backend the same way.
#include <cstdint>
#include <string>
#include <vector>

#include "compass/schedule/schedule.hpp"

namespace compass::backends {

/// How a backend runs a schedule. Backends with nothing to repeat (the simulator is
/// deterministic) ignore repeat and warmup; backends without real data ignore check and seed.
struct RunOptions {
  int repeat = 5;          ///< timed runs
  int warmup = 1;          ///< untimed runs first
  bool check = false;      ///< compare the outputs with a reference
  std::uint64_t seed = 1;  ///< seed of the random inputs
};

/// Busy time of one serial resource of one rank (sum of its tasks' durations).
struct ResourceBusy {
  int rank = 0;
  schedule::ResourceKind kind = schedule::ResourceKind::compute;
  int index = 0;
  int tasks = 0;
  double busy_s = 0;
  bool operator==(const ResourceBusy&) const = default;
};

/// The output-error rule of every backend: the largest absolute error of an output relative to
/// the largest magnitude of its reference, max |y - ref| / max |ref| (a per-element ratio
/// explodes where the exact value is near zero); the absolute error when the reference is all
/// zero; infinity when the error is not finite (a NaN or infinite output fails every check).
double relative_error(double max_abs_error, double max_ref_abs);

/// The outputs against the reference (RunOptions::check).
struct CheckResult {
  bool checked = false;
  double max_abs_error = 0;  ///< max |y - ref| over every output element of every rank
  double max_ref_abs = 0;    ///< max |ref| over the same elements
  double max_rel_error = 0;  ///< max_abs_error / max_ref_abs
  double tolerance = 0;      ///< the max_rel_error the backend accepts
  bool passed = true;        ///< !checked, or max_rel_error <= tolerance
  std::string worst;         ///< where the largest error is, when the backend can tell

  /// Folds in one comparison (one rank's output, one block) given by its largest absolute
  /// error and largest reference magnitude, and recomputes max_rel_error (relative_error).
  void add(double abs_error, double ref_abs);
  /// Marks the result checked against `tol` and sets passed: max_rel_error <= tol.
  void judge(double tol);
};

/// What running a schedule measured.
struct Measurement {
  std::vector<double> times_s;  ///< one per timed run
  double median_s = 0, min_s = 0, max_s = 0;
  CheckResult check;
  std::vector<ResourceBusy> resources;  ///< per resource with tasks, when the backend knows
  int threads = 0;                      ///< host threads the run used (CPU backend)
};

/// Median, minimum and maximum of m.times_s into m (no change when empty).
void summarise_times(Measurement& m);

/// The options' own checks: repeat >= 1, warmup >= 0; the error names the option.
Status check_options(const RunOptions& o);

}  // namespace compass::backends
