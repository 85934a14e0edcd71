#pragma once
// A fused strategy's schedule as the model follows it (docs/model.md, "Fused programs"): per
// rank, its compute stream's items in program order; per transfer, its ends, rows, its copy
// engine's previous transfer and what its data waits for. The tree patterns, the rings and the
// all-to-all build one each and follow it in one pass over its events, as the simulator runs
// the schedule. Used only by the model's own .cpp files.

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "compass/hardware/flows.hpp"
#include "compass/hardware/profile.hpp"

namespace compass::model::detail {

/// Costs of following a program (overheads and interference already switched by the
/// estimate's knobs).
struct FollowCosts {
  double launch = 0, copy_issue = 0, flag_wait = 0;
  double fg = 1, fc = 1;  ///< GEMM beside copies, copies beside GEMM
};

struct FusedProgram {
  struct Item {
    bool add = false;   ///< an add of a received partial, else a GEMM piece
    double work = 0;
    int flow_in = -1;   ///< the transfer it waits for (-1: none)
  };
  struct Send {
    int from = 0, to = 0;  ///< ranks
    int after = -1;        ///< its copy engine's previous transfer (-1: none)
    int ready_item = -1;   ///< the sender's item that completes the data, or
    int dep_flow = -1;     ///< the transfer that brings it (neither: ready at the start)
    std::int64_t rows = 0;
  };
  /// Index lists keyed 0..n-1 in one array (key k: at[begin[k]] .. at[begin[k + 1] - 1]), each
  /// in the order its (key, index) pairs were given.
  struct Lists {
    std::vector<std::size_t> begin{0};
    std::vector<int> at;
    Lists() = default;
    Lists(std::size_t n, const std::vector<std::pair<int, int>>& pairs);
    std::span<const int> of(std::size_t k) const {
      return {at.data() + begin[k], at.data() + begin[k + 1]};
    }
  };
  /// One transfer's constant facts.
  struct Flow {
    double bytes = 0, latency_s = 0;
    int waits = 0;       ///< what it waits for: its data's item or transfer, its engine's previous
    bool moves = false;  ///< between two GPUs (else it lands the moment it starts)
  };

  std::vector<std::vector<Item>> items;  ///< per rank, in program order
  std::vector<Send> sends;
  // Set by prepare_program().
  std::vector<Flow> flows;
  std::vector<double> cap;               ///< of every link direction
  hardware::sharing::FlatPaths paths;    ///< of every transfer
  std::vector<std::size_t> item_base;    ///< rank v's items are v's base .. the next rank's
  Lists flow_waiters;  ///< per transfer: the transfers waiting for it to land
  Lists item_waiters;  ///< per transfer: the ranks whose items wait for it
  Lists send_waiters;  ///< per item (item_base + index): the transfers waiting for it to end
  double work_s = 0;   ///< GEMM and add work of the busiest rank
};

/// Fills in what following `pr` needs, once: its transfers' sizes (rows * row_bytes), routes
/// and latencies between `gpus` (the GPU of each rank), the link capacities, and who waits for
/// what.
void prepare_program(FusedProgram& pr, const hardware::Profile& prof, const std::vector<int>& gpus,
                     double row_bytes);

struct Followed {
  double end_s = 0;   ///< the last item or transfer; NaN when the program cannot finish
  double work_s = 0;  ///< GEMM and add work of the busiest rank
};

/// Follows a prepared program in one pass over its events, as the simulator runs the schedule:
/// each rank's compute stream runs its items in order (a fused kernel: one launch, then a flag
/// wait before every further GEMM piece and every add; an item waits for the transfer it
/// needs), a transfer leaves one copy issue after its data is complete (the item or the
/// transfer it waits for) and its copy engine's previous transfer has landed, and the moving
/// transfers share the links max-min, re-shared whenever one joins or leaves
/// (hardware::sharing::IncrementalMaxmin, `sharing` is scratch); a transfer lands its route
/// latency after its last byte. Interference as in the simulator: a GEMM advances at 1/fg while
/// its rank has a transfer under way (from its start until it lands), and a transfer that
/// starts while a GEMM runs at either end counts its bytes fc times. With `work` false every
/// item costs nothing (the communication alone).
Followed follow_program(const FusedProgram& pr, const FollowCosts& costs, bool work,
                        hardware::sharing::IncrementalMaxmin& sharing);

}  // namespace compass::model::detail
