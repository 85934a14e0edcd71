#pragma once
// The contract every backend follows (CPU, CUDA, SimGrid). A backend runs a schedule in three
// steps:
//   1. check:   a stateless check of the schedule against the backend and the machine
//               (no allocation; errors name the task or buffer at fault);
//   2. prepare: everything one run needs (buffers, inputs, streams, the platform), once;
//   3. run:     a cheap, repeatable execution that returns a Measurement.
// Each backend has its own Prepared type with `Result<Measurement> run()`; the options and
// the measurement below are shared, so callers format every backend's result the same way.
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

/// The outputs against the reference (RunOptions::check).
struct CheckResult {
  bool checked = false;
  double max_abs_error = 0;  ///< max |y - ref| over every output element of every rank
  double max_ref_abs = 0;    ///< max |ref| over the same elements
  double max_rel_error = 0;  ///< max_abs_error / max_ref_abs
  double tolerance = 0;      ///< the max_rel_error the backend accepts
  bool passed = true;        ///< !checked, or max_rel_error <= tolerance
  std::string worst;         ///< where the largest error is, when the backend can tell
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
