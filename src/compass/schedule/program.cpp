// The fused strategies' programs (program.hpp): one description of each pattern, which the
// model prices and follows and the tests hold the generated schedules to.

#include "compass/schedule/program.hpp"

#include <algorithm>

#include "compass/schedule/comm_order.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::schedule {

using workload::OpKind;
using Item = Program::Item;
using Send = Program::Send;

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The ranks around one or two rings (plan.ring, and plan.ring2 or the reverse of the first),
// the rows each lane moves per step (a block of `rows`, halved on the double ring) and the
// engine each lane's transfers queue on, as the generator issues them (generate.cpp).
class RingLanes {
 public:
  RingLanes(const CommPlan& plan, int p, bool double_ring, std::int64_t rows)
      : p_(p),
        lanes_(double_ring ? 2 : 1),
        // With one copy engine both lanes queue on it (lane 0's transfer, then lane 1's, per
        // step).
        shared_(double_ring && std::max(1, plan.copy_engines) < 2) {
    rows_[0] = double_ring ? ceil_div(rows, 2) : rows;
    rows_[1] = rows - rows_[0];
    std::vector<int> ring2 = plan.ring2;
    if (ring2.empty()) ring2.assign(plan.ring.rbegin(), plan.ring.rend());
    for (int h = 0; h < lanes_; ++h) {
      pos_[h] = ring_positions(h == 0 ? plan.ring : ring2);
      rank_at_[h].assign(p_, 0);
      for (int q = 0; q < p_; ++q) rank_at_[h][pos_[h][q]] = q;
    }
  }
  int lanes() const { return lanes_; }
  // The copy engine lane h's transfers are issued on (the second ring's on engine 1 when there
  // are two).
  int engine(int h) const { return h == 1 && !shared_ ? 1 : 0; }
  std::int64_t rows(int h) const { return rows_[h]; }
  // Lane h's rows of a block of `len` rows (the double ring's halves, generate.cpp half_rows).
  std::int64_t rows_of(int h, std::int64_t len) const {
    if (lanes_ == 1) return len;
    return h == 0 ? ceil_div(len, 2) : len - ceil_div(len, 2);
  }
  // The rank `back` places before q on ring h.
  int before(int h, int q, int back) const {
    return rank_at_[h][((pos_[h][q] - back) % p_ + p_) % p_];
  }
  // The rank after and before q on ring h.
  int next(int h, int q) const { return rank_at_[h][(pos_[h][q] + 1) % p_]; }
  int prev(int h, int q) const { return rank_at_[h][(pos_[h][q] + p_ - 1) % p_]; }
  // Transfer (k, h, q) of a phase whose transfers start at index `base`: rank q's on lane h at
  // step k, numbered in the generator's order (step, rank, lane).
  int id(int base, int k, int h, int q) const { return base + (k * p_ + q) * lanes_ + h; }
  // The transfer before (k, h, q) on its copy engine: the phase's previous one, or at k = 0
  // `before` (the lane's last transfer of an earlier phase on the same engine, -1: none).
  int after(int base, int k, int h, int q, int before_base, int before_k) const {
    auto earlier = [&](int hh) {
      if (k > 0) return id(base, k - 1, hh, q);
      return before_base >= 0 ? id(before_base, before_k, hh, q) : -1;
    };
    if (!shared_) return earlier(h);
    return h == 1 ? id(base, k, 0, q) : earlier(1);
  }

 private:
  int p_, lanes_;
  bool shared_;
  std::int64_t rows_[2] = {0, 0};
  std::vector<int> pos_[2], rank_at_[2];  // rank -> position on ring h, and back
};

// Ring all-gather fused with the GEMM: at step k the rank at ring position P forwards the
// shard (half) of ring[P - k] to its successor once it landed and its copy engine is free, and
// computes its own shard first, then per step the rows that landed.
Program ag_ring(const workload::OperatorSpec& op, const CommPlan& plan, bool double_ring,
                ProgramLayout* layout) {
  const int p = op.tp;
  const std::int64_t shard_rows = workload::shard_rows(op);
  const RingLanes ring(plan, p, double_ring, shard_rows);
  Program pr;
  pr.items.resize(p);
  for (int q = 0; q < p; ++q) {
    pr.items[q].push_back({false, shard_rows, -1});
    for (int k = 1; k < p; ++k)
      for (int h = 0; h < ring.lanes(); ++h)
        pr.items[q].push_back({false, ring.rows(h), ring.id(0, k - 1, h, ring.prev(h, q))});
  }
  for (int k = 0; k + 1 < p; ++k)
    for (int q = 0; q < p; ++q)
      for (int h = 0; h < ring.lanes(); ++h)
        pr.sends.push_back({q, ring.next(h, q), ring.after(0, k, h, q, -1, 0), -1,
                            k > 0 ? ring.id(0, k - 1, h, ring.prev(h, q)) : -1, ring.rows(h)});
  if (layout == nullptr) return pr;
  // At step k rank q computes, and forwards, the shard (half) of the rank k before it; per step
  // and rank the generator emits the transfers, then the GEMMs.
  layout->items.assign(p, {});
  layout->sends.assign(pr.sends.size(), {});
  for (int q = 0; q < p; ++q) {
    layout->items[q].push_back({q, 0, -1});
    for (int k = 1; k < p; ++k)
      for (int h = 0; h < ring.lanes(); ++h) layout->items[q].push_back({ring.before(h, q, k), k, h});
  }
  for (int k = 0; k < p; ++k)
    for (int q = 0; q < p; ++q) {
      for (int h = 0; h < ring.lanes() && k + 1 < p; ++h) {
        const int f = ring.id(0, k, h, q);
        layout->sends[f] = {ring.before(h, q, k), k, h, ring.engine(h)};
        layout->order.push_back({-1, f});
      }
      if (k == 0) layout->order.push_back({q, 0});
      for (int h = 0; h < ring.lanes() && k > 0; ++h)
        layout->order.push_back({q, 1 + (k - 1) * ring.lanes() + h});
    }
  return pr;
}

// All-to-all all-gather: rank r pushes its shard to r+k on copy engine (k-1) mod engines (one
// push after another per engine), computes its own shard, then the shard of r-k for
// k = 1..p-1, each when it landed.
Program ag_all2all(const workload::OperatorSpec& op, const CommPlan& plan, ProgramLayout* layout) {
  const int p = op.tp;
  const int engines = std::max(1, plan.copy_engines);
  const std::int64_t shard_rows = workload::shard_rows(op);
  Program pr;
  std::vector<int> flow_to(static_cast<std::size_t>(p * p), -1);
  for (int r = 0; r < p; ++r) {
    std::vector<int> last_on_engine(static_cast<std::size_t>(engines), -1);
    for (int k = 1; k < p; ++k) {
      const int to = all2all_peer(r, k, p);
      int& last = last_on_engine[all2all_engine(k, engines)];
      pr.sends.push_back({r, to, last, -1, -1, shard_rows});
      last = flow_to[r * p + to] = static_cast<int>(pr.sends.size()) - 1;
    }
  }
  pr.items.resize(p);
  for (int r = 0; r < p; ++r) {
    pr.items[r].push_back({false, shard_rows, -1});
    for (int k = 1; k < p; ++k)
      pr.items[r].push_back({false, shard_rows, flow_to[all2all_source(r, k, p) * p + r]});
  }
  if (layout == nullptr) return pr;
  // Every push first (rank by rank), then every rank's GEMMs.
  layout->items.assign(p, {});
  for (int r = 0; r < p; ++r)
    for (int k = 1; k < p; ++k) {
      layout->order.push_back({-1, static_cast<int>(layout->sends.size())});
      layout->sends.push_back({r, k - 1, -1, all2all_engine(k, engines)});
    }
  for (int r = 0; r < p; ++r)
    for (int k = 0; k < p; ++k) {
      layout->items[r].push_back({k == 0 ? r : all2all_source(r, k, p), k, -1});
      layout->order.push_back({r, k});
    }
  return pr;
}

// Ring reduce-scatter fused with the GEMM (one ring, or a double ring with half of every chunk
// on each ring): at step k the rank at ring position P computes the partial of the chunk owned
// by ring[P - k - 1], adds the running sum that arrived, and forwards it; at the last step the
// chunk is its own. Compute-stream order per step: (GEMM, add) per ring; the last step computes
// the whole own chunk, then adds both arrivals. GEMM-AR: the all-gather follows in the same
// pattern, each rank forwarding chunk half h on ring h as soon as its own chunk's half is
// reduced (k = 0) or the half arrived (k > 0), behind its reduce-scatter transfers on the same
// copy engine.
Program rs_ring(const workload::OperatorSpec& op, const CommPlan& plan, bool double_ring,
                ProgramLayout* layout) {
  const int p = op.tp;
  const RingLanes ring(plan, p, double_ring, workload::max_row_share(op));
  const int lanes = ring.lanes();
  const bool ar = op.kind == OpKind::gemm_ar && p > 1;
  const int steps = p - 1;
  const int ag_base = steps * lanes * p;  // the all-gather's first transfer
  // Lane h's rows of chunk j (chunks are unequal when p does not divide M, gemm_ar only).
  auto rows = [&](int h, int j) { return ring.rows_of(h, workload::row_share(op, j).len); };
  Program pr;
  pr.items.resize(p);
  pr.sends.resize(static_cast<std::size_t>((ar ? 2 : 1) * ag_base));
  // The layout: per step and rank, in the generator's order (each lane's GEMM, add and
  // transfer; the last step's GEMM of the own chunk, then its adds), the all-gather after.
  std::vector<std::vector<std::vector<ProgramLayout::Ref>>> at_step;  // [k][q]
  if (layout != nullptr) {
    layout->items.assign(p, {});
    layout->sends.assign(pr.sends.size(), {});
    at_step.assign(p, std::vector<std::vector<ProgramLayout::Ref>>(p));
  }
  auto place_item = [&](int q, int k, ProgramLayout::Tag tag) {
    if (layout == nullptr) return;
    layout->items[q].push_back(tag);
    at_step[k][q].push_back({q, static_cast<int>(layout->items[q].size()) - 1});
  };
  for (int q = 0; q < p; ++q) {
    std::vector<Item>& items = pr.items[q];
    for (int k = 0; k < p; ++k) {
      const bool last = k + 1 == p;
      if (last) {
        items.push_back({false, workload::row_share(op, q).len, -1});
        place_item(q, k, {q, k, -1});
      }
      for (int h = 0; h < lanes; ++h) {
        const int j = ring.before(h, q, k + 1);  // the chunk q computes at step k
        if (!last) {
          items.push_back({false, rows(h, j), -1});
          place_item(q, k, {j, k, h});
        }
        if (k >= 1) {
          items.push_back({true, rows(h, j), ring.id(0, k - 1, h, ring.prev(h, q))});
          place_item(q, k, {j, k, h});
        }
        const int ready = static_cast<int>(items.size()) - 1;
        if (!last) {
          const int f = ring.id(0, k, h, q);
          pr.sends[f] = {q, ring.next(h, q), ring.after(0, k, h, q, -1, 0), ready, -1, rows(h, j)};
          if (layout != nullptr) {
            layout->sends[f] = {j, k, h, ring.engine(h)};
            at_step[k][q].push_back({-1, f});
          }
        } else if (ar) {
          pr.sends[ring.id(ag_base, 0, h, q)] = {
              q,  ring.next(h, q), ring.after(ag_base, 0, h, q, 0, steps - 1), ready,
              -1, rows(h, q)};
        }
      }
    }
    if (ar)
      for (int k = 1; k < steps; ++k)
        for (int h = 0; h < lanes; ++h)
          pr.sends[ring.id(ag_base, k, h, q)] = {q,
                                                 ring.next(h, q),
                                                 ring.after(ag_base, k, h, q, 0, steps - 1),
                                                 -1,
                                                 ring.id(ag_base, k - 1, h, ring.prev(h, q)),
                                                 rows(h, ring.before(h, q, k))};
  }
  if (layout == nullptr) return pr;
  for (int k = 0; k < p; ++k)
    for (int q = 0; q < p; ++q)
      layout->order.insert(layout->order.end(), at_step[k][q].begin(), at_step[k][q].end());
  // The all-gather: at step k rank q forwards the reduced chunk (half) of the rank k before it,
  // straight into the output rows; transfers numbered (step, rank, lane) as emitted.
  for (int k = 0; ar && k < steps; ++k)
    for (int q = 0; q < p; ++q)
      for (int h = 0; h < lanes; ++h) {
        const int f = ring.id(ag_base, k, h, q);
        layout->sends[f] = {ring.before(h, q, k), k, h, ring.engine(h), true};
        layout->order.push_back({-1, f});
      }
  return pr;
}

// All-to-all reduce-scatter: rank r computes the partials of chunks r+1, ..., r+p-1 (pushing
// each to its owner when done, on copy engine (k-1) mod engines, one push after another per
// engine) and then its own; after its GEMMs it adds the p-1 received partials in the order
// r-1, r-2, ... as they land. GEMM-AR: then it pushes its reduced chunk to every peer in the
// same pattern, behind its reduce-scatter pushes.
Program rs_all2all(const workload::OperatorSpec& op, const CommPlan& plan, ProgramLayout* layout) {
  const int p = op.tp;
  const int engines = std::max(1, plan.copy_engines);
  const bool ar = op.kind == OpKind::gemm_ar && p > 1;
  // Chunk j's rows (unequal when p does not divide M, gemm_ar only).
  auto rows = [&](int j) { return workload::row_share(op, j).len; };
  Program pr;
  pr.items.resize(p);
  std::vector<int> flow_to(static_cast<std::size_t>(p * p), -1);
  std::vector<std::vector<int>> last_on_engine(
      p, std::vector<int>(static_cast<std::size_t>(engines), -1));
  auto push = [&](int r, int k, int ready_item, std::int64_t n) {
    const int to = all2all_peer(r, k, p);
    int& last = last_on_engine[r][all2all_engine(k, engines)];
    pr.sends.push_back({r, to, last, ready_item, -1, n});
    last = static_cast<int>(pr.sends.size()) - 1;
    return last;
  };
  for (int r = 0; r < p; ++r)
    for (int k = 1; k < p; ++k) {
      const int j = all2all_peer(r, k, p);
      pr.items[r].push_back({false, rows(j), -1});
      flow_to[r * p + j] = push(r, k, static_cast<int>(pr.items[r].size()) - 1, rows(j));
    }
  for (int r = 0; r < p; ++r) {
    pr.items[r].push_back({false, rows(r), -1});
    for (int k = 1; k < p; ++k)
      pr.items[r].push_back({true, rows(r), flow_to[all2all_source(r, k, p) * p + r]});
    if (ar)
      for (int k = 1; k < p; ++k) push(r, k, static_cast<int>(pr.items[r].size()) - 1, rows(r));
  }
  if (layout == nullptr) return pr;
  // Rank by rank its partials and pushes, then its own chunk's GEMM; then every rank's adds;
  // then (gemm_ar) every rank's pushes of its reduced chunk. Items of rank r: the partial of
  // r + k at k - 1, its own chunk at p - 1, the add from r - k at p - 1 + k.
  layout->items.assign(p, {});
  layout->sends.resize(pr.sends.size());
  const int rs_sends = p * (p - 1);
  for (int r = 0; r < p; ++r) {
    for (int k = 1; k < p; ++k) {
      const int f = r * (p - 1) + k - 1;
      layout->items[r].push_back({all2all_peer(r, k, p), k - 1, -1});
      layout->sends[f] = {all2all_peer(r, k, p), k - 1, -1, all2all_engine(k, engines)};
      layout->order.push_back({r, k - 1});
      layout->order.push_back({-1, f});
    }
    layout->items[r].push_back({r, p - 1, -1});
    layout->order.push_back({r, p - 1});
    for (int k = 1; k < p; ++k) layout->items[r].push_back({r, k - 1, -1});
  }
  for (int r = 0; r < p; ++r)
    for (int k = 1; k < p; ++k) layout->order.push_back({r, p - 1 + k});
  for (int r = 0; ar && r < p; ++r)
    for (int k = 1; k < p; ++k) {
      const int f = rs_sends + r * (p - 1) + k - 1;
      layout->sends[f] = {r, k - 1, -1, all2all_engine(k, engines), true};
      layout->order.push_back({-1, f});
    }
  return pr;
}

// Flat tables over (rank, owner, piece) for the tree program's bookkeeping.
class PieceTable {
 public:
  PieceTable(int p, std::size_t pieces) : p_(p), pieces_(pieces), v_(p * p * pieces, -1) {}
  int& at(int rank, int owner, int piece) {
    return v_[(static_cast<std::size_t>(rank) * p_ + owner) * pieces_ + piece];
  }

 private:
  int p_;
  std::size_t pieces_;
  std::vector<int> v_;
};

}  // namespace

// In the generator's order (patterns.cpp): the same rounds, pieces, engines and compute order.
Program tree_program(const workload::OperatorSpec& op, const TreePlan& tp, const CommPlan& plan,
                     const TreeRsCosts& rs_costs) {
  const int p = op.tp;
  const bool ag = op.kind == OpKind::ag_gemm;
  const double row_bytes = program_row_bytes(op);
  const std::int64_t rows_per_root = ag ? workload::shard_rows(op) : workload::max_row_share(op);
  const int chunks = tree_chunks(tp, static_cast<double>(rows_per_root) * row_bytes);
  const std::vector<TreeShape> sh = tree_shapes(tp, p);
  std::vector<std::vector<TreePiece>> pieces(p);
  for (int j = 0; j < p; ++j)
    pieces[j] =
        tree_pieces(tp, j, ag ? workload::shard_rows(op) : workload::row_share(op, j).len, chunks);
  std::size_t max_pieces = 1;
  for (const auto& pc : pieces) max_pieces = std::max(max_pieces, pc.size());
  Program pr;
  pr.items.resize(p);
  std::vector<int> last_on_engine;  // [engine * p + rank] -> its last transfer (-1: none)
  auto push_send = [&](Send sd, int engine) {
    const std::size_t at = static_cast<std::size_t>(engine) * p + sd.from;
    if (at >= last_on_engine.size()) last_on_engine.resize(at + 1, -1);
    sd.after = last_on_engine[at];
    last_on_engine[at] = static_cast<int>(pr.sends.size());
    pr.sends.push_back(sd);
    return static_cast<int>(pr.sends.size()) - 1;
  };
  auto push_item = [&](int v, Item it) {
    pr.items[v].push_back(it);
    return static_cast<int>(pr.items[v].size()) - 1;
  };
  PieceTable last_item(p, max_pieces);  // (rank, owner, piece) -> item
  // The all-gather down the trees in tree_allgather_program's order; `root_items`: a root's
  // send waits for the root's item completing the piece; with `gemms`, every rank computes
  // each piece where it arrives.
  auto allgather = [&](bool gemms, bool root_items) {
    PieceTable into(p, max_pieces);  // (rank, owner, piece) -> transfer
    for (const TreeAgStep& st :
         tree_allgather_program(tp, sh, pieces, row_bytes, plan.copy_engines)) {
      const int a = st.from, b = st.to, j = st.owner, pi = st.piece;
      const std::int64_t len = pieces[j][static_cast<std::size_t>(pi)].len;
      if (st.arrival) {
        if (gemms) push_item(b, Item{false, len, into.at(b, j, pi)});
        continue;
      }
      Send sd{a, b, -1, -1, -1, len};
      if (a != j)
        sd.dep_flow = into.at(a, j, pi);
      else if (root_items)
        sd.ready_item = last_item.at(j, j, pi);
      into.at(b, j, pi) = push_send(sd, st.engine);
    }
  };
  if (!ag && p == 1) {  // one GEMM, nothing to reduce (the generator's single task)
    push_item(0, Item{false, op.m, -1});
    return pr;
  }
  if (ag) {
    for (int r = 0; r < p; ++r) push_item(r, Item{false, workload::shard_rows(op), -1});
    allgather(true, false);
    return pr;
  }
  // Reduce-scatter up the trees, in tree_reduce_scatter_program's order.
  const std::vector<int> up = tree_engine_table(tp, p, plan.copy_engines, true);
  PieceTable sent(p, max_pieces);  // (sender, owner, piece) -> transfer
  for (const TreeRsStep& st : tree_reduce_scatter_program(
           tp, sh, pieces, row_bytes, rs_costs, plan.copy_engines)) {
    const TreePiece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
    const int v = st.rank, j = st.owner, pi = st.piece;
    switch (st.kind) {
      case TreeRsStep::Kind::gemm:
        last_item.at(v, j, pi) = push_item(v, Item{false, pc.len, -1});
        break;
      case TreeRsStep::Kind::add:
        last_item.at(v, j, pi) = push_item(v, Item{true, pc.len, sent.at(st.peer, j, pi)});
        break;
      case TreeRsStep::Kind::send:
        sent.at(v, j, pi) = push_send(Send{v, st.peer, -1, last_item.at(v, j, pi), -1, pc.len},
                                      up[v * p + st.peer]);
        break;
    }
  }
  // gemm_ar: the reduced pieces go down the same trees, after every reduce-scatter transfer in
  // program order.
  if (op.kind == OpKind::gemm_ar) allgather(false, true);
  return pr;
}

bool has_program(StrategyKind kind) {
  return is_fused(kind);
}

double program_row_bytes(const workload::OperatorSpec& op) {
  return (op.kind == OpKind::ag_gemm ? op.k : op.n) * dtype_bytes(op.dtype);
}

Program program(const workload::OperatorSpec& op, const Strategy& strategy, const CommPlan& plan,
                const TreeRsCosts& rs_costs) {
  COMPASS_CHECK(has_program(strategy.kind), "program: {} has no program", to_string(strategy));
  const bool ag = op.kind == OpKind::ag_gemm;
  switch (strategy.kind) {
    case StrategyKind::fuse_ring:
    case StrategyKind::fuse_double_ring: {
      const bool dr = strategy.kind == StrategyKind::fuse_double_ring;
      return ag ? ag_ring(op, plan, dr, nullptr) : rs_ring(op, plan, dr, nullptr);
    }
    case StrategyKind::fuse_all2all:
      return ag ? ag_all2all(op, plan, nullptr) : rs_all2all(op, plan, nullptr);
    case StrategyKind::fuse_hier:
      return tree_program(op, plan.hier, plan, rs_costs);
    case StrategyKind::fuse_synth:
      return tree_program(op, plan.synth, plan, rs_costs);
    case StrategyKind::sequential:
    case StrategyKind::decompose:
      break;
  }
  return {};
}

LaidOutProgram laid_out_program(const workload::OperatorSpec& op, const Strategy& strategy,
                                const CommPlan& plan) {
  const bool ag = op.kind == OpKind::ag_gemm;
  LaidOutProgram out;
  switch (strategy.kind) {
    case StrategyKind::fuse_ring:
    case StrategyKind::fuse_double_ring: {
      const bool dr = strategy.kind == StrategyKind::fuse_double_ring;
      out.program = ag ? ag_ring(op, plan, dr, &out.layout) : rs_ring(op, plan, dr, &out.layout);
      break;
    }
    case StrategyKind::fuse_all2all:
      out.program = ag ? ag_all2all(op, plan, &out.layout) : rs_all2all(op, plan, &out.layout);
      break;
    default:
      COMPASS_CHECK(false, "laid_out_program: {} is not lowered from a laid-out program",
                    to_string(strategy));
  }
  return out;
}

Result<Program> program_of(const Schedule& s) {
  const int p = s.ranks();
  const std::size_t n = s.tasks.size();
  const std::int64_t width = s.op.kind == OpKind::ag_gemm ? s.op.k : s.op.n;
  // Where each task went: an item (rank, index) or a send (index).
  std::vector<int> item_of(n, -1), send_of(n, -1);
  std::vector<std::vector<int>> item_task(static_cast<std::size_t>(p));
  std::vector<int> send_task;
  std::vector<int> last_on_lane;  // [rank * engines + engine] -> its last send (-1: none)
  Program pr;
  pr.items.resize(static_cast<std::size_t>(p));
  for (const Task& t : s.tasks) {
    const int v = t.resource.rank;
    if (t.kind == TaskKind::transfer) {
      if (t.src.cols != width || t.dst.cols != width)
        return make_error("{} moves {} of {} columns: not a program's transfer", task_label(t),
                          t.src.cols, width);
      const std::size_t lane = static_cast<std::size_t>(v) * s.copy_engines + t.resource.index;
      if (lane >= last_on_lane.size()) last_on_lane.resize(lane + 1, -1);
      send_of[t.id] = static_cast<int>(pr.sends.size());
      pr.sends.push_back(Send{v, s.owner(t.dst), last_on_lane[lane], -1, -1, t.src.rows});
      last_on_lane[lane] = send_of[t.id];
      send_task.push_back(t.id);
    } else if ((t.kind == TaskKind::gemm && in_fused_kernel(t)) || t.kind == TaskKind::add) {
      item_of[t.id] = static_cast<int>(pr.items[v].size());
      pr.items[v].push_back(
          Item{t.kind == TaskKind::add, t.kind == TaskKind::add ? t.src.rows : t.dst.rows, -1});
      item_task[v].push_back(t.id);
    } else {
      return make_error("{} is not a step of a fused program", task_label(t));
    }
  }
  // The program's waits: what wrote the data a task reads (its sender's latest item, or the
  // transfer that brought it; for an item, the transfer into its rank). Every other dependency
  // must follow from them and the orders.
  auto feeds = [&](const Task& writer, const Task& reader) {
    const Region& w = writer.dst;
    const Region& r = reader.src;
    return w.buffer == r.buffer && w.row < r.row + r.rows && r.row < w.row + w.rows;
  };
  std::vector<std::pair<int, int>> implied;  // (dependency, task)
  for (const Task& t : s.tasks) {
    const int v = t.resource.rank;
    for (int d : t.deps) {
      const Task& dt = s.tasks[static_cast<std::size_t>(d)];
      bool taken = false;
      if (feeds(dt, t)) {
        if (send_of[t.id] >= 0) {
          Send& sd = pr.sends[send_of[t.id]];
          if (item_of[d] >= 0 && dt.resource.rank == v && item_of[d] > sd.ready_item) {
            if (sd.ready_item >= 0) implied.emplace_back(item_task[v][sd.ready_item], t.id);
            sd.ready_item = item_of[d];
            taken = true;
          } else if (send_of[d] >= 0 && pr.sends[send_of[d]].to == v && sd.dep_flow < 0) {
            sd.dep_flow = send_of[d];
            taken = true;
          }
        } else if (send_of[d] >= 0 && pr.sends[send_of[d]].to == v) {
          Item& it = pr.items[v][item_of[t.id]];
          if (it.flow_in < 0) {
            it.flow_in = send_of[d];
            taken = true;
          }
        }
      }
      if (!taken) implied.emplace_back(d, t.id);
    }
  }
  // Whether task `from` must end before task `to` starts under the program: a walk back from
  // `to` over the program's edges (each from an earlier task to a later one).
  std::vector<int> seen(n, -1);
  std::vector<int> stack;
  int walk = 0;
  auto before = [&](int from, int to) {
    ++walk;
    auto preds = [&](int t, auto&& visit) {
      if (send_of[t] >= 0) {
        const Send& sd = pr.sends[send_of[t]];
        if (sd.after >= 0) visit(send_task[sd.after]);
        if (sd.dep_flow >= 0) visit(send_task[sd.dep_flow]);
        if (sd.ready_item >= 0) visit(item_task[sd.from][sd.ready_item]);
      } else {
        const int v = s.tasks[static_cast<std::size_t>(t)].resource.rank;
        const int i = item_of[t];
        if (i > 0) visit(item_task[v][i - 1]);
        if (pr.items[v][i].flow_in >= 0) visit(send_task[pr.items[v][i].flow_in]);
      }
    };
    stack.assign(1, to);
    while (!stack.empty()) {
      const int t = stack.back();
      stack.pop_back();
      bool found = false;
      preds(t, [&](int u) {
        if (u == from) found = true;
        if (u > from && seen[u] != walk) {
          seen[u] = walk;
          stack.push_back(u);
        }
      });
      if (found) return true;
    }
    return false;
  };
  for (auto [d, t] : implied)
    if (!before(d, t))
      return make_error("{} waits for {}, which the program's orders do not imply",
                        task_label(s.tasks[static_cast<std::size_t>(t)]),
                        task_label(s.tasks[static_cast<std::size_t>(d)]));
  return pr;
}

}  // namespace compass::schedule
