// The fused kernels' host-side bookkeeping (tile walks, pieces, flag and counter targets, the
// reduction order). Runs without a GPU.
#include "compass/backends/cuda/fused_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <utility>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cuda/fused.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cuda {
namespace {

using schedule::Strategy;
using schedule::StrategyKind;

std::vector<Piece> even_pieces(std::int64_t m, int p, std::vector<int> order) {
  std::vector<Piece> out;
  for (int c : order) {
    const std::int64_t a = m * c / p, b = m * (c + 1) / p;
    out.push_back(Piece{a, b - a, c, {}});
  }
  return out;
}

// Arrival position of the last piece a tile's rows need, from the pieces themselves.
std::size_t ready_of(const std::vector<Piece>& pieces, std::int64_t row0, std::int64_t rows) {
  std::size_t ready = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].row < row0 + rows && row0 < pieces[i].row + pieces[i].rows) ready = i;
  return ready;
}

// Every tile exactly once; tiles in non-decreasing arrival order; each tile waits for exactly
// the pieces its rows overlap.
void check_ag_plan(const AgTilePlan& plan, std::int64_t m, std::int64_t n,
                   const std::vector<Piece>& pieces) {
  ASSERT_EQ(plan.tiles_m, (m + plan.tile.m - 1) / plan.tile.m);
  ASSERT_EQ(plan.tiles_n, (n + plan.tile.n - 1) / plan.tile.n);
  ASSERT_EQ(plan.tiles.size(), static_cast<std::size_t>(plan.tiles_m) * plan.tiles_n);
  std::set<std::pair<int, int>> seen;
  std::size_t last_ready = 0;
  for (const AgTile& t : plan.tiles) {
    ASSERT_GE(t.m_tile, 0);
    ASSERT_LT(t.m_tile, plan.tiles_m);
    ASSERT_GE(t.n_tile, 0);
    ASSERT_LT(t.n_tile, plan.tiles_n);
    EXPECT_TRUE(seen.insert({t.m_tile, t.n_tile}).second) << "tile " << t.m_tile << "," << t.n_tile;
    const std::int64_t row0 = static_cast<std::int64_t>(t.m_tile) * plan.tile.m;
    const std::int64_t rows = std::min<std::int64_t>(plan.tile.m, m - row0);
    const std::size_t ready = ready_of(pieces, row0, rows);
    EXPECT_GE(ready, last_ready) << "tile " << t.m_tile << " comes before a tile it should follow";
    last_ready = ready;
    std::set<int> want, got;
    for (std::size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i].row < row0 + rows && row0 < pieces[i].row + pieces[i].rows)
        want.insert(static_cast<int>(i));
    ASSERT_LE(t.wait_begin + t.wait_count, static_cast<int>(plan.waits.size()));
    for (int w = t.wait_begin; w < t.wait_begin + t.wait_count; ++w) got.insert(plan.waits[w]);
    EXPECT_EQ(got, want) << "tile " << t.m_tile;
  }
}

TEST(FusedPlan, AgTilesFollowArrivalOrderOwnChunkFirst) {
  const std::int64_t m = 8 * 256, n = 640;
  const auto pieces = even_pieces(m, 8, {5, 4, 3, 2, 1, 0, 7, 6});  // rank 5's ring order
  auto plan = ag_tile_plan(m, n, {128, 128}, pieces, 1);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  check_ag_plan(*plan, m, n, pieces);
  // The first tiles are the own chunk's rows (chunk 5: rows 1280..1535, M tiles 10 and 11).
  for (int i = 0; i < 2 * plan->tiles_n; ++i) {
    EXPECT_GE(plan->tiles[i].m_tile, 10);
    EXPECT_LE(plan->tiles[i].m_tile, 11);
  }
  // The last ones belong to chunk 6.
  EXPECT_EQ(plan->tiles.back().m_tile / 2, 6);
}

TEST(FusedPlan, AgSwizzleSweepsBandsAlongN) {
  const std::int64_t m = 1024, n = 512;
  const auto pieces = even_pieces(m, 2, {0, 1});
  auto plan = ag_tile_plan(m, n, {128, 128}, pieces, 2);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  check_ag_plan(*plan, m, n, pieces);
  // Chunk 0 = M tiles 0..3: band {0,1} over N 0..3, then band {2,3}.
  const std::vector<std::pair<int, int>> want = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2},
                                                 {1, 2}, {0, 3}, {1, 3}, {2, 0}, {3, 0}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(plan->tiles[i].m_tile, want[i].first) << i;
    EXPECT_EQ(plan->tiles[i].n_tile, want[i].second) << i;
  }
}

TEST(FusedPlan, AgTileSpanningTwoChunksWaitsForBoth) {
  // 1000 rows in 3 chunks (333, 333, 334) with 128-row tiles: tile 2 (rows 256..383) spans
  // chunks 0 and 1, tile 5 (640..767) spans chunks 1 and 2; 1000 is no tile multiple either.
  const std::int64_t m = 1000, n = 200;
  const auto pieces = even_pieces(m, 3, {1, 2, 0});
  auto plan = ag_tile_plan(m, n, {128, 64}, pieces, 3);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  check_ag_plan(*plan, m, n, pieces);
  const auto first_of = [&](int mt) {
    for (std::size_t i = 0; i < plan->tiles.size(); ++i)
      if (plan->tiles[i].m_tile == mt) return plan->tiles[i];
    return AgTile{-1, -1, 0, 0};
  };
  EXPECT_EQ(first_of(2).wait_count, 2);
  EXPECT_EQ(first_of(5).wait_count, 2);
  // Chunk 0 arrives last, so tile 2 (needs it) comes after every tile of chunks 1 and 2 only.
  std::size_t pos2 = 0, pos3 = 0;
  for (std::size_t i = 0; i < plan->tiles.size(); ++i) {
    if (plan->tiles[i].m_tile == 2 && pos2 == 0) pos2 = i;
    if (plan->tiles[i].m_tile == 3 && pos3 == 0) pos3 = i;
  }
  EXPECT_GT(pos2, pos3);
}

TEST(FusedPlan, PiecesMustCoverRowsExactlyOnce) {
  std::vector<Piece> gap = {{0, 100, 0, {}}, {120, 100, 1, {}}};
  auto r = ag_tile_plan(220, 64, {128, 64}, gap, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("in no piece"), std::string::npos) << r.error().message;
  std::vector<Piece> overlap = {{0, 120, 0, {}}, {100, 120, 1, {}}};
  r = ag_tile_plan(220, 64, {128, 64}, overlap, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("in two pieces"), std::string::npos) << r.error().message;
  std::vector<Piece> short_cover = {{0, 100, 0, {}}};
  EXPECT_FALSE(ag_tile_plan(220, 64, {128, 64}, short_cover, 1).ok());
  EXPECT_FALSE(ag_tile_plan(100, 64, {128, 64}, short_cover, 0).ok());
  EXPECT_FALSE(ag_tile_plan(100, 64, {0, 64}, short_cover, 1).ok());
  EXPECT_FALSE(rs_tile_plan(220, 64, {128, 64}, gap, 1).ok());
}

workload::OperatorSpec op_of(workload::OpKind kind, std::int64_t m, int tp) {
  workload::OperatorSpec op;
  op.kind = kind;
  op.m = m;
  op.n = 256;
  op.k = 512;
  op.tp = tp;
  op.dtype = DType::bf16;
  return op;
}

schedule::Schedule make(workload::OpKind kind, StrategyKind sk, std::int64_t m, int tp,
                        schedule::CommPlan plan) {
  auto s = schedule::generate(op_of(kind, m, tp), Strategy{sk, 0}, plan);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

TEST(FusedPlan, AgPiecesFromRingScheduleFollowTheRing) {
  const int p = 4;
  schedule::CommPlan cp = schedule::default_comm_plan(p);
  cp.ring = {0, 2, 3, 1};  // a ring that is not rank order
  cp.ring2 = {1, 3, 2, 0};
  const auto s = make(workload::OpKind::ag_gemm, StrategyKind::fuse_ring, 1024, p, cp);
  for (int r = 0; r < p; ++r) {
    auto pieces = fused_ag_pieces(s, r);
    ASSERT_TRUE(pieces.ok()) << pieces.error().message;
    ASSERT_EQ(pieces->size(), static_cast<std::size_t>(p));
    const int pos =
        static_cast<int>(std::find(cp.ring.begin(), cp.ring.end(), r) - cp.ring.begin());
    for (int st = 0; st < p; ++st) {
      const Piece& pc = (*pieces)[st];
      const int want = cp.ring[((pos - st) % p + p) % p];
      EXPECT_EQ(pc.chunk, want) << "rank " << r << " step " << st;
      EXPECT_EQ(pc.row, 256 * want);
      EXPECT_EQ(pc.rows, 256);
      if (st == 0) {
        EXPECT_TRUE(pc.producers.empty());
        continue;
      }
      // Exactly one producer: the ring transfer that lands chunk `want` in this rank's xg.
      ASSERT_EQ(pc.producers.size(), 1u);
      const schedule::Task& t = s.tasks[pc.producers[0]];
      EXPECT_EQ(t.kind, schedule::TaskKind::transfer);
      EXPECT_EQ(s.owner(t.dst), r);
      EXPECT_EQ(t.dst.row, 256 * want);
    }
  }
}

TEST(FusedPlan, AgPiecesFromDoubleRingAndAll2All) {
  const int p = 4;
  const auto cp = schedule::default_comm_plan(p);
  // Double ring: own chunk whole, then two halves per step arriving on the two rings.
  const auto dr = make(workload::OpKind::ag_gemm, StrategyKind::fuse_double_ring, 1000, p, cp);
  for (int r = 0; r < p; ++r) {
    auto pieces = fused_ag_pieces(dr, r);
    ASSERT_TRUE(pieces.ok()) << pieces.error().message;
    ASSERT_EQ(pieces->size(), static_cast<std::size_t>(1 + 2 * (p - 1)));
    EXPECT_EQ((*pieces)[0].chunk, r);
    for (std::size_t i = 1; i < pieces->size(); ++i) {
      EXPECT_NE((*pieces)[i].chunk, r);
      ASSERT_EQ((*pieces)[i].producers.size(), 1u);
      const auto& t = dr.tasks[(*pieces)[i].producers[0]];
      EXPECT_EQ(t.channel, static_cast<int>((i - 1) % 2));
    }
    auto plan = ag_tile_plan(1000, 256, {128, 128}, *pieces, 2);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    check_ag_plan(*plan, 1000, 256, *pieces);
  }
  // All-to-all: own chunk, then r-1, r-2, ... (the order the pushes are consumed).
  const auto aa = make(workload::OpKind::ag_gemm, StrategyKind::fuse_all2all, 1024, p, cp);
  for (int r = 0; r < p; ++r) {
    auto pieces = fused_ag_pieces(aa, r);
    ASSERT_TRUE(pieces.ok()) << pieces.error().message;
    for (int k = 0; k < p; ++k) EXPECT_EQ((*pieces)[k].chunk, ((r - k) % p + p) % p);
  }
}

TEST(FusedPlan, PiecesRejectOtherOperatorsAndRanks) {
  const auto cp = schedule::default_comm_plan(2);
  const auto ag = make(workload::OpKind::ag_gemm, StrategyKind::fuse_ring, 256, 2, cp);
  const auto rs = make(workload::OpKind::gemm_rs, StrategyKind::fuse_ring, 256, 2, cp);
  EXPECT_FALSE(fused_ag_pieces(rs, 0).ok());
  EXPECT_FALSE(fused_rs_pieces(ag, 0).ok());
  EXPECT_FALSE(fused_ag_pieces(ag, 2).ok());
  EXPECT_FALSE(fused_rs_pieces(rs, -1).ok());
}

// Every output element of the rank exactly once; no tile crosses a piece; the piece order is
// the compute order. The sm90 kernel's epilogue, which knows only a tile's first row, finds
// the tile's piece, slot offset and row count from the pieces' first rows (rs_piece_of_row).
void check_rs_plan(const RsTilePlan& plan, std::int64_t m, std::int64_t n,
                   const std::vector<Piece>& pieces) {
  std::vector<int> hits(static_cast<std::size_t>(m * plan.tiles_n), 0);
  int last_piece = 0;
  std::vector<int> per_piece(pieces.size(), 0);
  std::vector<std::int64_t> piece_row;
  for (const Piece& pc : pieces) piece_row.push_back(pc.row);
  for (const RsTile& t : plan.tiles) {
    const RsRowPiece rp =
        rs_piece_of_row(piece_row.data(), static_cast<int>(piece_row.size()), t.row, m);
    EXPECT_EQ(rp.piece, t.chunk) << "row " << t.row;
    EXPECT_EQ(rp.start, pieces[t.chunk].row) << "row " << t.row;
    EXPECT_EQ(std::min<std::int64_t>(plan.tile.m, rp.end - t.row), t.rows) << "row " << t.row;
    ASSERT_GE(t.chunk, last_piece);
    last_piece = t.chunk;
    const Piece& pc = pieces[t.chunk];
    EXPECT_GE(t.row, pc.row);
    EXPECT_LE(t.row + t.rows, pc.row + pc.rows);
    EXPECT_GE(t.rows, 1);
    EXPECT_LE(t.rows, plan.tile.m);
    for (std::int64_t r = t.row; r < t.row + t.rows; ++r) ++hits[r * plan.tiles_n + t.n_tile];
    ++per_piece[t.chunk];
  }
  EXPECT_EQ(plan.tiles_n, (n + plan.tile.n - 1) / plan.tile.n);
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_EQ(per_piece, plan.tiles_per_piece);
}

TEST(FusedPlan, RsTilesFollowComputeOrderPeerChunksFirst) {
  const int p = 4;
  const auto cp = schedule::default_comm_plan(p);
  for (auto sk :
       {StrategyKind::fuse_ring, StrategyKind::fuse_all2all, StrategyKind::fuse_double_ring}) {
    for (std::int64_t m : {1024, 1000}) {
      if (m % p != 0 && sk != StrategyKind::fuse_ring) continue;
      const auto s = make(workload::OpKind::gemm_rs, sk, m, p, cp);
      std::vector<std::vector<int>> tiles;
      for (int r = 0; r < p; ++r) {
        SCOPED_TRACE(schedule::to_string(Strategy{sk, 0}) + " m " + std::to_string(m) + " rank " +
                     std::to_string(r));
        auto pieces = fused_rs_pieces(s, r);
        ASSERT_TRUE(pieces.ok()) << pieces.error().message;
        // The own chunk is computed last: every peer's chunk is needed before it.
        EXPECT_EQ(pieces->back().chunk, r);
        if (sk == StrategyKind::fuse_ring) {
          EXPECT_EQ(pieces->front().chunk, (r + p - 1) % p);
        }
        // The sm90 kernel's tile (128 x 256) on odd ranks, the sm80 one (128 x 128) on even
        // ones: the counter targets add what each rank really stores (mixed GPUs).
        const TileShape tile = r % 2 ? TileShape{128, 256} : TileShape{128, 128};
        auto plan = rs_tile_plan(m, 512, tile, *pieces, 2);
        ASSERT_TRUE(plan.ok()) << plan.error().message;
        check_rs_plan(*plan, m, 512, *pieces);
        auto per_chunk = rs_tiles_per_chunk(*plan, *pieces, p);
        ASSERT_TRUE(per_chunk.ok()) << per_chunk.error().message;
        int sum = 0;
        for (int v : *per_chunk) sum += v;
        EXPECT_EQ(sum, static_cast<int>(plan->tiles.size()));
        for (int j = 0; j < p; ++j) {
          int want = 0;
          for (const RsTile& t : plan->tiles) want += (*pieces)[t.chunk].chunk == j;
          EXPECT_EQ((*per_chunk)[j], want) << "chunk " << j;
        }
        tiles.push_back(*per_chunk);
      }
      auto red = rs_reduction_plan(tiles, 3);
      ASSERT_TRUE(red.ok()) << red.error().message;
      ASSERT_EQ(red->size(), static_cast<std::size_t>(p));
      for (int j = 0; j < p; ++j) {
        const ReductionStep& st = (*red)[j];
        EXPECT_EQ(st.owner, j);
        EXPECT_EQ(st.rank_order, (std::vector<int>{0, 1, 2, 3}));
        std::uint32_t total = 0;
        for (int r = 0; r < p; ++r) total += static_cast<std::uint32_t>(tiles[r][j]);
        EXPECT_EQ(st.counter_target, 3 * total);
      }
    }
  }
}

TEST(FusedPlan, DoubleRingOwnerTilesItsChunkDifferently) {
  // 4 x 300 rows: peers compute chunk j as halves 150 + 150 (2 + 2 M tiles of 128), the owner
  // computes it whole (3 M tiles): the counter target sums what each rank really stores.
  const int p = 4;
  const auto s = make(workload::OpKind::gemm_rs, StrategyKind::fuse_double_ring, 1200, p,
                      schedule::default_comm_plan(p));
  std::vector<std::vector<int>> tiles;
  for (int r = 0; r < p; ++r) {
    auto pieces = fused_rs_pieces(s, r);
    ASSERT_TRUE(pieces.ok());
    auto plan = rs_tile_plan(1200, 128, {128, 128}, *pieces, 1);
    ASSERT_TRUE(plan.ok());
    tiles.push_back(*rs_tiles_per_chunk(*plan, *pieces, p));
  }
  EXPECT_EQ(tiles[0][0], 3);
  EXPECT_EQ(tiles[1][0], 4);
  auto red = rs_reduction_plan(tiles, 1);
  ASSERT_TRUE(red.ok());
  EXPECT_EQ((*red)[0].counter_target, 3u + 4u + 4u + 4u);
}

TEST(FusedPlan, FlagAndCounterTargets) {
  EXPECT_EQ(ag_flag_target(1), 1u);
  EXPECT_EQ(ag_flag_target(7), 7u);
  auto t = rs_counter_target(5, 96);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 480u);
  EXPECT_FALSE(rs_counter_target(1u << 20, 1 << 13).ok());  // 2^33: does not fit
  EXPECT_FALSE(rs_counter_target(1, 0).ok());
  EXPECT_FALSE(rs_reduction_plan({{1, 1}, {1}}, 1).ok());
  EXPECT_FALSE(rs_reduction_plan({}, 1).ok());
}

}  // namespace
}  // namespace compass::backends::cuda

namespace compass::backends::cuda {
namespace {

TEST(FusedRequest, ChecksNeedNoGpu) {
  FusedCheckOptions o;
  EXPECT_TRUE(check_fused_request(o).ok());
  auto bad = o;
  bad.n = 100;  // not a multiple of 8
  EXPECT_FALSE(check_fused_request(bad).ok());
  bad = o;
  bad.order = {0, 1, 2, 3, 4, 5, 6, 6};
  auto st = check_fused_request(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("each chunk 0..7 once"), std::string::npos);
  auto rs = o;
  rs.kind = workload::OpKind::gemm_rs;
  for (const char* kernel : {"auto", "sm90", "sm80"}) {
    rs.kernel = kernel;
    EXPECT_TRUE(check_fused_request(rs).ok()) << kernel;
  }
  rs.release = FusedRelease::never;  // the last owner's timed wait for a missing tile
  EXPECT_TRUE(check_fused_request(rs).ok());
  bad = rs;
  bad.release = FusedRelease::late_scrambled;
  EXPECT_FALSE(check_fused_request(bad).ok());
  bad = o;
  bad.kind = workload::OpKind::gemm_rs;
  bad.k = 4100;  // not divisible by 8 ranks
  EXPECT_FALSE(check_fused_request(bad).ok());
  bad = o;
  bad.kernel = "sm70";
  EXPECT_FALSE(check_fused_request(bad).ok());
  bad = o;
  bad.dtype = DType::fp32;
  EXPECT_FALSE(check_fused_request(bad).ok());
  bad = o;
  bad.timeout_s = 0;
  EXPECT_FALSE(check_fused_request(bad).ok());
  // Copies beside the kernel: only for an AG-GEMM whose flags are preset.
  auto beside = o;
  beside.beside_copies = true;
  EXPECT_TRUE(check_fused_request(beside).ok());
  beside.release = FusedRelease::late_scrambled;
  EXPECT_FALSE(check_fused_request(beside).ok());
  beside = o;
  beside.beside_copies = true;
  beside.kind = workload::OpKind::gemm_rs;
  auto st2 = check_fused_request(beside);
  ASSERT_FALSE(st2.ok());
  EXPECT_NE(st2.error().message.find("beside_copies"), std::string::npos);
}

// One choice for both kinds: sm90 on sm_90 GPUs when built, else sm80 from compute
// capability 8.0; explicit requests that cannot run say why.
TEST(FusedRequest, KernelChoice) {
  FusedKernelTarget h100{true, true, 90, "NVIDIA H100", "sm_90"};
  FusedKernelTarget a100{true, true, 80, "NVIDIA A100", "sm_80"};
  const auto pick = [](std::string_view requested, const FusedKernelTarget& t) {
    auto k = fused_kernel_for(requested, t);
    return k.ok() ? *k : k.error().message;
  };
  EXPECT_EQ(pick("auto", h100), "sm90");
  EXPECT_EQ(pick("sm80", h100), "sm80");
  EXPECT_EQ(pick("auto", a100), "sm80");
  auto no90 = h100;
  no90.sm90_built = false;  // falls back to the CUTLASS 2.x kernel
  EXPECT_EQ(pick("auto", no90), "sm80");
  auto r = fused_kernel_for("sm90", no90);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "the sm90 fused kernel was not built");
  r = fused_kernel_for("sm90", a100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "the sm90 fused kernel needs an sm_90 GPU; this is NVIDIA A100 sm_80");
  r = fused_kernel_for("auto", FusedKernelTarget{true, true, 75, "Tesla T4", "sm_75"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("compute capability 8.0 or newer; Tesla T4 is sm_75"),
            std::string::npos);
  r = fused_kernel_for("auto", FusedKernelTarget{false, false, 90, "NVIDIA H100", "sm_90"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("were not built"), std::string::npos);
}

// The sm90 epilogue's piece lookup from the pieces' first rows (any order).
TEST(FusedPlan, RsPieceOfRowFromFirstRows) {
  const std::vector<std::int64_t> rows = {500, 0, 250, 750};  // compute order, 1000 rows
  const auto at = [&](std::int64_t row) { return rs_piece_of_row(rows.data(), 4, row, 1000); };
  EXPECT_EQ(at(0).piece, 1);
  EXPECT_EQ(at(0).end, 250);
  EXPECT_EQ(at(249).piece, 1);
  EXPECT_EQ(at(250).piece, 2);
  EXPECT_EQ(at(378).start, 250);
  EXPECT_EQ(at(378).end, 500);
  EXPECT_EQ(at(999).piece, 3);
  EXPECT_EQ(at(999).end, 1000);
}

TEST(FusedRequest, FaultMessageNamesRankChunkAndFlag) {
  FusedFault f;
  f.code = kFaultFlagTimeout;
  f.rank = 5;
  f.flag = 2;
  f.tile = 40;
  f.observed = 6;
  f.wanted = 7;
  const std::string m = fused_fault_message(f, "fused AG-GEMM", 0.5, 3);
  EXPECT_NE(m.find("rank 5 waited more than 0.5 s for chunk 3 (flag 2, tile 40"), std::string::npos)
      << m;
  EXPECT_NE(m.find("the flag is 6, the kernel needs at least 7"), std::string::npos) << m;
  f.tile = -1;  // a GEMM-RS owner's sum on its chunk counter
  const std::string sum = fused_fault_message(f, "GEMM-RS ordered sum", 0.5, 2);
  EXPECT_NE(sum.find("GEMM-RS ordered sum: rank 5 waited more than 0.5 s for chunk 2 (its tile "
                     "counter, flag 2): the counter is 6, the sum needs at least 7"),
            std::string::npos)
      << sum;
  f.code = 0;
  EXPECT_NE(fused_fault_message(f, "x", 1, 0).find("without recording a fault"), std::string::npos);
}

TEST(FusedRequest, WithoutGpuTheCheckSaysSo) {
  if (device_available().ok()) GTEST_SKIP() << "a GPU is present";
  auto r = fused_check(FusedCheckOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no CUDA device found");
}

}  // namespace
}  // namespace compass::backends::cuda

namespace compass::backends::cuda {
namespace {

TEST(FusedPlan, WaitListsBecomeFlagLists) {
  const std::int64_t m = 1000, n = 256;
  const auto pieces = even_pieces(m, 3, {1, 2, 0});
  auto plan = ag_tile_plan(m, n, {128, 128}, pieces, 2);
  ASSERT_TRUE(plan.ok());
  // Piece 0 (chunk 1) is local; piece 1 has flags 7 and 9; piece 2 has flag 4.
  auto flagged = ag_plan_with_flags(*plan, {{}, {7, 9}, {4}});
  ASSERT_TRUE(flagged.ok()) << flagged.error().message;
  ASSERT_EQ(flagged->tiles.size(), plan->tiles.size());
  for (std::size_t i = 0; i < plan->tiles.size(); ++i) {
    const AgTile& a = plan->tiles[i];
    const AgTile& b = flagged->tiles[i];
    EXPECT_EQ(a.m_tile, b.m_tile);
    EXPECT_EQ(a.n_tile, b.n_tile);
    std::set<int> want;
    for (int w = a.wait_begin; w < a.wait_begin + a.wait_count; ++w) {
      if (plan->waits[w] == 1) want.insert({7, 9});
      if (plan->waits[w] == 2) want.insert(4);
    }
    std::set<int> got(flagged->waits.begin() + b.wait_begin,
                      flagged->waits.begin() + b.wait_begin + b.wait_count);
    EXPECT_EQ(got, want) << "tile " << i;
    EXPECT_EQ(static_cast<std::size_t>(b.wait_count), got.size()) << "duplicates in tile " << i;
  }
  EXPECT_FALSE(ag_plan_with_flags(*plan, {{}, {7}}).ok());
  EXPECT_FALSE(ag_plan_with_flags(*plan, {{}, {-1}, {}}).ok());
}

}  // namespace
}  // namespace compass::backends::cuda

namespace compass::backends::cuda {
namespace {

TEST(FusedPlan, GroupsOfGeneratedSchedules) {
  const int p = 4;
  const auto cp = schedule::default_comm_plan(p);
  for (auto sk :
       {StrategyKind::fuse_ring, StrategyKind::fuse_all2all, StrategyKind::fuse_double_ring}) {
    auto s = schedule::generate(op_of(workload::OpKind::ag_gemm, 1024, p), Strategy{sk, 0}, cp,
                                schedule::GenerateOptions{true});
    ASSERT_TRUE(s.ok());
    auto groups = fused_groups(*s);
    ASSERT_TRUE(groups.ok()) << groups.error().message;
    ASSERT_EQ(groups->size(), static_cast<std::size_t>(p));
    for (const FusedGroup& g : *groups) {
      EXPECT_EQ(g.pieces.front().chunk, g.rank);
      // The own chunk comes from the copy on the rank's compute resource; the rest from
      // transfers on copy engines.
      ASSERT_EQ(g.pieces.front().producers.size(), 1u);
      EXPECT_EQ(s->tasks[g.pieces.front().producers[0]].kind, schedule::TaskKind::copy);
      for (std::size_t i = 1; i < g.pieces.size(); ++i) {
        ASSERT_FALSE(g.pieces[i].producers.empty());
        for (int t : g.pieces[i].producers)
          EXPECT_EQ(s->tasks[t].resource.kind, schedule::ResourceKind::copy_engine);
      }
    }
    // Without groups there is nothing to fuse.
    auto plain = schedule::generate(op_of(workload::OpKind::ag_gemm, 1024, p), Strategy{sk, 0}, cp);
    ASSERT_TRUE(plain.ok());
    EXPECT_TRUE(fused_groups(*plain)->empty());
    // A rank with two groups is refused.
    schedule::Schedule bad = *s;
    for (auto& t : bad.tasks)
      if (t.kind == schedule::TaskKind::gemm && t.resource.rank == 2 && t.chunk == 0) t.fused = 1;
    auto r = fused_groups(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("rank 2 has GEMMs in groups"), std::string::npos)
        << r.error().message;
  }
}

// A GEMM-RS group whose partial is not moved to its owner (or moved twice) is refused.
TEST(FusedPlan, RsStoresNeedOneTransferPerPeerPiece) {
  const int p = 4;
  auto s = schedule::generate(op_of(workload::OpKind::gemm_rs, 96, p),
                              Strategy{StrategyKind::fuse_ring, 0}, schedule::default_comm_plan(p),
                              schedule::GenerateOptions{true});
  ASSERT_TRUE(s.ok());
  auto groups = fused_groups(*s);
  ASSERT_TRUE(groups.ok());
  schedule::Schedule none = *s;
  for (auto& t : none.tasks)
    if (t.kind == schedule::TaskKind::transfer && none.owner(t.src) == 1) t.src.row += 1;
  auto r = rs_store_tasks(none, (*groups)[1]);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no transfer takes the partial"), std::string::npos)
      << r.error().message;
  auto ag = schedule::generate(op_of(workload::OpKind::ag_gemm, 96, p),
                               Strategy{StrategyKind::fuse_ring, 0},
                               schedule::default_comm_plan(p), schedule::GenerateOptions{true});
  ASSERT_TRUE(ag.ok());
  EXPECT_FALSE(rs_store_tasks(*ag, (*fused_groups(*ag))[0]).ok());
}

// GEMM-RS / GEMM-AR groups: one per rank, pieces in the schedule's compute order (the own
// chunk last), no producers (the rank's input), and every chunk's tile counts add up to the
// counter targets of the ordered reduction.
TEST(FusedPlan, RsGroupsOfGeneratedSchedules) {
  const int p = 4;
  const auto cp = schedule::default_comm_plan(p);
  for (auto kind : {workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
    for (auto sk :
         {StrategyKind::fuse_ring, StrategyKind::fuse_all2all, StrategyKind::fuse_double_ring}) {
      auto s = schedule::generate(op_of(kind, 1024, p), Strategy{sk, 0}, cp,
                                  schedule::GenerateOptions{true});
      ASSERT_TRUE(s.ok());
      auto groups = fused_groups(*s);
      ASSERT_TRUE(groups.ok()) << groups.error().message;
      ASSERT_EQ(groups->size(), static_cast<std::size_t>(p));
      std::vector<std::vector<int>> tiles;
      for (const FusedGroup& g : *groups) {
        EXPECT_EQ(g.pieces.back().chunk, g.rank);
        for (const Piece& piece : g.pieces) EXPECT_TRUE(piece.producers.empty());
        for (TileShape tile : {TileShape{128, 256}, TileShape{128, 128}}) {  // sm90, sm80
          auto plan = rs_tile_plan(s->op.m, s->op.n, tile, g.pieces, 4);
          ASSERT_TRUE(plan.ok()) << plan.error().message;
          check_rs_plan(*plan, s->op.m, s->op.n, g.pieces);
          auto per_chunk = rs_tiles_per_chunk(*plan, g.pieces, p);
          ASSERT_TRUE(per_chunk.ok());
          if (tile.n == 128) tiles.push_back(*per_chunk);
        }
      }
      // The kernel stores every peer chunk where the transfer it replaces would have put it:
      // the owner's recv slot for this rank.
      for (const FusedGroup& g : *groups) {
        auto stores = rs_store_tasks(*s, g);
        ASSERT_TRUE(stores.ok()) << stores.error().message;
        ASSERT_EQ(stores->size(), g.tasks.size());
        for (std::size_t i = 0; i < g.tasks.size(); ++i) {
          const auto& gemm = s->tasks[static_cast<std::size_t>(g.tasks[i])];
          if (gemm.chunk == g.rank) {
            EXPECT_EQ((*stores)[i], -1);
            continue;
          }
          ASSERT_GE((*stores)[i], 0);
          const auto& t = s->tasks[static_cast<std::size_t>((*stores)[i])];
          EXPECT_EQ(t.kind, schedule::TaskKind::transfer);
          EXPECT_EQ(t.src, gemm.dst);
          EXPECT_EQ(s->owner(t.dst), gemm.chunk);
          EXPECT_EQ(s->buffers[static_cast<std::size_t>(t.dst.buffer)].name, "recv");
        }
      }
      // Each owner sums its chunk from slot 0, 1, ..., p-1 (its own partial from part).
      auto sums = rs_sums(*s);
      ASSERT_TRUE(sums.ok()) << sums.error().message;
      ASSERT_EQ(sums->size(), static_cast<std::size_t>(p));
      for (const RsSum& sum : *sums) {
        ASSERT_EQ(sum.parts.size(), static_cast<std::size_t>(p));
        EXPECT_EQ(s->tasks[static_cast<std::size_t>(sum.tasks.front())].kind,
                  schedule::TaskKind::copy);
        for (int i = 0; i < p; ++i) {
          const schedule::Region& part = sum.parts[static_cast<std::size_t>(i)];
          EXPECT_EQ(s->owner(part), sum.owner);
          EXPECT_EQ(s->buffers[static_cast<std::size_t>(part.buffer)].name,
                    i == sum.owner ? "part" : "recv");
          if (i != sum.owner) {
            EXPECT_EQ(part.row, i * (1024 / p));
          }
        }
      }
      auto red = rs_reduction_plan(tiles, 1);
      ASSERT_TRUE(red.ok()) << red.error().message;
      for (const ReductionStep& st : *red) EXPECT_GT(st.counter_target, 0u);
    }
}

}  // namespace
}  // namespace compass::backends::cuda
