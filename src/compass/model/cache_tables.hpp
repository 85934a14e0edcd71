#pragma once
// The tables behind model::Caches (caches.hpp). Used only by the model's own .cpp files.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compass/hardware/flows.hpp"
#include "compass/model/caches.hpp"

namespace compass::model::detail {

/// One ring step's pattern at a reference size: data time per byte and latency of each flow.
struct ScaledStep {
  std::vector<double> per_byte_s;
  std::vector<double> latency_s;
  std::string bottleneck;
};

/// One run of released flows (all at 0, no gaps) at a reference size.
struct ScaledRun {
  std::vector<double> per_byte_s, latency_s;
};

/// The all-to-all bottleneck and the directions it loads beyond the ring's.
struct Congestion {
  std::string bottleneck;
  std::vector<std::string> congested;
};

/// A memo key's first word is the hash of the rest (computed once, see run_released_flows).
struct KeyHash {
  std::size_t operator()(const std::vector<std::uint64_t>& key) const {
    return static_cast<std::size_t>(key.front());
  }
};

/// Buffers of run_released_flows, kept so the planner's event loops do not allocate.
struct ReleasedWorkspace {
  hardware::sharing::FlatPaths paths;
  hardware::sharing::IncrementalMaxmin sharing;  // its active(): released, not finished
  std::vector<double> remaining, latency;
  std::vector<int> ended;                    // flows finishing at this event
  std::vector<int> next_of, first_next;      // flows waiting for flow i: linked list
  std::vector<std::pair<double, int>> heap;  // (release, index) of known, not yet released flows
  std::vector<std::uint64_t> key;
};

struct CacheTables {
  std::map<std::vector<double>, ScaledStep> steps;     // cached_ring_step_time
  std::map<std::vector<double>, ScaledRun> patterns;   // cached_released_flows
  std::unordered_map<std::vector<std::uint64_t>, std::vector<double>, KeyHash> runs;  // run_released_flows
  std::size_t run_words = 0;                           // words the runs memo holds
  std::map<std::vector<double>, Congestion> congestion;  // all-to-all congestion per pattern
  ReleasedWorkspace released;                          // scratch, not a memo
};

}  // namespace compass::model::detail
