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
FlowOutcome run_flows(const Profile& p, const std::vector<Flow>& flows);

}  // namespace compass::hardware
