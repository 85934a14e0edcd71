#pragma once
// The compact program of a fused strategy (docs/model.md, "Fused programs"): per rank, its
// compute stream's items in program order; per transfer, its ends, rows, its copy engine's
// previous transfer and what its data waits for. One home for each strategy's pattern: the
// model prices and follows it (model/program.hpp), the generator lowers the rings' and the
// all-to-all's program to tasks (laid_out_program, generate.cpp) and emits the tree patterns'
// program steps in the same order (patterns.cpp), and the tests check that every program step
// is a task of the generated schedule with the program's dependencies
// (tests/schedule/test_program.cpp).
// Programs carry rows, never prices.

#include <cstdint>
#include <vector>

#include "compass/schedule/generate.hpp"
#include "compass/schedule/strategy.hpp"
#include "compass/workload/operator.hpp"

namespace compass::schedule {

struct Program {
  /// One item of a rank's compute stream (a fused kernel): a GEMM piece of `rows` output rows,
  /// or an add of a received partial of `rows` rows.
  struct Item {
    bool add = false;
    std::int64_t rows = 0;
    int flow_in = -1;  ///< the transfer it waits for (-1: none)
    bool operator==(const Item&) const = default;
  };
  /// One transfer of `rows` rows between two ranks.
  struct Send {
    int from = 0, to = 0;  ///< ranks
    int after = -1;        ///< its copy engine's previous transfer (-1: none)
    int ready_item = -1;   ///< the sender's item that completes the data, or
    int dep_flow = -1;     ///< the transfer that brings it (neither: ready at the start)
    std::int64_t rows = 0;
    bool operator==(const Send&) const = default;
  };
  std::vector<std::vector<Item>> items;  ///< per rank, in program order
  std::vector<Send> sends;
  bool operator==(const Program&) const = default;
};

/// Whether `kind` is described by a Program: fuse:ring, fuse:double-ring, fuse:all2all,
/// fuse:hier and fuse:synth (sequential and decompose:d are NCCL-style collectives beside
/// separate GEMM kernels, described by a CollectiveProgram, collective_program.hpp).
bool has_program(StrategyKind kind);

/// The bytes one row of `op`'s transfers moves: K elements for ag_gemm (input rows), N for
/// gemm_rs and gemm_ar (output rows).
double program_row_bytes(const workload::OperatorSpec& op);

/// The program of `op` under `strategy` with the communication orders of `plan`, as the
/// generator emits it with GenerateOptions::fused_gemm off (docs/schedule.md). Requires
/// has_program(strategy.kind), a valid op, a plan of op.tp ranks whose rings list every rank
/// once, copy_engines >= 1, and for the tree patterns a valid tree plan and op.tp >= 2.
///  - Rings (one, or two carrying half of every shard/chunk each): AG-GEMM computes its own
///    shard, then per step the rows that landed, forwarding each shard (half) to its
///    successor; GEMM-RS computes at step k the partial of the chunk of ring[P - k - 1], adds
///    the running sum that arrived and forwards it, its own chunk last; GEMM-AR then
///    all-gathers the reduced chunks on the same rings. Transfers are numbered (step, rank,
///    lane), as the generator emits them; with one copy engine both lanes queue on it.
///  - All-to-all: pushes to r + k on engine (k - 1) mod engines, GEMMs of the shards of
///    r - k as they land (AG-GEMM); partials pushed to their owners, then the adds of r - k
///    (GEMM-RS), GEMM-AR pushing the reduced chunk to every peer after.
///  - Tree patterns: schedule::tree_allgather_program and tree_reduce_scatter_program, read
///    step by step (the all-gather's arrivals are AG-GEMM's GEMM pieces); the reduce-scatter
///    in the order `rs_costs` gives (GenerateOptions::tree_rs_costs: the same costs give the
///    same program as the generator's schedule).
Program program(const workload::OperatorSpec& op, const Strategy& strategy, const CommPlan& plan,
                const TreeRsCosts& rs_costs = {});

/// The program of `op` along the trees of `tp` (plan.hier or plan.synth; plan.copy_engines
/// and, for the reduce-scatter's compute order, `rs_costs`): what program() returns for
/// fuse:hier and fuse:synth. Same requirements.
Program tree_program(const workload::OperatorSpec& op, const TreePlan& tp, const CommPlan& plan,
                     const TreeRsCosts& rs_costs = {});

/// Where a program's steps go in its schedule (laid_out_program): for every item and transfer,
/// the chunk whose rows it carries, its step label, its lane (ring h; -1: none), for a transfer
/// its copy engine and whether it lands in the owner's output rows (gemm_ar's all-gather) rather
/// than a receive slot; and the order in which the generator emits the steps as tasks.
struct ProgramLayout {
  struct Tag {
    int chunk = 0, step = 0, lane = -1, engine = 0;
    bool output = false;
  };
  /// An item (rank, index into Program::items[rank]) or, with rank -1, transfer `index`.
  struct Ref {
    int rank = -1, index = 0;
  };
  std::vector<std::vector<Tag>> items;  ///< per rank, as Program::items
  std::vector<Tag> sends;
  std::vector<Ref> order;  ///< every step once
};

struct LaidOutProgram {
  Program program;
  ProgramLayout layout;
};

/// program() of fuse:all2all, fuse:ring or fuse:double-ring with its layout: what the generator
/// lowers to the schedule (generate.cpp: buffers, regions and names from the tags, tasks in
/// layout order). Same requirements as program().
LaidOutProgram laid_out_program(const workload::OperatorSpec& op, const Strategy& strategy,
                                const CommPlan& plan);

/// The program a schedule of a fused strategy runs, read back from its tasks: per rank its
/// compute stream's GEMM pieces and adds in list order, its transfers in task order (each
/// behind the previous transfer on its copy engine), and of each task's dependencies the ones
/// the program holds: a transfer's latest item on its sender, or the transfer that brought its
/// data to the sender; an item's transfer into its rank. Errors when the schedule is not one
/// program: a copy task, a GEMM outside a fused kernel, a transfer of partial rows, or a
/// dependency the program's orders and waits do not imply. For a schedule generate() builds
/// (fused_gemm off, tree_rs_costs c) this is program(op, strategy, plan, c)
/// (tests/schedule/test_program.cpp).
Result<Program> program_of(const Schedule& s);

}  // namespace compass::schedule
