#pragma once
// The SimGrid backend: executes a Schedule on a machine modelled from a Profile (SimGrid 3.32,
// S4U API, CM02 network model without cross-traffic, split-duplex links, routes exactly as the
// Profile gives them). Links are shared by max-min fairness, so congestion appears by itself;
// GEMM durations come from the GEMM model (hardware::gemm_compute_s plus the launch overheads the
// strategy really pays) and the Profile's interference factors are
// applied on top (SimGrid does not model compute slowed by communication). See
// docs/simulator.md for the translation rules.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compass/backends/backend.hpp"
#include "compass/core/result.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::sim {

/// Whether the SimGrid backend was compiled in (-DCOMPASS_WITH_SIM=ON). Without it,
/// simulate() returns the error "this build has no simulator ...".
bool compiled_in();

struct SimOptions {
  /// Run SimGrid in a forked child process. SimGrid 3.32's engine is a process-wide singleton
  /// (its clock and configuration survive a second Engine), so only the first in-process
  /// simulation of a process is clean; forking also isolates SimGrid crashes.
  bool isolate = true;
  /// How many link directions to report (and to trace as counters), busiest by bytes first.
  int busiest_links = 4;
  /// Apply the Profile's interference factors (off: pure network + GEMM model times).
  bool interference = true;
};

/// Busy time of one serial resource (sum of its tasks' durations): the shared type of the
/// backend contract.
using backends::ResourceBusy;

/// When one task ran (simulated seconds from the start of the operator).
struct TaskTime {
  double start_s = 0;
  double end_s = 0;
  bool operator==(const TaskTime&) const = default;
};

/// Utilisation of one link direction over [t_s, next sample's t_s) (0..1 of its bandwidth).
struct LinkSample {
  double t_s = 0;
  double utilisation = 0;
  bool operator==(const LinkSample&) const = default;
};

/// One link direction with the traffic the schedule put on it.
struct LinkUse {
  int link = 0;                     ///< index into Profile::links
  bool forward = true;              ///< a->b
  std::string name;                 ///< Profile::hop_name, e.g. "pcie-sw0-up up"
  double bandwidth_bytes_per_s = 0;
  double bytes = 0;                 ///< bytes the schedule's transfers carry over it
  double busy_s = 0;                ///< time with at least one flow moving data over it
  double busy_fraction = 0;         ///< busy_s / total_s
  std::vector<LinkSample> samples;  ///< utilisation over time (piecewise constant)
  bool operator==(const LinkUse&) const = default;
};

/// The outcome of one simulation.
struct SimResult {
  double total_s = 0;                        ///< end of the last task
  std::vector<ResourceBusy> resources;       ///< every resource that has tasks, by rank
  std::vector<double> exposed_comm_s_per_rank;  ///< total_s minus the rank's compute busy time
  double exposed_comm_s = 0;                 ///< the largest per-rank exposed communication
  std::vector<TaskTime> tasks;               ///< indexed by task id
  std::vector<LinkUse> busiest_links;        ///< by bytes, largest first
  std::int64_t transfers = 0;                ///< transfer tasks between different GPUs
  double transferred_bytes = 0;              ///< bytes those transfers moved
  bool operator==(const SimResult&) const = default;
};

/// The backend contract's check: a valid schedule whose ranks sit on distinct GPUs of the
/// profile. Errors name the rank or task.
Status check(const hardware::Profile& profile, const schedule::Schedule& s);

namespace detail {
struct Prepared;
}

/// A schedule translated for the simulator (the contract's prepare step: task costs, routes,
/// the links to report). `profile` and `s` must outlive it.
class Prepared {
 public:
  /// Errors: those of check(), a missing route or a zero-bandwidth hop a transfer uses.
  static Result<Prepared> create(const hardware::Profile& profile, const schedule::Schedule& s,
                                 const SimOptions& options = {});
  /// One simulation with everything it saw (deterministic: every call gives the same result).
  Result<SimResult> simulate() const;
  /// The backend contract's run: one simulation as a Measurement (measurement()); repeat,
  /// warmup, check and seed do not apply to a deterministic simulation without data, but their
  /// values are checked as every backend checks them.
  Result<Measurement> run(const RunOptions& o) const;

  Prepared(Prepared&&) noexcept;
  Prepared& operator=(Prepared&&) noexcept;
  ~Prepared();

 private:
  Prepared(std::unique_ptr<detail::Prepared> prep, const hardware::Profile& profile,
           const schedule::Schedule& s, const SimOptions& options);
  std::unique_ptr<detail::Prepared> prep_;
  const hardware::Profile* profile_;
  const schedule::Schedule* s_;
  SimOptions options_;
};

/// A simulation as the backend contract's Measurement: one time, total_s (repeat and warmup
/// do not apply to a deterministic simulation), and the busy time of every resource.
backends::Measurement measurement(const SimResult& r);

/// Simulates `s` on `profile` (Prepared::create, then simulate()). Errors: an invalid schedule, ranks on GPUs the profile lacks or
/// sharing a GPU, a missing route or a zero-bandwidth hop on a route a transfer uses, a
/// schedule whose resource order deadlocks, or a crashed simulator child.
Result<SimResult> simulate(const hardware::Profile& profile, const schedule::Schedule& s,
                           const SimOptions& options = {});

/// Seconds one task takes alone on the machine (no sharing, no interference); for tests and
/// reports. Transfers: their launch overhead + route latency + bytes / route bottleneck; GEMMs:
/// their overhead + hardware::gemm_compute_s (a lone GEMM of a rank: hardware::gemm_time_s).
double isolated_task_time_s(const hardware::Profile& profile, const schedule::Schedule& s,
                            const schedule::Task& t);

/// The result as JSON (total, per-resource busy time, exposed communication, busiest links).
std::string sim_result_to_json(const SimResult& r, const schedule::Schedule& s);

/// Chrome trace-event JSON (Perfetto compatible): one process per rank, one thread per compute
/// stream and copy engine, an "X" slice per task (microseconds), "C" counters for the busiest
/// links' utilisation.
std::string trace_to_json(const SimResult& r, const schedule::Schedule& s);

/// Writes trace_to_json to `path`; refuses to overwrite an existing file unless `overwrite`.
Status write_trace(const SimResult& r, const schedule::Schedule& s, const std::string& path,
                   bool overwrite = false);

}  // namespace compass::backends::sim
