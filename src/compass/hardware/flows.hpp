#pragma once
// Max-min fair sharing of links by concurrent flows on a Profile's routes.
// Every link direction is an independent resource (full duplex); a flow uses every hop of
// its route; rates follow progressive filling; when a flow ends the rest are re-shared.

#include <string>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// Bytes from GPU src to GPU dst (GPU ordinals), starting at time 0.
struct Flow {
  int src = 0;
  int dst = 0;
  double bytes = 0;
};

/// Load carried by one link direction.
struct HopLoad {
  Hop hop;
  std::string name;       ///< Profile::hop_name(hop)
  double bytes = 0;       ///< total bytes crossing it
  int flows = 0;          ///< number of flows crossing it
  double busy_s = 0;      ///< bytes / bandwidth: the least time this direction needs
};

/// Outcome of running a set of flows to completion.
struct FlowOutcome {
  std::vector<double> finish_s;   ///< per flow, including route latency
  double makespan_s = 0;          ///< the last finish
  std::vector<HopLoad> loads;     ///< every used link direction, heaviest busy_s first
};

/// Max-min fair instantaneous rates (bytes/s) of concurrent flows; a flow between the same
/// GPU (src == dst) or with no bytes gets rate 0.
std::vector<double> maxmin_rates(const Profile& p, const std::vector<Flow>& flows);

/// Runs the flows to completion with max-min sharing re-computed whenever one finishes.
/// A flow with no bytes or src == dst finishes at 0 and loads nothing; every other flow's
/// finish includes its route latency once.
FlowOutcome run_flows(const Profile& p, const std::vector<Flow>& flows);

/// Orders loads heaviest busy_s first; ties by link index, forward direction first.
void sort_loads(std::vector<HopLoad>& loads);

// Building blocks shared with the ring search (rings.cpp); not part of the public contract.
namespace detail {

/// A flow as the list of link-direction ids (link * 2 + (forward ? 0 : 1)) it crosses.
struct FlowPath {
  std::vector<int> dirs;
  bool active = false;
};

/// The dense id of a link direction.
int dir_id(const Hop& h);
/// The hop of a dense id.
Hop dir_hop(int id);
/// Capacity (bytes/s) of every link direction, indexed by dense id.
std::vector<double> dir_capacities(const Profile& p);
/// The distinct direction ids on the route src -> dst (empty when src == dst).
std::vector<int> route_dirs(const Profile& p, int src, int dst);
/// Max-min rates of the active flows (inactive or hop-less flows get 0).
std::vector<double> maxmin(const std::vector<double>& cap, const std::vector<FlowPath>& flows);
/// Finish time of every flow run to completion (event-driven max-min); inactive flows finish
/// at 0, hop-less active ones at their latency, flows stuck on zero capacity at infinity.
std::vector<double> simulate(const std::vector<double>& cap, std::vector<FlowPath> flows,
                             const std::vector<double>& bytes, const std::vector<double>& latency_s);

}  // namespace detail

}  // namespace compass::hardware
