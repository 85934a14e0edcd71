#pragma once
// Max-min fair sharing of links by concurrent flows on a Profile's routes.
// Every link direction is an independent resource (full duplex); a flow uses every hop of
// its route; rates follow progressive filling; when a flow ends the rest are re-shared.

#include <cstdint>
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

/// The names of the link directions in `loads` that are busier than `limit_s` (more than a
/// relative 1e-9, so rounding never counts), in the order of `loads`: the one rule for
/// "congested" (e.g. all-to-all directions loaded beyond the busiest direction of a ring).
std::vector<std::string> congested_beyond(const std::vector<HopLoad>& loads, double limit_s);

// Link-direction building blocks: flow paths as dense direction ids, max-min sharing
// (batch and incremental) and flow-level simulation. Used by the ring search (rings.cpp),
// the communication model and the CPU backend's paced links.
namespace sharing {

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
/// route_dirs(p, src, dst) appended to `out`.
void append_route_dirs(const Profile& p, int src, int dst, std::vector<int>& out);

/// Flow paths in one flat array: flow f crosses dirs[offset[f]] .. dirs[offset[f + 1] - 1].
struct FlatPaths {
  std::vector<int> offset{0};
  std::vector<int> dirs;
};

/// Buffers of maxmin_of, kept between calls so that an event loop does not allocate.
/// `count` must be all zero between calls (maxmin_of leaves it so).
struct MaxminWorkspace {
  std::vector<int> count, live, unfrozen;
  std::vector<double> remaining, share;
};

/// Max-min rates of the flows `ids` (ascending indices into `paths`), written to rate[f] for
/// every f in ids (hop-less ones get 0); other entries of `rate` are left alone. Bit-identical
/// to progressive filling over every flow and every direction with exactly these flows active
/// (the same operations in the same order); its cost grows with the flows in `ids` and the
/// directions they cross, not with all flows or all directions. maxmin() is built on it.
void maxmin_of(const std::vector<double>& cap, const FlatPaths& paths, const std::vector<int>& ids,
               std::vector<double>& rate, MaxminWorkspace& ws);

/// Max-min rates of the active flows (inactive or hop-less flows get 0), with the caller's
/// buffers (an event loop keeps one workspace) or buffers of its own.
std::vector<double> maxmin(const std::vector<double>& cap, const std::vector<FlowPath>& flows,
                           MaxminWorkspace& ws);
std::vector<double> maxmin(const std::vector<double>& cap, const std::vector<FlowPath>& flows);

/// Max-min rates of a changing set of active flows for an event loop. Flows joined by shared
/// directions form components, and progressive filling in one component never reads another,
/// so rates() re-computes only the components that gained a flow or lost one since the last
/// call and keeps the other rates: bit-identical to maxmin() over the active flows. A
/// component's rates depend only on the capacities and its flows' direction lists in flow
/// order, so they are also remembered by those lists (kept across resets while the
/// capacities are the same): ring schedules repeat the same few components step after step.
class IncrementalMaxmin {
 public:
  /// No flow active; `cap` and `paths` (flows 0 .. paths.offset.size() - 2) must outlive the
  /// use until the next reset. Keeps its buffers, so a loop of runs does not allocate.
  void reset(const std::vector<double>& cap, const FlatPaths& paths);
  /// Makes flow f active (it must not be).
  void add(int f);
  /// Makes flow f inactive (it must be active).
  void remove(int f);
  /// The active flows, in no particular order.
  const std::vector<int>& active() const { return active_; }
  /// rates()[f] for every active f (other entries are stale).
  const std::vector<double>& rates();

 private:
  const std::vector<double>* cap_ = nullptr;
  const FlatPaths* paths_ = nullptr;
  std::vector<int> active_;
  std::vector<double> rate_;
  std::vector<std::vector<int>> users_;  // active flows crossing each direction
  std::vector<int> seeds_, dirty_dirs_;  // what changed since the last rates()
  std::vector<int> component_;
  std::vector<int> active_at_;  // per flow: its index in active_ (-1: inactive)
  // Marks of the flows and directions a rates() call has walked: equal to its epoch_.
  std::vector<unsigned> seen_flow_, seen_dir_;
  unsigned epoch_ = 0;
  MaxminWorkspace ws_;
  // Component rates by direction lists ([count, dirs...] per flow) under memo_cap_, in one
  // open-addressed table: each slot names its key's words in memo_words_ and its rates (one
  // per flow, in flow order) in memo_rates_.
  struct MemoSlot {
    std::uint64_t hash = 0;  // 0: empty
    std::uint32_t key_at = 0, key_words = 0, rates_at = 0;
  };
  void memo_clear();
  const double* memo_find(std::uint64_t hash) const;
  void memo_insert(std::uint64_t hash, const std::vector<double>& rate,
                   const std::vector<int>& flows);
  std::vector<double> memo_cap_;
  std::vector<MemoSlot> memo_slots_;
  std::vector<int> memo_words_;
  std::vector<double> memo_rates_;
  std::size_t memo_entries_ = 0;
  std::vector<int> memo_key_;
};

/// Finish time of every flow run to completion (event-driven max-min); inactive flows finish
/// at 0, hop-less active ones at their latency, flows stuck on zero capacity at infinity.
std::vector<double> simulate(const std::vector<double>& cap, std::vector<FlowPath> flows,
                             const std::vector<double>& bytes, const std::vector<double>& latency_s);

}  // namespace sharing

}  // namespace compass::hardware
