#pragma once
// The tables behind model::Caches (caches.hpp). Used only by the model's own .cpp files.

#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compass/hardware/flows.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/caches.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/schedule/collective_program.hpp"
#include "compass/schedule/program.hpp"

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

/// A double as a key word, bit for bit.
inline std::uint64_t key_bits(double x) { return std::bit_cast<std::uint64_t>(x); }

/// Fills a memo key's first word with the hash of the rest (FNV-style over four interleaved
/// lanes: independent multiply chains run in parallel).
inline void seal_key(std::vector<std::uint64_t>& key) {
  std::uint64_t h[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9e3779b97f4a7c15ULL,
                        0xc2b2ae3d27d4eb4fULL};
  for (std::size_t w = 1; w < key.size(); ++w) h[w % 4] = (h[w % 4] ^ key[w]) * 0x100000001b3ULL;
  const std::uint64_t all = h[0] ^ (h[1] << 17 | h[1] >> 47) ^ (h[2] << 31 | h[2] >> 33) ^
                            (h[3] << 47 | h[3] >> 17);
  key[0] = all ^ (all >> 29);
}

/// A memo key's first word is the hash of the rest (computed once by seal_key).
struct KeyHash {
  std::size_t operator()(const std::vector<std::uint64_t>& key) const {
    return static_cast<std::size_t>(key.front());
  }
};

/// A tree-pattern estimate without its communication-alone pass.
struct TreeResult {
  double total_s = 0, compute_s = 0;
  std::string bottleneck;
};

struct FusedProgram;  // model/program.hpp: a pattern's program, prepared for following

/// Tree-pattern estimates (model/tree_estimate.cpp) on one profile: the estimate by everything
/// it reads besides the profile (operator, pattern, group, engines, costs), and the
/// communication-alone pass by what it reads (operator kind, rows, row bytes, pattern, group,
/// engines). A different profile empties both.

struct TreeMemo {
  std::optional<hardware::Profile> profile;
  // While a CheckedProfile lives: the profile found equal to `profile`, which memo_for then
  // need not compare again (a call that plans for one profile does not change it).
  const hardware::Profile* checked = nullptr;
  // The patterns met (the words naming a pattern, its group and engines), each once: the keys
  // below name a pattern by its index here.
  std::vector<std::vector<std::uint64_t>> patterns;
  std::unordered_map<std::vector<std::uint64_t>, TreeResult, KeyHash> results;
  std::unordered_map<std::vector<std::uint64_t>, double, KeyHash> comm;
  std::size_t words = 0;  // words the two tables' keys hold
  // The last few programs built, by operator and pattern, newest last: the choice and the
  // chosen strategy's breakdown follow one program under different costs.
  std::vector<std::pair<std::vector<std::uint64_t>, std::shared_ptr<const FusedProgram>>> programs;
  // Tree programs by what their structure reads (kind, rows, row bytes, the reduce-scatter's
  // compute costs, pattern, group, engines), prepared for following: operators that differ
  // only in what prices their items (an all-gather's N, say) share one, re-priced.
  struct Skeleton {
    std::shared_ptr<const schedule::Program> program;
    std::shared_ptr<const FusedProgram> prepared;
  };
  std::unordered_map<std::vector<std::uint64_t>, Skeleton, KeyHash> skeletons;
  // The busiest link direction of a pattern's all-gather (reduce-scatter: reversed), by
  // direction, group and trees.
  std::unordered_map<std::vector<std::uint64_t>, std::string, KeyHash> bottlenecks;
  // The rings' and the all-to-all's programs (estimate.cpp), kept the same way, and their
  // follows (end, busiest rank's work) by program and costs: the choice and the chosen
  // strategy's breakdown price and follow one program under the same costs.
  std::vector<std::pair<std::vector<std::uint64_t>, std::shared_ptr<const FusedProgram>>>
      fused_programs;
  std::unordered_map<std::vector<std::uint64_t>, std::pair<double, double>, KeyHash> fused_results;
};

/// `memo` for profile `prof`: emptied first when it holds another profile's answers.
inline TreeMemo& memo_for(TreeMemo& memo, const hardware::Profile& prof) {
  if (&prof == memo.checked) return memo;
  if (!memo.profile || !(*memo.profile == prof)) {
    memo = TreeMemo{};
    memo.profile = prof;
  }
  return memo;
}

/// For the length of one call that plans every estimate for `prof`: memo_for compares the
/// profile with the memo's once, here, instead of at every estimate.
class CheckedProfile {
 public:
  CheckedProfile(TreeMemo& memo, const hardware::Profile& prof) : memo_(memo) {
    memo_for(memo, prof);
    memo.checked = &prof;
  }
  ~CheckedProfile() { memo_.checked = nullptr; }
  CheckedProfile(const CheckedProfile&) = delete;
  CheckedProfile& operator=(const CheckedProfile&) = delete;

 private:
  TreeMemo& memo_;
};

/// Buffers of run_released_flows, kept so the planner's event loops do not allocate.
struct ReleasedWorkspace {
  hardware::sharing::FlatPaths paths;
  hardware::sharing::IncrementalMaxmin sharing;  // its active(): released, not finished
  std::vector<double> remaining, latency;
  std::vector<double> done_below;            // per flow: the remainder at which it has finished
  std::vector<int> ended;                    // flows finishing at this event
  std::vector<int> next_of, first_next;      // flows waiting for flow i: linked list
  std::vector<int> also_next_of, also_first_next;  // the same through also_after
  std::vector<int> pending;                  // per flow: predecessors not finished yet
  std::vector<std::pair<double, int>> heap;  // (release, index) of known, not yet released flows
};

struct PreparedCollective;  // estimate_ctx.hpp: a collective program, prepared for following

/// Buffers of the collective programs' follower (model/decompose.cpp), kept so that following
/// does not allocate: per price class its work or a send class's edge times per ring position,
/// per step when it started, ended and (a send) moved its first byte and whether it was beside
/// a GEMM, per rank its streams' free times and windows.
struct CollectiveWorkspace {
  std::vector<double> work;
  std::vector<std::vector<double>> edge, edge_slow;
  std::vector<double> from, start, end, cs, ce;
  std::vector<char> slow;
  std::vector<std::size_t> first_busy;
  std::vector<std::vector<hardware::Window>> busy, computing;
};

struct CacheTables {
  // sequential's and decompose:d's programs by what they read (operator kind, M, tp, parts,
  // ring): operators that differ only in N and K share one.
  std::unordered_map<std::vector<std::uint64_t>, std::shared_ptr<const PreparedCollective>, KeyHash>
      collective_programs;
  std::map<std::vector<double>, ScaledStep> steps;     // cached_ring_step_time
  std::map<std::vector<double>, ScaledRun> patterns;   // latency_first_flows' scaled runs
  std::map<std::vector<double>, std::vector<double>> latency_first;  // latency_first_flows
  std::map<std::vector<double>, Congestion> congestion;  // all-to-all congestion per pattern
  TreeMemo trees;                                      // tree-pattern estimates
  ReleasedWorkspace released;                          // scratch, not a memo
  hardware::sharing::IncrementalMaxmin following;      // follow_program's, scratch
  CollectiveWorkspace collective;                      // follow_collectives', scratch
};

}  // namespace compass::model::detail
