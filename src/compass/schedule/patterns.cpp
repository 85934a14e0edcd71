// Tree-pattern schedules: every shard (ag_gemm) or chunk (gemm_rs/gemm_ar) is cut into pieces,
// one per (tree, pipeline chunk); pieces travel down their tree (all-gather) or up it
// (reduce-scatter, partial sums added at every forwarding rank). Transfers are emitted in
// pipeline rounds: piece chunk k crosses an edge whose far end is at depth d in round k + d - 1
// (all-gather), or leaves a rank at depth d in round k + (height - d) (reduce-scatter), so every
// copy engine meets its transfers in the order their data becomes ready.


#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "compass/schedule/patterns.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/schedule/comm_order.hpp"
#include "compass/schedule/tree_graph.hpp"

namespace compass::schedule {

using detail::Builder;
using detail::declare_operands;
using detail::Rows;
using detail::split_rows;
using workload::OpKind;

namespace detail {
namespace {

// One piece: rows [rows.off, +len) of the root's shard/chunk, carried by tree `tree` as
// pipeline chunk `chunk`.
struct Piece {
  int tree = 0;
  int chunk = 0;
  Rows rows;
};

std::vector<Piece> pieces_of(const TreePlan& plan, int root, std::int64_t len, int chunks) {
  std::vector<Piece> out;
  for (const TreePiece& t : tree_pieces(plan, root, len, chunks))
    out.push_back(Piece{t.tree, t.chunk, Rows{t.off, t.len}});
  return out;
}

// The same pieces as schedule::TreePiece, the form the programs take.
std::vector<std::vector<TreePiece>> as_tree_pieces(const std::vector<std::vector<Piece>>& pieces) {
  std::vector<std::vector<TreePiece>> out(pieces.size());
  for (std::size_t o = 0; o < pieces.size(); ++o)
    for (const Piece& pc : pieces[o])
      out[o].push_back(TreePiece{pc.tree, pc.chunk, pc.rows.off, pc.rows.len});
  return out;
}

struct Graph {
  Builder& b;
  const workload::OperatorSpec& op;
  const TreePlan& plan;
  int p;
  int chunks;
  std::vector<TreeShape> shapes;
  int engines;
  double row_bytes;
  std::map<std::pair<int, int>, int> eng_up;  // (child, parent): reduce-scatter sends
  TreeRsCosts rs_costs;                       // the reduce-scatter's compute order

  Rows chunk_rows(int j) const { return workload::row_share(op, j); }
};

// All-gather of each root's rows: `src(root, rows_in_shard)` on the root, `dst(rank, root,
// rows_in_shard)` everywhere; `on_arrival(rank, root, piece, round)` where the piece's arrival
// comes in tree_allgather_program's order.
template <class Src, class Dst, class Arrive>
void tree_allgather_rounds(Graph& g, const std::vector<std::vector<Piece>>& pieces, const Src& src,
                           const Dst& dst, const Arrive& on_arrival, const char* tag) {
  for (const TreeAgStep& e : tree_allgather_program(g.plan, g.shapes, as_tree_pieces(pieces),
                                                    g.row_bytes, g.engines)) {
    const Piece& pc = pieces[e.owner][static_cast<std::size_t>(e.piece)];
    if (e.arrival) {
      on_arrival(e.to, e.owner, pc, e.round);
      continue;
    }
    Region s = e.from == e.owner ? src(e.owner, pc.rows) : dst(e.from, e.owner, pc.rows);
    g.b.transfer(s, dst(e.to, e.owner, pc.rows), e.engine, pc.tree, e.round, e.owner,
                 fmt::format("r{} {} s{} c{} t{} k{} ->r{}", e.from, tag, e.round, e.owner,
                             pc.tree, pc.chunk, e.to));
  }
}

void ag_graph(Graph& g, bool gemms) {
  const int p = g.p;
  const std::int64_t shard = workload::shard_rows(g.op);
  for (int r = 0; r < p; ++r) {
    declare_operands(g.b, g.op, r, /*input_only=*/!gemms);
    if (p > 1) g.b.buffer(r, "xg", g.op.m, g.op.k, BufferRole::scratch);
  }
  if (gemms)
    for (int r = 0; r < p; ++r)
      g.b.gemm(r, g.b.whole(r, "x"), g.b.whole(r, "w"), g.b.rows(r, "y", g.chunk_rows(r)), 0, r,
               fmt::format("r{} gemm own c{}", r, r));
  if (p == 1) return;
  std::vector<std::vector<Piece>> pieces(p);
  for (int o = 0; o < p; ++o) pieces[o] = pieces_of(g.plan, o, shard, g.chunks);
  auto global = [&](int o, Rows r) { return Rows{o * shard + r.off, r.len}; };
  tree_allgather_rounds(
      g, pieces, [&](int o, Rows r) { return g.b.rows(o, "x", r); },
      [&](int rank, int o, Rows r) { return g.b.rows(rank, "xg", global(o, r)); },
      [&](int r, int o, const Piece& pc, int rho) {
        if (!gemms) return;
        g.b.gemm(r, g.b.rows(r, "xg", global(o, pc.rows)), g.b.whole(r, "w"),
                 g.b.rows(r, "y", global(o, pc.rows)), rho + 1, o,
                 fmt::format("r{} gemm s{} c{} t{} k{}", r, rho + 1, o, pc.tree, pc.chunk));
      },
      "ag");
}

void rs_graph(Graph& g) {
  const int p = g.p;
  const bool ar = g.op.kind == OpKind::gemm_ar;
  std::vector<std::vector<Piece>> pieces(p);
  for (int j = 0; j < p; ++j) pieces[j] = pieces_of(g.plan, j, g.chunk_rows(j).len, g.chunks);
  // Receive slots: one per (receiving rank, owner, piece, child), rows allocated in order.
  std::map<std::tuple<int, int, int, int, int>, Rows> slot;  // (rank, owner, tree, chunk, child)
  std::vector<std::int64_t> recv_rows(p, 0);
  for (int j = 0; j < p; ++j)
    for (const Piece& pc : pieces[j]) {
      const TreeShape& sh = g.shapes[pc.tree];
      for (int v = 0; v < p; ++v)
        for (int u : sh.children.of(static_cast<std::size_t>(v))) {
          slot[{v, j, pc.tree, pc.chunk, u}] = Rows{recv_rows[v], pc.rows.len};
          recv_rows[v] += pc.rows.len;
        }
    }
  for (int r = 0; r < p; ++r) {
    declare_operands(g.b, g.op, r);
    if (p > 1 && !ar) g.b.buffer(r, "part", g.op.m, g.op.n, BufferRole::scratch);
    if (p > 1 && recv_rows[r] > 0) g.b.buffer(r, "recv", recv_rows[r], g.op.n, BufferRole::scratch);
  }
  auto global = [&](int j, Rows r) { return Rows{g.chunk_rows(j).off + r.off, r.len}; };
  // Where rank v keeps its running sum of owner j's rows `r` (the owner: its output).
  auto sum_at = [&](int v, int j, Rows r) {
    if (v == j) return g.b.rows(v, "y", ar ? global(j, r) : r);
    return g.b.rows(v, ar ? "y" : "part", global(j, r));
  };
  for (const TreeRsStep& st :
       tree_reduce_scatter_program(g.plan, g.shapes, as_tree_pieces(pieces), g.row_bytes,
                                   g.rs_costs, g.engines)) {
    const Piece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
    const int v = st.rank, j = st.owner, rho = st.round;
    switch (st.kind) {
      case TreeRsStep::Kind::gemm:
        g.b.gemm(v, g.b.rows(v, "x", global(j, pc.rows)), g.b.whole(v, "w"), sum_at(v, j, pc.rows),
                 rho, j, fmt::format("r{} gemm s{} c{} t{} k{}", v, rho, j, pc.tree, pc.chunk));
        break;
      case TreeRsStep::Kind::add:
        g.b.add(v, g.b.rows(v, "recv", slot.at({v, j, pc.tree, pc.chunk, st.peer})),
                sum_at(v, j, pc.rows), rho, j,
                fmt::format("r{} add s{} c{} t{} k{} from r{}", v, rho, j, pc.tree, pc.chunk,
                            st.peer));
        break;
      case TreeRsStep::Kind::send:
        g.b.transfer(sum_at(v, j, pc.rows),
                     g.b.rows(st.peer, "recv", slot.at({st.peer, j, pc.tree, pc.chunk, v})),
                     g.eng_up.at({v, st.peer}), pc.tree, rho, j,
                     fmt::format("r{} rs s{} c{} t{} k{} ->r{}", v, rho, j, pc.tree, pc.chunk,
                                 st.peer));
        break;
    }
  }
  if (!ar) return;
  // gemm_ar: the reduced chunks go down the same trees.
  tree_allgather_rounds(
      g, pieces, [&](int j, Rows r) { return g.b.rows(j, "y", global(j, r)); },
      [&](int rank, int j, Rows r) { return g.b.rows(rank, "y", global(j, r)); },
      [](int, int, const Piece&, int) {}, "ag");
}

}  // namespace

void tree_pattern_graph(Builder& b, const workload::OperatorSpec& op, const TreePlan& plan,
                        int engines, const TreeRsCosts& rs_costs, bool gemms) {
  const int p = op.tp;
  const double cols = op.kind == OpKind::ag_gemm ? op.k : op.n;
  const double shard_bytes =
      static_cast<double>(workload::max_row_share(op)) * cols * dtype_bytes(op.dtype);
  Graph g{b,
          op,
          plan,
          p,
          tree_chunks(plan, shard_bytes),
          tree_shapes(plan, p),
          engines,
          cols * dtype_bytes(op.dtype),
          tree_engines(plan, engines, true),
          rs_costs};
  if (op.kind == OpKind::ag_gemm) {
    ag_graph(g, gemms);
  } else if (p == 1) {
    declare_operands(b, op, 0);
    b.gemm(0, b.whole(0, "x"), b.whole(0, "w"), b.whole(0, "y"), 0, 0, "r0 gemm");
  } else {
    rs_graph(g);
  }
}

}  // namespace detail

Result<Schedule> tree_allgather(const TreePlan& plan, const std::vector<int>& gpus,
                                int copy_engines, std::int64_t shard_rows, std::int64_t cols) {
  const int p = static_cast<int>(gpus.size());
  if (p < 2) return make_error("tree all-gather: needs at least 2 ranks, got {}", p);
  if (shard_rows < 1 || cols < 1)
    return make_error("tree all-gather: shards of {} x {} are empty", shard_rows, cols);
  if (copy_engines < 1) return make_error("tree all-gather: copy_engines must be at least 1");
  COMPASS_TRY(validate_tree_plan(plan, p));
  workload::OperatorSpec op{OpKind::ag_gemm, shard_rows * p, p, cols, p, DType::bf16, ""};
  Builder b(op, Strategy{StrategyKind::fuse_synth, 0}, gpus);
  detail::tree_pattern_graph(b, op, plan, copy_engines, TreeRsCosts{}, /*gemms=*/false);
  Schedule s = std::move(b).finish();
  COMPASS_TRY(validate(s));
  return s;
}

}  // namespace compass::schedule
