// Tile walks, flag targets and the reduction plan of the fused GEMM kernels (no CUDA).
#include "compass/backends/cuda/fused_plan.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace compass::backends::cuda {

namespace {

// The pieces must tile [0, m) exactly once.
Status check_cover(std::int64_t m, const std::vector<Piece>& pieces, const char* what) {
  if (pieces.empty()) return make_error("{}: no pieces", what);
  std::vector<std::size_t> idx(pieces.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::sort(idx.begin(), idx.end(),
            [&](std::size_t a, std::size_t b) { return pieces[a].row < pieces[b].row; });
  std::int64_t next = 0;
  for (std::size_t i : idx) {
    const Piece& p = pieces[i];
    if (p.rows <= 0) return make_error("{}: piece {} has {} rows", what, i, p.rows);
    if (p.row != next)
      return make_error("{}: piece {} starts at row {} but rows [{}, {}) are {}", what, i, p.row,
                        std::min(next, p.row), std::max(next, p.row),
                        p.row > next ? "in no piece" : "in two pieces");
    next = p.row + p.rows;
  }
  if (next != m)
    return make_error("{}: the pieces cover rows [0, {}) but the operand has {} rows", what, next,
                      m);
  return Status::success();
}

Status check_shape(std::int64_t m, std::int64_t n, TileShape tile, int swizzle, const char* what) {
  if (m < 1 || n < 1) return make_error("{}: shape {} x {} must be at least 1 x 1", what, m, n);
  if (tile.m < 1 || tile.n < 1)
    return make_error("{}: tile {} x {} must be at least 1 x 1", what, tile.m, tile.n);
  if (swizzle < 1) return make_error("{}: swizzle {} must be at least 1", what, swizzle);
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  if ((m + tile.m - 1) / tile.m > kMax || (n + tile.n - 1) / tile.n > kMax)
    return make_error("{}: too many tiles for 32-bit indices", what);
  return Status::success();
}

// Appends, in swizzled order, the tiles of the M tiles `ms` (ascending) over all N tiles:
// bands of `swizzle` consecutive entries of `ms`, each band swept along N.
template <typename Emit>
void swizzled(const std::vector<std::int64_t>& ms, int tiles_n, int swizzle, Emit emit) {
  for (std::size_t band = 0; band < ms.size(); band += static_cast<std::size_t>(swizzle)) {
    const std::size_t end = std::min(ms.size(), band + static_cast<std::size_t>(swizzle));
    for (int nt = 0; nt < tiles_n; ++nt)
      for (std::size_t i = band; i < end; ++i) emit(ms[i], nt);
  }
}

bool overlaps(std::int64_t a, std::int64_t alen, std::int64_t b, std::int64_t blen) {
  return a < b + blen && b < a + alen;
}

}  // namespace

Result<AgTilePlan> ag_tile_plan(std::int64_t m, std::int64_t n, TileShape tile,
                                const std::vector<Piece>& pieces, int swizzle) {
  COMPASS_TRY(check_shape(m, n, tile, swizzle, "fused AG-GEMM tile plan"));
  COMPASS_TRY(check_cover(m, pieces, "fused AG-GEMM tile plan"));
  AgTilePlan plan;
  plan.tile = tile;
  plan.tiles_m = static_cast<int>((m + tile.m - 1) / tile.m);
  plan.tiles_n = static_cast<int>((n + tile.n - 1) / tile.n);
  // For every M tile: the pieces its rows need, and the arrival position of the last one.
  std::vector<std::vector<std::int32_t>> need(static_cast<std::size_t>(plan.tiles_m));
  std::vector<std::size_t> ready(static_cast<std::size_t>(plan.tiles_m), 0);
  for (std::size_t pi = 0; pi < pieces.size(); ++pi) {
    const Piece& p = pieces[pi];
    const std::int64_t first = p.row / tile.m;
    const std::int64_t last = (p.row + p.rows - 1) / tile.m;
    for (std::int64_t t = first; t <= last; ++t) {
      need[static_cast<std::size_t>(t)].push_back(static_cast<std::int32_t>(pi));
      ready[static_cast<std::size_t>(t)] = std::max(ready[static_cast<std::size_t>(t)], pi);
    }
  }
  // Group the M tiles by the arrival that completes them; within an arrival, ascending.
  std::vector<std::vector<std::int64_t>> by_arrival(pieces.size());
  for (int t = 0; t < plan.tiles_m; ++t)
    by_arrival[ready[static_cast<std::size_t>(t)]].push_back(t);
  // One wait list per M tile, shared by its N tiles.
  std::vector<std::int32_t> wait_begin(static_cast<std::size_t>(plan.tiles_m));
  for (int t = 0; t < plan.tiles_m; ++t) {
    wait_begin[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(plan.waits.size());
    auto& w = need[static_cast<std::size_t>(t)];
    plan.waits.insert(plan.waits.end(), w.begin(), w.end());
  }
  plan.tiles.reserve(static_cast<std::size_t>(plan.tiles_m) *
                     static_cast<std::size_t>(plan.tiles_n));
  for (const auto& group : by_arrival)
    swizzled(group, plan.tiles_n, swizzle, [&](std::int64_t mt, int nt) {
      const auto& w = need[static_cast<std::size_t>(mt)];
      plan.tiles.push_back(AgTile{static_cast<std::int32_t>(mt), nt,
                                  wait_begin[static_cast<std::size_t>(mt)],
                                  static_cast<std::int32_t>(w.size())});
    });
  return plan;
}

Result<AgTilePlan> ag_plan_with_flags(const AgTilePlan& plan,
                                      const std::vector<std::vector<int>>& flags_of_piece) {
  AgTilePlan out = plan;
  out.waits.clear();
  // Tiles of one M row share their wait list: rewrite each distinct list once.
  std::vector<std::int32_t> begin_of(plan.waits.size() + 1, -1), count_of(plan.waits.size() + 1, 0);
  for (AgTile& t : out.tiles) {
    const auto key = static_cast<std::size_t>(t.wait_begin);
    if (key < begin_of.size() && begin_of[key] >= 0 && t.wait_count > 0) {
      t.wait_begin = begin_of[key];
      t.wait_count = count_of[key];
      continue;
    }
    std::vector<std::int32_t> flags;
    for (int w = t.wait_begin; w < t.wait_begin + t.wait_count; ++w) {
      const int piece = plan.waits.at(static_cast<std::size_t>(w));
      if (piece < 0 || piece >= static_cast<int>(flags_of_piece.size()))
        return make_error("fused AG-GEMM: tile waits for piece {} but there are {} pieces", piece,
                          flags_of_piece.size());
      for (int f : flags_of_piece[static_cast<std::size_t>(piece)]) {
        if (f < 0) return make_error("fused AG-GEMM: piece {} has flag {}", piece, f);
        if (std::find(flags.begin(), flags.end(), f) == flags.end()) flags.push_back(f);
      }
    }
    const auto begin = static_cast<std::int32_t>(out.waits.size());
    out.waits.insert(out.waits.end(), flags.begin(), flags.end());
    if (t.wait_count > 0 && key < begin_of.size()) {
      begin_of[key] = begin;
      count_of[key] = static_cast<std::int32_t>(flags.size());
    }
    t.wait_begin = begin;
    t.wait_count = static_cast<std::int32_t>(flags.size());
  }
  return out;
}

Result<RsTilePlan> rs_tile_plan(std::int64_t m, std::int64_t n, TileShape tile,
                                const std::vector<Piece>& pieces, int swizzle) {
  COMPASS_TRY(check_shape(m, n, tile, swizzle, "fused GEMM-RS tile plan"));
  COMPASS_TRY(check_cover(m, pieces, "fused GEMM-RS tile plan"));
  RsTilePlan plan;
  plan.tile = tile;
  plan.tiles_n = static_cast<int>((n + tile.n - 1) / tile.n);
  for (std::size_t pi = 0; pi < pieces.size(); ++pi) {
    const Piece& p = pieces[pi];
    std::vector<std::int64_t> ms;
    for (std::int64_t r = 0; r < p.rows; r += tile.m) ms.push_back(r);
    swizzled(ms, plan.tiles_n, swizzle, [&](std::int64_t r, int nt) {
      const std::int64_t rows = std::min<std::int64_t>(tile.m, p.rows - r);
      plan.tiles.push_back(
          RsTile{p.row + r, static_cast<std::int32_t>(rows), nt, static_cast<std::int32_t>(pi), 0});
    });
    plan.tiles_per_piece.push_back(static_cast<int>(ms.size()) * plan.tiles_n);
  }
  return plan;
}

namespace {

// The GEMM tasks of `rank`'s compute resource, in list (= execution) order.
Result<std::vector<const schedule::Task*>> rank_gemms(const schedule::Schedule& s, int rank,
                                                      const char* what) {
  if (rank < 0 || rank >= s.ranks())
    return make_error("{}: rank {} is not in 0..{}", what, rank, s.ranks() - 1);
  std::vector<const schedule::Task*> out;
  for (const schedule::Task& t : s.tasks)
    if (t.kind == schedule::TaskKind::gemm && t.resource.rank == rank) out.push_back(&t);
  if (out.empty()) return make_error("{}: rank {} runs no GEMM", what, rank);
  return out;
}

}  // namespace

Result<std::vector<Piece>> fused_ag_pieces(const schedule::Schedule& s, int rank) {
  const char* what = "fused AG-GEMM";
  if (s.op.kind != workload::OpKind::ag_gemm)
    return make_error("{}: the schedule's operator is not ag_gemm", what);
  COMPASS_ASSIGN(auto gemms, rank_gemms(s, rank, what));
  std::vector<Piece> pieces;
  for (const schedule::Task* t : gemms) {
    // The output rows of an AG-GEMM are global rows of the gathered input.
    Piece p{t->dst.row, t->dst.rows, t->chunk, {}};
    if (s.buffers.at(static_cast<std::size_t>(t->src.buffer)).role != schedule::BufferRole::input)
      for (int d : t->deps) {
        const schedule::Task& dep = s.tasks.at(static_cast<std::size_t>(d));
        const bool moves =
            dep.kind == schedule::TaskKind::transfer || dep.kind == schedule::TaskKind::copy;
        if (moves && dep.dst.buffer == t->src.buffer &&
            overlaps(dep.dst.row, dep.dst.rows, t->src.row, t->src.rows))
          p.producers.push_back(d);
      }
    pieces.push_back(std::move(p));
  }
  COMPASS_TRY(check_cover(s.op.m, pieces, what));
  return pieces;
}

Result<std::vector<Piece>> fused_rs_pieces(const schedule::Schedule& s, int rank) {
  const char* what = "fused GEMM-RS";
  if (s.op.kind == workload::OpKind::ag_gemm)
    return make_error("{}: the schedule's operator is ag_gemm", what);
  COMPASS_ASSIGN(auto gemms, rank_gemms(s, rank, what));
  std::vector<Piece> pieces;
  for (const schedule::Task* t : gemms) {
    // The A operand x is [M, K/p]: its rows are global rows of the output.
    if (s.buffers.at(static_cast<std::size_t>(t->src.buffer)).role != schedule::BufferRole::input)
      return make_error("{}: task {} ('{}') does not read the rank's input directly", what, t->id,
                        t->name);
    pieces.push_back(Piece{t->src.row, t->src.rows, t->chunk, {}});
  }
  COMPASS_TRY(check_cover(s.op.m, pieces, what));
  return pieces;
}

Result<std::vector<FusedGroup>> fused_groups(const schedule::Schedule& s) {
  std::vector<FusedGroup> out;
  for (int r = 0; r < s.ranks(); ++r) {
    std::vector<int> tasks;
    int group = -1;
    bool plain = false;
    for (const schedule::Task& t : s.tasks) {
      if (t.kind != schedule::TaskKind::gemm || t.resource.rank != r) continue;
      if (t.fused < 0) {
        plain = true;
        continue;
      }
      if (group >= 0 && t.fused != group)
        return make_error("fused GEMM: rank {} has GEMMs in groups {} and {}; one group per rank",
                          r, group, t.fused);
      group = t.fused;
      tasks.push_back(t.id);
    }
    if (group < 0) continue;
    if (plain)
      return make_error("fused GEMM: rank {} has GEMMs inside and outside fused group {}", r,
                        group);
    for (int id : tasks) {
      const schedule::Task& t = s.tasks[static_cast<std::size_t>(id)];
      const schedule::Buffer& a = s.buffers.at(static_cast<std::size_t>(t.src.buffer));
      const schedule::Buffer& c = s.buffers.at(static_cast<std::size_t>(t.dst.buffer));
      if (t.src.col != 0 || t.src.cols != a.cols || a.rows != s.op.m || t.dst.col != 0 ||
          t.dst.cols != c.cols || c.rows != s.op.m || t.src.row != t.dst.row)
        return make_error(
            "fused GEMM: task {} ('{}') of rank {} does not read whole rows of an "
            "M-row operand into the same rows of an M-row output",
            t.id, t.name, r);
    }
    COMPASS_ASSIGN(auto pieces, s.op.kind == workload::OpKind::ag_gemm ? fused_ag_pieces(s, r)
                                                                        : fused_rs_pieces(s, r));
    out.push_back(FusedGroup{r, group, std::move(tasks), std::move(pieces)});
  }
  return out;
}

Status check_fused_shapes(const schedule::Schedule& s, const std::vector<FusedGroup>& groups) {
  auto cols = [&](const schedule::Region& r) {
    return s.buffers.at(static_cast<std::size_t>(r.buffer)).cols;
  };
  for (const FusedGroup& g : groups)
    for (int id : g.tasks) {
      const schedule::Task& t = s.tasks.at(static_cast<std::size_t>(id));
      const std::pair<const char*, std::int64_t> dims[] = {
          {"K (the inner dimension)", t.src.cols}, {"the output width", t.dst.cols},
          {"A's row pitch", cols(t.src)},          {"B's row pitch", cols(t.b)},
          {"C's row pitch", cols(t.dst)}};
      for (const auto& [what, v] : dims)
        if (v % 8 != 0)
          return make_error("the fused kernels need {} of rank {}'s GEMMs to be a multiple of "
                            "8, got {}",
                            what, g.rank, v);
    }
  return Status::success();
}

Result<std::vector<int>> rs_store_tasks(const schedule::Schedule& s, const FusedGroup& g) {
  if (s.op.kind == workload::OpKind::ag_gemm)
    return make_error("fused GEMM-RS stores: the schedule's operator is ag_gemm");
  std::vector<int> out;
  for (int id : g.tasks) {
    const schedule::Task& gemm = s.tasks.at(static_cast<std::size_t>(id));
    if (gemm.chunk == g.rank) {
      out.push_back(-1);
      continue;
    }
    int found = -1;
    for (const schedule::Task& t : s.tasks)
      if (t.kind == schedule::TaskKind::transfer && t.src == gemm.dst &&
          s.owner(t.dst) == gemm.chunk) {
        if (found >= 0)
          return make_error("fused GEMM-RS of rank {}: the partial of task {} ('{}') is moved "
                            "by tasks {} and {}; the kernel stores it once",
                            g.rank, gemm.id, gemm.name, found, t.id);
        found = t.id;
      }
    if (found < 0)
      return make_error("fused GEMM-RS of rank {}: no transfer takes the partial of task {} "
                        "('{}') whole to rank {}",
                        g.rank, gemm.id, gemm.name, gemm.chunk);
    out.push_back(found);
  }
  return out;
}

Result<std::vector<RsSum>> rs_sums(const schedule::Schedule& s) {
  std::vector<RsSum> out;
  for (int r = 0; r < s.ranks(); ++r) {
    RsSum sum;
    sum.owner = r;
    for (const schedule::Task& t : s.tasks) {
      if (t.resource.rank != r || t.resource.kind != schedule::ResourceKind::compute) continue;
      const bool into_y = s.buffers.at(static_cast<std::size_t>(t.dst.buffer)).role ==
                          schedule::BufferRole::output;
      if (t.kind == schedule::TaskKind::copy && into_y) {
        if (!sum.tasks.empty())
          return make_error("GEMM-RS sum of rank {}: two copies into its output (tasks {} and {})",
                            r, sum.tasks.front(), t.id);
        sum.dst = t.dst;
      } else if (!(t.kind == schedule::TaskKind::add && !sum.tasks.empty() && t.dst == sum.dst)) {
        continue;
      }
      sum.tasks.push_back(t.id);
      sum.parts.push_back(t.src);
    }
    if (static_cast<int>(sum.parts.size()) != s.ranks())
      return make_error("GEMM-RS sum of rank {}: {} partials are summed into its output, not {}",
                        r, sum.parts.size(), s.ranks());
    out.push_back(std::move(sum));
  }
  return out;
}

std::uint32_t ag_flag_target(std::uint32_t epoch) {
  return epoch;
}

Result<std::uint32_t> rs_counter_target(std::uint32_t epoch, std::int64_t tiles_per_iteration) {
  if (tiles_per_iteration < 1)
    return make_error("GEMM-RS counter: {} tiles per iteration must be at least 1",
                      tiles_per_iteration);
  const std::uint64_t v =
      static_cast<std::uint64_t>(epoch) * static_cast<std::uint64_t>(tiles_per_iteration);
  if (tiles_per_iteration > std::numeric_limits<std::uint32_t>::max() ||
      v > std::numeric_limits<std::uint32_t>::max())
    return make_error("GEMM-RS counter: iteration {} x {} tiles does not fit in 32 bits", epoch,
                      tiles_per_iteration);
  return static_cast<std::uint32_t>(v);
}

Result<std::vector<int>> rs_tiles_per_chunk(const RsTilePlan& plan,
                                            const std::vector<Piece>& pieces, int ranks) {
  if (plan.tiles_per_piece.size() != pieces.size())
    return make_error("GEMM-RS tiles: the plan has {} pieces, the list {}",
                      plan.tiles_per_piece.size(), pieces.size());
  std::vector<int> out(static_cast<std::size_t>(std::max(ranks, 0)), 0);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const int c = pieces[i].chunk;
    if (c < 0 || c >= ranks)
      return make_error("GEMM-RS tiles: piece {} has chunk {} (ranks are 0..{})", i, c, ranks - 1);
    out[static_cast<std::size_t>(c)] += plan.tiles_per_piece[i];
  }
  return out;
}

Result<std::vector<ReductionStep>> rs_reduction_plan(const std::vector<std::vector<int>>& tiles,
                                                     std::uint32_t epoch) {
  const int ranks = static_cast<int>(tiles.size());
  if (ranks < 1) return make_error("GEMM-RS reduction: no ranks");
  std::vector<ReductionStep> plan;
  for (int j = 0; j < ranks; ++j) {
    std::int64_t total = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto& row = tiles[static_cast<std::size_t>(r)];
      if (static_cast<int>(row.size()) != ranks)
        return make_error("GEMM-RS reduction: rank {} has {} chunk tile counts for {} ranks", r,
                          row.size(), ranks);
      total += row[static_cast<std::size_t>(j)];
    }
    ReductionStep st;
    st.chunk = j;
    st.owner = j;
    st.rank_order.resize(static_cast<std::size_t>(ranks));
    std::iota(st.rank_order.begin(), st.rank_order.end(), 0);
    COMPASS_ASSIGN(st.counter_target, rs_counter_target(epoch, total));
    plan.push_back(std::move(st));
  }
  return plan;
}

}  // namespace compass::backends::cuda
