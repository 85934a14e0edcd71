// The generators: one per strategy, for each operator kind. docs/schedule.md describes the
// graphs in words; the tests in tests/schedule check their dataflow symbolically.

#include "compass/schedule/generate.hpp"
#include "compass/schedule/limits.hpp"

#include <algorithm>

#include "compass/schedule/builder.hpp"
#include "compass/schedule/collective_program.hpp"
#include "compass/schedule/comm_order.hpp"
#include "compass/schedule/patterns.hpp"
#include "compass/schedule/program.hpp"
#include "compass/schedule/tree_graph.hpp"

namespace compass::schedule {

using detail::Builder;
using detail::declare_operands;
using detail::half_rows;
using detail::Rows;
using detail::split_rows;
using workload::OpKind;

CommPlan default_comm_plan(int p) {
  CommPlan plan;
  for (int i = 0; i < p; ++i) {
    plan.gpus.push_back(i);
    plan.ring.push_back(i);
  }
  plan.ring2.assign(plan.ring.rbegin(), plan.ring.rend());
  plan.copy_engines = 2;
  plan.hier = direct_tree_plan(p);
  plan.synth = direct_tree_plan(p);
  return plan;
}

namespace {

int mod(int a, int p) {
  return ((a % p) + p) % p;
}

// A ring as rank order plus each rank's position in it.
struct RingView {
  std::vector<int> order;
  std::vector<int> pos;
  int size() const { return static_cast<int>(order.size()); }
  int at(int position) const { return order[static_cast<std::size_t>(mod(position, size()))]; }
  int pos_of(int rank) const { return pos[static_cast<std::size_t>(rank)]; }
  int succ(int rank) const { return at(pos_of(rank) + 1); }
};

Result<RingView> ring_view(const std::vector<int>& order, int p, const char* what) {
  if (static_cast<int>(order.size()) != p)
    return make_error("comm plan: {} has {} ranks but the operator has tp = {}", what, order.size(),
                      p);
  RingView v{order, std::vector<int>(static_cast<std::size_t>(p), -1)};
  for (int i = 0; i < p; ++i) {
    int r = order[static_cast<std::size_t>(i)];
    if (r < 0 || r >= p)
      return make_error("comm plan: {} names rank {} (ranks are 0..{})", what, r, p - 1);
    if (v.pos[static_cast<std::size_t>(r)] != -1)
      return make_error("comm plan: {} lists rank {} twice", what, r);
    v.pos[static_cast<std::size_t>(r)] = i;
  }
  return v;
}

// Everything a generator needs about the operator and the plan.
struct Ctx {
  const workload::OperatorSpec& op;
  int p;
  RingView ring;   // plan.ring
  int engines;     // copy engines available
  bool fused;      // fused GEMM groups (GenerateOptions::fused_gemm on a fusion that has them)

  // Rows of the chunk owned by rank j along M (near-equal split; equal when p | M).
  Rows chunk(int j) const { return workload::row_share(op, j); }
  std::int64_t max_chunk() const { return workload::max_row_share(op); }
};

Rows shift(Rows r, std::int64_t by) {
  return Rows{r.off + by, r.len};
}

// ---------------------------------------------------------------------------------------------
// ag_gemm

void declare_ag(Builder& b, const Ctx& c, bool gathered) {
  const auto& op = c.op;
  for (int r = 0; r < c.p; ++r) {
    declare_operands(b, op, r);
    if (gathered && c.p > 1) b.buffer(r, "xg", op.m, op.k, BufferRole::scratch);
  }
}

// sequential and decompose:d: the lowering of their program (schedule::collective_program).
// Parts are row sub-blocks i of every shard; the gathered input and (when d > 1) the GEMM
// output are stored part-major so each part is one contiguous GEMM.
void ag_collectives(Builder& b, const Ctx& c, const CollectiveProgram& pr, int d) {
  using Role = CollectiveProgram::Role;
  const int p = c.p;
  const std::int64_t shard = workload::shard_rows(c.op);
  const std::int64_t q = shard / d;
  const bool staged = d > 1 && p > 1;
  declare_ag(b, c, true);
  if (staged)
    for (int r = 0; r < p; ++r) b.buffer(r, "ys", c.op.m, c.op.n / p, BufferRole::scratch);
  auto pm = [&](int i, int j) { return Rows{(static_cast<std::int64_t>(i) * p + j) * q, q}; };
  for (const CollectiveProgram::Step& st : pr.steps) {
    const int r = st.rank, i = st.part;
    switch (st.role) {
      case Role::copy_own:
        b.copy(Resource{r, ResourceKind::copy_engine, 0}, b.rows(r, "x", Rows{i * q, q}),
               b.rows(r, "xg", pm(i, r)), 0, i, fmt::format("r{} copy own p{}", r, i));
        break;
      case Role::send: {
        const int o = st.chunk, to = c.ring.succ(r), s = st.ring_step;
        const Region src = s == 0 ? b.rows(r, "x", Rows{i * q, q}) : b.rows(r, "xg", pm(i, o));
        b.transfer(src, b.rows(to, "xg", pm(i, o)), 0, 0, s, i,
                   fmt::format("r{} ag p{} s{} c{} ring0 ->r{}", r, i, s, o, to));
        break;
      }
      case Role::gemm: {
        const Rows part{i * st.rows, st.rows};
        Region a = p > 1 ? b.rows(r, "xg", part) : b.rows(r, "x", part);
        Region out = staged ? b.rows(r, "ys", part) : b.rows(r, "y", part);
        b.gemm(r, a, b.whole(r, "w"), out, 0, i, fmt::format("r{} gemm p{}", r, i));
        break;
      }
      case Role::copy_out:
        for (int j = 0; j < st.copies; ++j)
          b.copy(Resource{r, ResourceKind::compute, 0}, b.rows(r, "ys", pm(i, j)),
                 b.rows(r, "y", Rows{j * shard + i * q, q}), 0, i,
                 fmt::format("r{} copy out p{} c{}", r, i, j));
        break;
      default:
        COMPASS_CHECK(false, "ag_collectives: an AG-GEMM program has no {} step",
                      static_cast<int>(st.role));
    }
  }
}

// With fused GEMM groups every GEMM of a rank reads the gathered input: the rank's own chunk
// is copied there first, on its compute resource (ahead of the fused kernel in stream order).
void ag_copy_own(Builder& b, const Ctx& c, int r) {
  if (c.fused)
    b.copy(Resource{r, ResourceKind::compute, 0}, b.whole(r, "x"), b.rows(r, "xg", c.chunk(r)), 0,
           r, fmt::format("r{} copy own c{}", r, r));
}

// The A operand of rank r's GEMM of chunk o: its input for the own chunk (unless fused),
// else rows of the gathered input.
Region ag_operand(Builder& b, const Ctx& c, int r, int o, Rows rows_in_chunk) {
  if (o == r && !c.fused) return b.rows(r, "x", rows_in_chunk);
  return b.rows(r, "xg", shift(rows_in_chunk, c.chunk(o).off));
}

// ---------------------------------------------------------------------------------------------
// gemm_rs and gemm_ar (reduce-scatter, then for gemm_ar an all-gather in the same style).
// gemm_rs: y [M/p, N] is the rank's own chunk. gemm_ar: y [M, N] is the whole sum, and it also
// holds the rank's partials (the partial of chunk j is computed into y rows of chunk j, summed
// in place, then overwritten by the all-gather), so no separate partial buffer is needed.

bool is_ar(const Ctx& c) {
  return c.op.kind == OpKind::gemm_ar;
}

void declare_rs(Builder& b, const Ctx& c, bool need_part, std::int64_t recv_rows) {
  const auto& op = c.op;
  for (int r = 0; r < c.p; ++r) {
    declare_operands(b, op, r);
    if (c.p > 1 && need_part) b.buffer(r, "part", op.m, op.n, BufferRole::scratch);
    if (c.p > 1 && recv_rows > 0) b.buffer(r, "recv", recv_rows, op.n, BufferRole::scratch);
  }
}

// Where rank r's partial of `rows` (global rows) lives: y for gemm_ar, "part" for gemm_rs.
Region partial(Builder& b, const Ctx& c, int r, Rows rows) {
  return b.rows(r, is_ar(c) ? "y" : "part", rows);
}
// Where rank r's own chunk sum (global rows `rows`, inside chunk r) lands.
Region final_rows(Builder& b, const Ctx& c, int r, Rows rows) {
  return b.rows(r, "y", is_ar(c) ? rows : shift(rows, -c.chunk(r).off));
}

// sequential and decompose:d: the lowering of their program (schedule::collective_program).
// Parts are row sub-blocks i of every chunk; when d > 1 the input rows and partials are staged
// part-major so each part is one GEMM.
void rs_collectives(Builder& b, const Ctx& c, const CollectiveProgram& pr, int d) {
  using Role = CollectiveProgram::Role;
  const int p = c.p;
  const bool staged = d > 1 && p > 1;
  // With d == 1 chunks may be uneven (gemm_ar with p not dividing M); with d > 1 they are not.
  const std::int64_t q = staged ? workload::shard_rows(c.op) / d : 0;
  auto len = [&](int j) { return staged ? q : c.chunk(j).len; };
  // Global rows of sub-block (i, j) and its part-major rows in the staged buffers.
  auto glob = [&](int i, int j) { return Rows{c.chunk(j).off + i * len(j), len(j)}; };
  auto pm = [&](int i, int j) {
    return staged ? Rows{(static_cast<std::int64_t>(i) * p + j) * q, q} : c.chunk(j);
  };
  const std::int64_t slot = staged ? q : c.max_chunk();
  // Partials live in y (gemm_ar, unstaged) or "part"; staged runs also need "xs".
  const bool part_in_y = is_ar(c) && !staged;
  declare_rs(b, c, !part_in_y, static_cast<std::int64_t>(d) * (p - 1) * slot);
  if (staged)
    for (int r = 0; r < p; ++r) b.buffer(r, "xs", c.op.m, c.op.k / p, BufferRole::scratch);
  auto part = [&](int r, int i, int j) { return b.rows(r, part_in_y ? "y" : "part", pm(i, j)); };
  auto fin = [&](int r, int i) {
    return b.rows(r, "y", is_ar(c) ? glob(i, r) : Rows{i * len(r), len(r)});
  };
  auto recv = [&](int r, int i, int s, int j) {
    return b.rows(r, "recv", Rows{(static_cast<std::int64_t>(i) * (p - 1) + s) * slot, len(j)});
  };
  for (const CollectiveProgram::Step& st : pr.steps) {
    const int r = st.rank, i = st.part, s = st.ring_step, j = st.chunk;
    switch (st.role) {
      case Role::copy_in:
        for (int k = 0; k < st.copies; ++k)
          b.copy(Resource{r, ResourceKind::compute, 0}, b.rows(r, "x", glob(i, k)),
                 b.rows(r, "xs", pm(i, k)), 0, i, fmt::format("r{} copy in p{} c{}", r, i, k));
        break;
      case Role::gemm: {
        if (p == 1) {
          const Rows rows = split_rows(c.op.m, d, i);
          b.gemm(0, b.rows(0, "x", rows), b.whole(0, "w"), b.rows(0, "y", rows), 0, i,
                 fmt::format("r0 gemm p{}", i));
          break;
        }
        const Rows block = staged ? Rows{i * st.rows, st.rows} : Rows{0, c.op.m};
        Region a = staged ? b.rows(r, "xs", block) : b.whole(r, "x");
        b.gemm(r, a, b.whole(r, "w"), b.rows(r, part_in_y ? "y" : "part", block), 0, i,
               fmt::format("r{} gemm p{}", r, i));
        break;
      }
      case Role::copy_partial:
        b.copy(Resource{r, ResourceKind::compute, 0}, part(r, i, r), fin(r, i), 0, i,
               fmt::format("r{} copy own p{}", r, i));
        break;
      case Role::send: {
        const int to = c.ring.succ(r);
        if (st.phase == 0)
          b.transfer(part(r, i, j), recv(to, i, s, j), 0, 0, s, i,
                     fmt::format("r{} rs p{} s{} c{} ring0 ->r{}", r, i, s, j, to));
        else
          b.transfer(b.rows(r, "y", glob(i, j)), b.rows(to, "y", glob(i, j)), 0, 0, s, i,
                     fmt::format("r{} ag p{} s{} c{} ring0 ->r{}", r, i, s, j, to));
        break;
      }
      case Role::add:
        b.add(r, recv(r, i, s, j), s + 2 == p ? fin(r, i) : part(r, i, j), s, i,
              fmt::format("r{} add p{} s{} c{} ring0", r, i, s, j));
        break;
      case Role::copy_own:
      case Role::copy_out:
        COMPASS_CHECK(false, "rs_collectives: a GEMM-RS/AR program has no AG-GEMM copy");
    }
  }
}

// ---------------------------------------------------------------------------------------------
// fuse:all2all, fuse:ring and fuse:double-ring: the lowering of their program
// (schedule::laid_out_program). The program says who computes and sends which rows when; the
// lowering says where the rows live and what the tasks are called.

using Tag = ProgramLayout::Tag;

// Global rows of a step: its chunk's, or on the double ring its lane's half of them.
Rows step_rows(const Ctx& c, StrategyKind kind, const Tag& t) {
  const Rows chunk = c.chunk(t.chunk);
  if (kind != StrategyKind::fuse_double_ring || t.lane < 0) return chunk;
  return shift(half_rows(chunk.len, t.lane), chunk.off);
}

// A transfer's channel label: the ring it travels on (the all-to-all has none).
int step_channel(StrategyKind kind, const Tag& t) {
  return kind == StrategyKind::fuse_all2all ? -1 : t.lane;
}

// Receive slot of a reduce-scatter transfer on its receiver: one per (lane, step), `slot` rows
// each.
Rows recv_slot(const Ctx& c, const Tag& sent, std::int64_t slot, std::int64_t len) {
  return Rows{(static_cast<std::int64_t>(std::max(0, sent.lane)) * (c.p - 1) + sent.step) * slot,
              len};
}

// gemm_ar's all-gather transfer: the reduced rows from the sender's output to the receiver's.
void emit_output_send(Builder& b, const Ctx& c, StrategyKind kind, const Program::Send& sd,
                      const Tag& t) {
  const Rows g = step_rows(c, kind, t);
  b.transfer(b.rows(sd.from, "y", g), b.rows(sd.to, "y", g), t.engine, step_channel(kind, t),
             t.step, t.chunk,
             kind == StrategyKind::fuse_all2all
                 ? fmt::format("r{} ag push c{} ->r{}", sd.from, t.chunk, sd.to)
                 : fmt::format("r{} ag s{} c{} ring{} ->r{}", sd.from, t.step, t.chunk, t.lane,
                               sd.to));
}

// AG-GEMM: the shards are gathered into "xg" and every piece's GEMM reads them there (a rank's
// own shard from its input, or with fused GEMM groups from "xg" after copying it there).
void ag_lowered(Builder& b, const Ctx& c, StrategyKind kind, const LaidOutProgram& lp) {
  const bool a2a = kind == StrategyKind::fuse_all2all;
  const bool dr = kind == StrategyKind::fuse_double_ring;
  declare_ag(b, c, true);
  for (int r = 0; r < c.p; ++r) ag_copy_own(b, c, r);
  for (const ProgramLayout::Ref& ref : lp.layout.order) {
    if (ref.rank < 0) {
      const Program::Send& sd = lp.program.sends[ref.index];
      const Tag& t = lp.layout.sends[ref.index];
      const Rows g = step_rows(c, kind, t);
      // The owner sends from its input (its half of it on the double ring).
      const Region src = sd.from != t.chunk ? b.rows(sd.from, "xg", g)
                         : dr ? b.rows(sd.from, "x", shift(g, -c.chunk(t.chunk).off))
                              : b.whole(sd.from, "x");
      b.transfer(src, b.rows(sd.to, "xg", g), t.engine, step_channel(kind, t), t.step, t.chunk,
                 a2a ? fmt::format("r{} push c{} ->r{}", sd.from, t.chunk, sd.to)
                     : fmt::format("r{} ag s{} c{} ring{} ->r{}", sd.from, t.step, t.chunk,
                                   t.lane, sd.to));
      continue;
    }
    const int r = ref.rank;
    const Tag& t = lp.layout.items[r][ref.index];
    const Rows g = step_rows(c, kind, t);
    const std::string name = dr && t.lane >= 0
                                 ? fmt::format("r{} gemm s{} c{} ring{}", r, t.step, t.chunk, t.lane)
                                 : fmt::format("r{} gemm s{} c{}", r, t.step, t.chunk);
    b.fuse(b.gemm(r, ag_operand(b, c, r, t.chunk, shift(g, -c.chunk(t.chunk).off)),
                  b.whole(r, "w"), b.rows(r, "y", g), t.step, t.chunk, name),
           c.fused ? 0 : -1);
  }
}

// GEMM-RS and GEMM-AR: partials in "part" (gemm_rs) or in place in "y" (gemm_ar), running sums
// sent into the receiver's slot for (lane, step) of "recv" and added there; the owner's sum
// lands in its output; gemm_ar's all-gather writes the output rows directly.
void rs_lowered(Builder& b, const Ctx& c, StrategyKind kind, const LaidOutProgram& lp) {
  const bool a2a = kind == StrategyKind::fuse_all2all;
  const bool dr = kind == StrategyKind::fuse_double_ring;
  const std::int64_t slot = dr ? (c.max_chunk() + 1) / 2 : c.max_chunk();
  declare_rs(b, c, !is_ar(c), (dr ? 2 : 1) * (c.p - 1) * slot);
  // Where rank r keeps its running sum of global rows g of chunk j.
  auto sum_at = [&](int r, int j, Rows g) {
    return j == r ? final_rows(b, c, r, g) : partial(b, c, r, g);
  };
  for (const ProgramLayout::Ref& ref : lp.layout.order) {
    if (ref.rank < 0) {
      const Program::Send& sd = lp.program.sends[ref.index];
      const Tag& t = lp.layout.sends[ref.index];
      if (t.output) {
        emit_output_send(b, c, kind, sd, t);
        continue;
      }
      const Rows g = step_rows(c, kind, t);
      b.transfer(sum_at(sd.from, t.chunk, g), b.rows(sd.to, "recv", recv_slot(c, t, slot, g.len)),
                 t.engine, step_channel(kind, t), t.step, t.chunk,
                 a2a ? fmt::format("r{} push c{} ->r{}", sd.from, t.chunk, sd.to)
                     : fmt::format("r{} rs s{} c{} ring{} ->r{}", sd.from, t.step, t.chunk,
                                   t.lane, sd.to));
      continue;
    }
    const int r = ref.rank;
    const Program::Item& it = lp.program.items[r][ref.index];
    const Tag& t = lp.layout.items[r][ref.index];
    const Rows g = step_rows(c, kind, t);
    if (!it.add) {
      b.gemm(r, b.rows(r, "x", g), b.whole(r, "w"), sum_at(r, t.chunk, g), t.step, t.chunk,
             dr && t.lane >= 0 ? fmt::format("r{} gemm s{} c{} ring{}", r, t.step, t.chunk, t.lane)
                               : fmt::format("r{} gemm s{} c{}", r, t.step, t.chunk));
      continue;
    }
    const Program::Send& in = lp.program.sends[it.flow_in];
    b.add(r, b.rows(r, "recv", recv_slot(c, lp.layout.sends[it.flow_in], slot, g.len)),
          sum_at(r, t.chunk, g), t.step, t.chunk,
          a2a ? fmt::format("r{} add c{} from r{}", r, t.chunk, in.from)
              : fmt::format("r{} add s{} c{} ring{}", r, t.step, t.chunk, t.lane));
  }
}

// ---------------------------------------------------------------------------------------------
// gemm_rs and gemm_ar with fused GEMM groups: the form a fused GEMM-RS kernel runs. Each rank
// computes the partials of every chunk into "part" (fused group 0) in its program's order (the
// chunk a peer needs first, first; its own chunk last) and each peer chunk's partial goes to the
// owner's receive slot for that sender (slot = sender rank); the kernel's epilogue stores it
// there. The owner then sums the p partials in rank order 0, 1, ..., p-1 (its own from "part"),
// so the result does not depend on arrival order. gemm_ar then all-gathers in the strategy's
// style.

void rs_fused(Builder& b, const Ctx& c, StrategyKind kind, const LaidOutProgram& lp) {
  const int p = c.p;
  const std::int64_t slot = c.max_chunk();
  declare_rs(b, c, true, p * slot);
  auto slot_rows = [&](int sender, std::int64_t off, std::int64_t len) {
    return Rows{sender * slot + off, len};
  };
  for (int r = 0; r < p; ++r) {
    // The rank's partials in the order its program computes them (each lane's half of a chunk
    // on the double ring, its own chunk last), numbered by step; an empty half is no step.
    int step = -1;
    for (std::size_t i = 0; i < lp.program.items[r].size(); ++i) {
      if (lp.program.items[r][i].add) continue;
      if (lp.program.items[r][i].rows <= 0 && lp.layout.items[r][i].lane >= 0 &&
          kind == StrategyKind::fuse_double_ring)
        continue;
      const int j = lp.layout.items[r][i].chunk;
      const Rows rows = step_rows(c, kind, lp.layout.items[r][i]);
      ++step;
      Region pr = b.rows(r, "part", rows);
      b.fuse(b.gemm(r, b.rows(r, "x", rows), b.whole(r, "w"), pr, step, j,
                    fmt::format("r{} gemm s{} c{}", r, step, j)),
             0);
      if (j == r) continue;
      const int k = mod(j - r, p);
      b.transfer(pr, b.rows(j, "recv", slot_rows(r, rows.off - c.chunk(j).off, rows.len)),
                 all2all_engine(k, c.engines), -1, step, j,
                 fmt::format("r{} store s{} c{} ->r{}", r, step, j, j));
    }
  }
  for (int r = 0; r < p; ++r) {
    const Rows own = c.chunk(r);
    Region fin = final_rows(b, c, r, own);
    for (int i = 0; i < p; ++i) {
      Region src = i == r ? b.rows(r, "part", own) : b.rows(r, "recv", slot_rows(i, 0, own.len));
      if (i == 0)
        b.copy(Resource{r, ResourceKind::compute, 0}, src, fin, i, r,
               fmt::format("r{} sum c{} from r{}", r, r, i));
      else
        b.add(r, src, fin, i, r, fmt::format("r{} add c{} from r{}", r, r, i));
    }
  }
  if (!is_ar(c)) return;
  // gemm_ar: the all-gather of the strategy's program.
  for (const ProgramLayout::Ref& ref : lp.layout.order)
    if (ref.rank < 0 && lp.layout.sends[ref.index].output)
      emit_output_send(b, c, kind, lp.program.sends[ref.index], lp.layout.sends[ref.index]);
}

}  // namespace

Status check_decompose(const workload::OperatorSpec& op, int d) {
  const int p = op.tp;
  if (d < 1) return make_error("decompose:{}: the number of parts must be at least 1", d);
  if (d > kMaxDecomposeParts)
    return make_error("decompose:{}: the number of parts must be at most {}", d,
                      kMaxDecomposeParts);
  if (op.m % p != 0 && d > 1)
    return make_error(
        "decompose:{}: M = {} is not divisible by tp = {}, so ranks own unequal "
        "rows that cannot be split into parts",
        d, op.m, p);
  const std::int64_t rows = workload::shard_rows(op);
  if (d > 1 && rows % d != 0)
    return make_error(
        "decompose:{}: {} parts do not divide the {} rows each rank owns "
        "(M/tp = {}/{})",
        d, d, rows, op.m, p);
  return Status::success();
}

Result<Schedule> generate(const workload::OperatorSpec& op, const Strategy& strategy,
                          const CommPlan& plan, const GenerateOptions& options) {
  COMPASS_TRY(workload::validate(op));
  const int p = op.tp;
  if (static_cast<int>(plan.gpus.size()) != p)
    return make_error("comm plan: {} GPUs but the operator has tp = {}", plan.gpus.size(), p);
  if (plan.copy_engines < 1)
    return make_error("comm plan: copy_engines must be at least 1, got {}", plan.copy_engines);
  COMPASS_ASSIGN(RingView ring, ring_view(plan.ring, p, "ring"));
  COMPASS_TRY(ring_view(plan.ring2, p, "ring2"));  // the double ring's second ring

  if (strategy.kind == StrategyKind::decompose) COMPASS_TRY(check_decompose(op, strategy.parts));

  // Every strategy emits at most about parts x p x (p + 2) tasks (a transfer to every other
  // rank, a GEMM and an add or copy per part and rank); refuse before building what no
  // machine should be asked to run.
  {
    const double parts = strategy.kind == StrategyKind::decompose ? strategy.parts : 2.0;
    const double tasks = parts * p * (p + 2.0) * std::max(1, plan.copy_engines >= 2 ? 2 : 1);
    if (tasks > static_cast<double>(kMaxTasks))
      return make_error(
          "{} at tp {} would build about {:.3g} tasks, more than the limit of {}",
          to_string(strategy), p, tasks, kMaxTasks);
  }

  const bool gemm_fusion =
      strategy.kind == StrategyKind::fuse_all2all || strategy.kind == StrategyKind::fuse_ring ||
      strategy.kind == StrategyKind::fuse_double_ring;
  Ctx c{op,
        p,
        std::move(ring),
        plan.copy_engines,
        options.fused_gemm && gemm_fusion && p > 1};
  Builder b(op, strategy, plan.gpus);
  const bool ag = op.kind == OpKind::ag_gemm;
  switch (strategy.kind) {
    case StrategyKind::sequential:
    case StrategyKind::decompose: {
      const int d = strategy.kind == StrategyKind::decompose ? strategy.parts : 1;
      const CollectiveProgram pr = collective_program(op, strategy, plan);
      ag ? ag_collectives(b, c, pr, d) : rs_collectives(b, c, pr, d);
      break;
    }
    case StrategyKind::fuse_all2all:
    case StrategyKind::fuse_ring:
    case StrategyKind::fuse_double_ring: {
      const LaidOutProgram lp = laid_out_program(op, strategy, plan);
      ag        ? ag_lowered(b, c, strategy.kind, lp)
      : c.fused ? rs_fused(b, c, strategy.kind, lp)
                : rs_lowered(b, c, strategy.kind, lp);
      break;
    }
    case StrategyKind::fuse_hier:
    case StrategyKind::fuse_synth: {
      const TreePlan& tp = strategy.kind == StrategyKind::fuse_hier ? plan.hier : plan.synth;
      if (Status st = validate_tree_plan(tp, p); !st.ok())
        return make_error("comm plan: {}: {}", to_string(strategy), st.error().message);
      detail::tree_pattern_graph(b, op, tp, plan.copy_engines, options.tree_rs_costs);
      break;
    }
  }
  Schedule s = std::move(b).finish();
  COMPASS_CHECK(validate(s).ok(), "generated schedule is invalid: {}", validate(s).error().message);
  return s;
}

Result<Schedule> generate_for(const hardware::Profile& machine, const workload::OperatorSpec& op,
                              const Strategy& strategy, const CommPlan& plan,
                              GenerateOptions options) {
  for (int g : plan.gpus)
    if (g < 0 || g >= machine.gpu_count())
      return make_error("comm plan: GPU {} is not on '{}' ({} GPUs)", g, machine.name,
                        machine.gpu_count());
  options.tree_rs_costs = tree_rs_costs(machine, plan, op);
  return generate(op, strategy, plan, options);
}

Schedule ring_allgather(int p, std::int64_t shard_rows, std::int64_t cols) {
  COMPASS_CHECK(p >= 2 && shard_rows >= 1 && cols >= 1,
                "ring_allgather: p {} shard_rows {} cols {}", p, shard_rows, cols);
  Schedule s;
  s.op = workload::OperatorSpec{workload::OpKind::ag_gemm, shard_rows * p, cols, cols, p,
                                DType::bf16, ""};
  s.strategy = Strategy{StrategyKind::fuse_ring, 0};
  s.copy_engines = 1;
  for (int r = 0; r < p; ++r) s.gpus.push_back(r);
  for (int r = 0; r < p; ++r) {
    s.buffers.push_back(Buffer{"x", r, shard_rows, cols, BufferRole::input});
    s.buffers.push_back(Buffer{"xg", r, shard_rows * p, cols, BufferRole::scratch});
  }
  s.tasks.reserve(static_cast<std::size_t>(p) * (p - 1));
  std::vector<int> prev(p, -1), cur(p);
  for (int step = 0; step + 1 < p; ++step) {
    for (int r = 0; r < p; ++r) {
      const int to = (r + 1) % p;
      const int chunk = ((r - step) % p + p) % p;
      Task t;
      t.id = static_cast<int>(s.tasks.size());
      t.kind = TaskKind::transfer;
      t.resource = Resource{r, ResourceKind::copy_engine, 0};
      const int left = prev[(r - 1 + p) % p];
      if (left >= 0) t.deps.push_back(left);
      t.src = step == 0 ? Region{2 * r, 0, shard_rows, 0, cols}
                        : Region{2 * r + 1, chunk * shard_rows, shard_rows, 0, cols};
      t.dst = Region{2 * to + 1, chunk * shard_rows, shard_rows, 0, cols};
      t.step = step;
      t.chunk = chunk;
      cur[r] = t.id;
      s.tasks.push_back(std::move(t));
    }
    prev = cur;
  }
  assign_launches(s);
  return s;
}

}  // namespace compass::schedule
