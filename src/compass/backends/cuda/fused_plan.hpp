#pragma once
// The host-side bookkeeping of the fused GEMM kernels, as plain C++ tested without a GPU:
// which rows of the operand arrive as one piece (and which flag releases them), the order in
// which a kernel computes its output tiles, the values flags and counters reach in a given
// iteration, and the fixed rank order in which an owner sums the partials of a GEMM-RS.
//
// AG-GEMM: rank r's A operand (the gathered input, M rows) arrives piece by piece (its own
// chunk first, then in the order the schedule's transfers deliver the others: ring, double
// ring halves, all-to-all, ...). The kernel walks the output tiles in that arrival order: a
// tile is placed at the arrival of the last piece its rows need, and within one arrival the
// tiles are swizzled (bands of `swizzle` M tiles, each band swept along N) so neighbouring
// CTAs share A rows and W columns in L2.
// GEMM-RS: the pieces are the output rows in the order the schedule computes them (the chunk
// a peer needs first first); every piece is tiled on its own, so a tile never spans two
// chunks, and each tile's epilogue releases the piece's counter.

#include <cstdint>
#include <vector>

#include "compass/backends/cuda/fused_abi.hpp"
#include "compass/core/result.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::backends::cuda {

/// A row range of the fused GEMM's operand (AG: rows of A; RS: rows of the output) that is
/// released as one unit.
struct Piece {
  std::int64_t row = 0;
  std::int64_t rows = 0;
  int chunk = -1;              ///< the chunk (owner rank) the rows belong to
  std::vector<int> producers;  ///< AG: tasks that deliver the rows; empty when local
  bool operator==(const Piece&) const = default;
};

/// The output tile of a fused kernel.
struct TileShape {
  int m = 128;
  int n = 128;
  bool operator==(const TileShape&) const = default;
};

/// The tile walk of one rank's fused AG-GEMM. `waits` holds piece indices (each piece has one
/// flag); the kernel reads tiles[i].wait_begin .. + wait_count of it.
struct AgTilePlan {
  TileShape tile;
  int tiles_m = 0;
  int tiles_n = 0;
  std::vector<AgTile> tiles;
  std::vector<std::int32_t> waits;
};

/// Orders the tiles of an M x N output whose A rows arrive as `pieces` (in arrival order;
/// together they must cover rows [0, M) exactly once). Errors name the bad piece or shape.
Result<AgTilePlan> ag_tile_plan(std::int64_t m, std::int64_t n, TileShape tile,
                                const std::vector<Piece>& pieces, int swizzle);

/// Rewrites a plan's wait lists from piece indices to flag indices: piece i is released by
/// every flag in flags_of_piece[i] (an empty list: the piece needs no wait, e.g. it was
/// written earlier on the kernel's own stream). Duplicates within a tile are dropped.
Result<AgTilePlan> ag_plan_with_flags(const AgTilePlan& plan,
                                      const std::vector<std::vector<int>>& flags_of_piece);

/// The tile walk of one rank's fused GEMM-RS: pieces in compute order, each tiled on its own.
struct RsTilePlan {
  TileShape tile;
  int tiles_n = 0;
  std::vector<RsTile> tiles;
  /// Tiles each piece contributes (index = piece), i.e. the counter increments per iteration.
  std::vector<int> tiles_per_piece;
};

/// Orders the tiles of a GEMM-RS whose output rows are computed as `pieces` (compute order;
/// covering [0, M) exactly once). Errors name the bad piece or shape.
Result<RsTilePlan> rs_tile_plan(std::int64_t m, std::int64_t n, TileShape tile,
                                const std::vector<Piece>& pieces, int swizzle);

/// The pieces of rank `rank`'s AG-GEMM in the order the schedule's GEMMs on that rank consume
/// them: each GEMM task of the rank's compute resource is one piece (its output rows are the
/// global rows of its A rows), with the transfers or copies among its dependencies that write
/// those A rows as producers. A piece read from the rank's own input has none.
Result<std::vector<Piece>> fused_ag_pieces(const schedule::Schedule& s, int rank);

/// The pieces of rank `rank`'s GEMM-RS (or GEMM-AR) in the order the schedule computes its
/// partials: each GEMM task of the rank is one piece (global rows of its A rows, chunk = the
/// task's chunk).
Result<std::vector<Piece>> fused_rs_pieces(const schedule::Schedule& s, int rank);

/// One rank's fused GEMM group as one fused kernel (AG-GEMM, or GEMM-RS for gemm_rs and
/// gemm_ar): its tasks (list order) and its pieces (fused_ag_pieces / fused_rs_pieces).
struct FusedGroup {
  int rank = 0;
  int group = 0;
  std::vector<int> tasks;
  std::vector<Piece> pieces;
};

/// The fused GEMM groups of a schedule, one per rank that has one. Errors (naming the rank):
/// a rank with GEMMs outside its group or in two groups, GEMMs that do not read whole rows of
/// an M-row operand into the same rows of an M-row output, rows not covered exactly once.
Result<std::vector<FusedGroup>> fused_groups(const schedule::Schedule& s);

/// Whether the fused kernels can multiply the groups' operands: the inner dimension, the
/// output width and every leading dimension (A, B, C rows) multiples of 8 elements (16-byte
/// rows for bf16 / fp16). The error names the rank and the dimension.
Status check_fused_shapes(const schedule::Schedule& s, const std::vector<FusedGroup>& groups);

/// Where a fused GEMM-RS group's kernel stores each piece: per piece of `g` (a GEMM-RS group
/// of fused_groups), the transfer task that moves the GEMM's output into the owner's slot (the
/// kernel's epilogue stores there instead, so the executor skips the transfer), or -1 for the
/// rank's own chunk, which stays where its GEMM writes it. Errors name the piece whose output
/// no single transfer of the whole rows takes to its owner.
Result<std::vector<int>> rs_store_tasks(const schedule::Schedule& s, const FusedGroup& g);

/// The owner's ordered sum of a chunk in a schedule with GEMM-RS groups: the copy and the adds
/// on the owner's compute resource that form its output rows from the p partials (the copy of
/// the first, then one add per other partial, in this order: rank order in the generated
/// schedules). The executor runs them as one ordered-sum kernel at the last task.
struct RsSum {
  int owner = 0;
  std::vector<int> tasks;                ///< the copy, then the adds (list order)
  std::vector<schedule::Region> parts;   ///< their sources, in summation order
  schedule::Region dst;                  ///< the owner's output rows
};

/// One sum per rank of a schedule with GEMM-RS groups: the copy on the rank's compute
/// resource that writes rows of its output "y", and the adds into the same region after it.
/// Errors name the rank without exactly one such chain of p parts.
Result<std::vector<RsSum>> rs_sums(const schedule::Schedule& s);

/// The value an AG flag reaches once its piece has arrived in iteration `epoch` (1, 2, ...):
/// flags are zeroed once and never reset, each iteration writes its own number.
std::uint32_t ag_flag_target(std::uint32_t epoch);

/// The value a GEMM-RS chunk counter reaches once iterations 1..epoch have each stored
/// `tiles_per_iteration` tiles into the chunk (all ranks together; counters are never reset
/// either). Errors when the count no longer fits in 32 bits.
Result<std::uint32_t> rs_counter_target(std::uint32_t epoch, std::int64_t tiles_per_iteration);

/// Tiles a rank's GEMM-RS stores into each chunk per iteration (index = chunk, size `ranks`).
Result<std::vector<int>> rs_tiles_per_chunk(const RsTilePlan& plan,
                                            const std::vector<Piece>& pieces, int ranks);

/// How the owner of one chunk forms the sum of the p partials of a GEMM-RS: it waits until
/// the chunk's counter reaches `counter_target`, then adds the partial slots in `rank_order`
/// (always 0, 1, ..., p-1, whatever order they arrived in) into an FP32 accumulator and
/// rounds once, so every run gives bit-identical output.
struct ReductionStep {
  int chunk = 0;
  int owner = 0;
  std::vector<int> rank_order;
  std::uint32_t counter_target = 0;
};

/// One step per chunk (owner j = chunk j). `tiles[r][j]` is the tiles rank r stores into
/// chunk j per iteration (rs_tiles_per_chunk of rank r's plan); ranks may tile a chunk
/// differently (the owner computes its own chunk whole, peers in halves on a double ring).
Result<std::vector<ReductionStep>> rs_reduction_plan(const std::vector<std::vector<int>>& tiles,
                                                     std::uint32_t epoch);

}  // namespace compass::backends::cuda
