#pragma once
// Internal to the sim backend: a schedule translated into per-task costs and routes, ready for
// the SimGrid engine (engine.cpp). Not part of the public API.

#include <cstdint>
#include <vector>

#include "compass/backends/sim/simulator.hpp"

namespace compass::backends::sim::detail {

/// What one task needs from the engine.
struct TaskCost {
  double fixed_s = 0;           ///< timed part: launch overhead plus any local memory operation
  double gemm_s = 0;            ///< GEMM model time (slowed while a copy engine of the rank runs)
  std::int64_t net_bytes = 0;   ///< bytes sent over the network (transfers between GPUs)
  int route = -1;               ///< index into Prepared::routes, -1 when nothing crosses links
  int rank = 0;                 ///< rank whose resource runs the task
  int src_rank = 0;             ///< transfers: sending rank (owner of src)
  int dst_rank = 0;             ///< transfers: receiving rank (owner of dst)
  bool gemm = false;            ///< a GEMM (runs as an Exec on the rank's GPU host)
  bool on_copy_engine = false;  ///< occupies a copy engine (counts as interference for GEMMs)
};

/// One ordered GPU pair a transfer uses.
struct UsedRoute {
  int src_gpu = 0;
  int dst_gpu = 0;
  const hardware::Route* route = nullptr;
  double bottleneck_bytes_per_s = 0;
  double latency_s = 0;  ///< sum of the route's link latencies
};

/// A link direction whose utilisation is sampled.
struct TrackedLink {
  int link = 0;
  bool forward = true;
  double bytes = 0;  ///< bytes the schedule's transfers carry over it
};

struct Prepared {
  const hardware::Profile* profile = nullptr;
  const schedule::Schedule* schedule = nullptr;
  std::vector<TaskCost> costs;               ///< by task id
  std::vector<UsedRoute> routes;
  std::vector<TrackedLink> tracked;          ///< busiest link directions by bytes
  std::vector<std::vector<int>> resource_tasks;  ///< task ids of each serial resource, in order
  std::vector<schedule::Resource> resources;
  double gemm_slowdown = 1.0;                ///< GEMM beside an active copy engine
  double comm_slowdown = 1.0;                ///< transfer started beside a running GEMM
};

/// What the engine measures; the rest of SimResult is derived from it.
struct RawResult {
  std::vector<TaskTime> tasks;
  std::vector<std::vector<LinkSample>> samples;  ///< per tracked link
};

/// Runs SimGrid in this process. Only the first call of a process sets SimGrid's configuration
/// (SimGrid refuses to change it later); later calls reuse it and offset the clock.
Result<RawResult> run_engine(const Prepared& p);

/// Binary encoding of an engine outcome for the pipe from the forked child.
std::string encode(const Result<RawResult>& r);
Result<RawResult> decode(const std::string& bytes);

}  // namespace compass::backends::sim::detail
