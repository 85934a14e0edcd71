#pragma once
// A fused strategy's program (schedule/program.hpp) as the model follows it (docs/model.md,
// "Fused programs"): every compute item priced, every transfer routed, and who waits for what.
// The tree patterns, the rings and the all-to-all price their program and follow it in one
// pass over its events, as the simulator runs the schedule. Used only by the model's own .cpp
// files.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compass/core/index_lists.hpp"
#include "compass/hardware/flows.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/program.hpp"
#include "compass/workload/operator.hpp"

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
  using Send = schedule::Program::Send;
  using Lists = IndexLists;
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

/// `pr` priced for `op` on GPU `gpu`: a GEMM piece of r rows costs
/// hardware::fused_chunk_compute_s(prof, r, op.m, n, k, op.dtype, gpu) (a chunk of the fused
/// kernel computing the rank's local GEMM of n x k, workload::local_gemm), an add of r rows
/// hardware::add_s(prof, gpu, r * schedule::program_row_bytes(op)). Not yet prepared.
FusedProgram price_program(const schedule::Program& pr, const hardware::Profile& prof,
                           const workload::OperatorSpec& op, int gpu);

/// Fills in what following `pr` needs, once: its transfers' sizes (rows * row_bytes), routes
/// and latencies between `gpus` (the GPU of each rank), the link capacities, and who waits for
/// what.
void prepare_program(FusedProgram& pr, const hardware::Profile& prof, const std::vector<int>& gpus,
                     double row_bytes);

/// `prepared` (a prepare_program() result) with its items priced for `op` on GPU `gpu` from
/// `pr`, the program it was built from, and its busiest rank's work re-summed: equal to
/// price_program(pr, prof, op, gpu) then prepare_program() with `prepared`'s GPUs and row
/// bytes, without routing again. `pr` must have `prepared`'s transfers and items.
FusedProgram reprice_program(const FusedProgram& prepared, const schedule::Program& pr,
                             const hardware::Profile& prof, const workload::OperatorSpec& op,
                             int gpu);

/// The costs a fused program is followed under on `prof` for p ranks: kernel launch, copy
/// issue and flag wait when `overheads`; with `interference` and p > 1 the fused kernel's GEMM
/// slowdown beside copy engines (hardware::gemm_slowdown) and the transfers' slowdown beside a
/// GEMM (Interference::comm_slowdown_beside_gemm). The estimate and the timeline both use it.
FollowCosts fused_follow_costs(const hardware::Profile& prof, int p, bool overheads,
                               bool interference);

struct Followed {
  double end_s = 0;   ///< the last item or transfer; NaN when the program cannot finish
  double work_s = 0;  ///< GEMM and add work of the busiest rank
};

/// When each step ran, for follow_program's caller that asks: per transfer, when its data and
/// its copy engine were ready (before the copy issue) and when it landed; per item (indexed by
/// FusedProgram::item_base), when its stream was ready for it (before its launch or flag wait)
/// and when it ended.
struct FollowedTimes {
  std::vector<double> send_start_s, send_end_s, item_start_s, item_end_s;
};

/// Follows a prepared program in one pass over its events, as the simulator runs the schedule:
/// each rank's compute stream runs its items in order (a fused kernel: one launch, then a flag
/// wait before every further GEMM piece and every add; an item waits for the transfer it
/// needs), a transfer leaves one copy issue after its data is complete (the item or the
/// transfer it waits for) and its copy engine's previous transfer has landed, and the moving
/// transfers share the links max-min, re-shared whenever one joins or leaves
/// (hardware::sharing::IncrementalMaxmin, `sharing` is scratch); a transfer waits out its
/// route latency before its bytes join the sharing and lands with its last byte (the
/// simulator's order, backends/sim/engine.cpp). Interference as in the simulator: a GEMM advances at 1/fg while
/// its rank has a transfer under way (from its start until it lands), and a transfer that
/// starts while a GEMM runs at either end counts its bytes fc times. With `work` false every
/// item costs nothing (the communication alone).
/// With `times`, also records when each step ran.
Followed follow_program(const FusedProgram& pr, const FollowCosts& costs, bool work,
                        hardware::sharing::IncrementalMaxmin& sharing,
                        FollowedTimes* times = nullptr);

}  // namespace compass::model::detail
