// sequential and decompose:d: NCCL-style collectives beside separate GEMM kernels. Their program
// (schedule::collective_program) is followed to a fixed point of its interference (docs/model.md,
// "Strategy estimates").

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

#include "compass/model/estimate_ctx.hpp"

namespace compass::model {

using hardware::copy_s;
using hardware::slowed_end;
using hardware::Window;
using workload::OpKind;

namespace detail {
namespace {

// Most rounds of decompose's fixed point (it stops as soon as a round repeats the previous one;
// a guard, not a tuning knob).
constexpr int kDecomposeFixedPointRounds = 64;

// ---- sequential and decompose:d (sequential is decompose:1, as in the schedule) --------------
// The collectives are NCCL-style rings of transfers on copy engine 0; a reduce-scatter step
// adds the received block on the compute stream before the next step forwards it.

struct CollectiveCosts {
  double step_s = 0;     // one ring transfer step
  double add_s = 0;      // reduce-scatter: the add after each step
  std::string bottleneck;
};

CollectiveCosts collective_costs(const Ctx& c, std::int64_t part_rows) {
  CollectiveCosts cc;
  if (c.p <= 1) return cc;
  const double cols = c.op.kind == OpKind::ag_gemm ? c.op.k : c.op.n;
  const double block = static_cast<double>(part_rows) / c.p * cols * c.e;
  const StepTime st = c.ring_step(block);
  // NCCL-style: the collective's launch is paid once (coll_launch, at step 0), later steps run
  // inside the same kernel (hardware::transfer_issue_s).
  cc.step_s = st.time_s;
  cc.bottleneck = st.bottleneck;
  if (c.op.kind != OpKind::ag_gemm) cc.add_s = c.add(block);
  return cc;
}

// Follows a collective program (schedule::collective_program) in its follow order to the fixed
// point of its interference (docs/model.md, "Strategy estimates"): each rank's compute stream
// runs its GEMMs, copies and adds in order, copy engine 0 its own-block copies and sends; a
// step starts when the steps it waits for have ended and its resource is free. A send from
// ring position P lands at P + 1 after its edge's time (Ctx::ring_edges: the ring step's flows
// sharing the links), its bytes counting fc times when a GEMM computes at either end as they
// start (`slow`, from the previous round); a GEMM advances at 1/fg while its rank's copy
// engine moves data (the proportional rule), over the copy engine's windows followed before
// it. The schedule's timeline and the simulator apply both rules.
class CollectiveFollower {
  using Program = schedule::CollectiveProgram;
  using Role = Program::Role;

  // Whether one of `gemms` (ascending, disjoint) is under way at t, for ascending t.
  struct Cursor {
    const std::vector<Window>& gemms;
    std::size_t next = 0;  // the first GEMM that starts after the last t asked
    explicit Cursor(const std::vector<Window>& g) : gemms(g) {}
    bool computing_at(double t) {
      while (next < gemms.size() && gemms[next].from <= t) ++next;
      return next > 0 && t < gemms[next - 1].until;
    }
  };

 public:
  // `ws` is scratch: its buffers are reused, so following allocates once they are large enough.
  CollectiveFollower(const Ctx& c, const PreparedCollective& pc, CollectiveWorkspace& ws)
      : c_(c), pc_(pc), pr_(pc.program), p_(c.p), ws_(ws) {
    const std::size_t n = pr_.steps.size();
    // Every round writes every step's start and end, and every send's first byte, before they
    // are read (the buffers only grow: the steps are their first n entries).
    for (std::vector<double>* v : {&ws.from, &ws.start, &ws.end})
      if (v->size() < n) v->resize(n);
    ws.slow.assign(n, 0);
    ws.first_busy.assign(static_cast<std::size_t>(p_), 0);
    for (auto* lists : {&ws.busy, &ws.computing}) {
      lists->resize(static_cast<std::size_t>(p_));
      for (std::vector<Window>& l : *lists) l.clear();
    }
    // Each price class once: a step's work, or a send class's edge times per ring position.
    const workload::GemmShape s = workload::local_gemm(c.op);
    const double cols = c.op.kind == OpKind::ag_gemm ? c.op.k : c.op.n;
    const std::size_t classes = pc.classes.size();
    ws.work.assign(classes, 0.0);
    ws.edge.resize(classes);
    ws.edge_slow.resize(classes);
    for (std::size_t k = 0; k < classes; ++k) {
      const Program::Step& st = pc.classes[k];
      const double block = static_cast<double>(st.rows) * cols * c.e;
      const double rows = static_cast<double>(st.copies * st.rows);
      double& w = ws.work[k];
      switch (st.role) {
        case Role::gemm: w = c.gemm(st.rows, s.n, s.k); break;
        case Role::copy_own: w = copy_s(c.prof, c.gpus.front(), block); break;
        case Role::copy_out: w = c.copies(st.copies, rows * s.n * c.e); break;
        case Role::copy_in: w = c.copies(st.copies, rows * s.k * c.e); break;
        case Role::copy_partial: w = c.copies(1, block); break;
        case Role::add: w = c.add(block); break;
        case Role::send:
          ws.edge[k] = c.ring_edges(block);
          ws.edge_slow[k] = c.ring_edges_beside_gemm(block, ws.edge[k]);
          break;
      }
    }
  }

  // The program's makespan at the fixed point of which sends start beside a GEMM: a round
  // repeats the previous one once no send changes.
  double run() {
    double total = 0;
    for (int iter = 0; iter < kDecomposeFixedPointRounds; ++iter) {
      total = round();
      if (!update_slow()) break;
    }
    return total;
  }

 private:
  double round() {
    double* start = ws_.start.data();
    double* end = ws_.end.data();
    double* from_of = ws_.from.data();
    const char* slow = ws_.slow.data();
    const double* work = ws_.work.data();
    ws_.cs.assign(p_, 0.0);
    ws_.ce.assign(p_, 0.0);
    double* cs = ws_.cs.data();
    double* ce = ws_.ce.data();
    std::fill(ws_.first_busy.begin(), ws_.first_busy.end(), 0);
    for (std::vector<Window>& b : ws_.busy) b.clear();
    for (std::vector<Window>& g : ws_.computing) g.clear();
    double total = 0;
    for (const PreparedCollective::Op& op : pc_.ops) {
      const int k = op.step, P = op.rank;
      double ready = 0;
      if (op.wait[0] >= 0) ready = end[op.wait[0]];
      if (op.wait[1] >= 0) ready = std::max(ready, end[op.wait[1]]);
      switch (op.role) {
        case Role::send: {
          // Behind its copy engine's previous task, with the collective's launch at step 0
          // (later steps run inside the same kernel, hardware::transfer_issue_s).
          start[k] = std::max(ready, ce[P]);
          const double from = start[k] + (op.launches ? c_.coll_launch : 0.0);
          end[k] = from + (slow[k] ? ws_.edge_slow[op.cls][op.at] : ws_.edge[op.cls][op.at]);
          from_of[k] = from;
          ce[P] = end[k];
          ws_.busy[P].push_back(Window{from, end[k]});  // the engine's tasks follow one another
          break;
        }
        case Role::copy_own: {
          start[k] = ce[P];
          const double from = ce[P] + c_.copy_issue;
          ce[P] = end[k] = from + work[op.cls];
          ws_.busy[P].push_back(Window{from, ce[P]});
          break;
        }
        case Role::gemm: {
          start[k] = std::max(cs[P], ready);
          const double from = start[k] + c_.launch;
          // P's GEMMs start in time order: windows over before this one are over for the later
          // ones.
          const std::vector<Window>& b = ws_.busy[P];
          std::size_t& first = ws_.first_busy[P];
          while (first < b.size() && b[first].until <= from) ++first;
          cs[P] = end[k] = slowed_end(from, work[op.cls],
                                      std::span<const Window>(b).subspan(first), c_.fg_nccl);
          ws_.computing[P].push_back(Window{from, cs[P]});
          break;
        }
        default:  // a copy or an add on the compute stream
          start[k] = std::max(cs[P], ready);
          cs[P] = end[k] = start[k] + work[op.cls];
      }
      total = std::max(total, end[k]);
    }
    return total;
  }

  // After a round: each send's bytes count fc times when a GEMM computes at its sender or its
  // receiver as they start. Returns whether any changed.
  bool update_slow() {
    if (c_.fc == 1.0) return false;
    bool changed = false;
    for (int P = 0; P < p_; ++P) {
      const std::vector<int>& sends = pc_.sends[P];
      if (sends.empty()) continue;
      // P's sends follow one another on its copy engine, so their starts ascend, and so do
      // the GEMMs of both ends: one pass over each.
      Cursor here(ws_.computing[P]), there(ws_.computing[pc_.succ[P]]);
      for (int k : sends) {
        const double t = ws_.from[k];
        const char s = here.computing_at(t) || there.computing_at(t);
        changed |= s != ws_.slow[k];
        ws_.slow[k] = s;
      }
    }
    return changed;
  }

  const Ctx& c_;
  const PreparedCollective& pc_;
  const Program& pr_;
  int p_;
  CollectiveWorkspace& ws_;
};

}  // namespace

PreparedCollective prepare_collective(schedule::CollectiveProgram program,
                                      const std::vector<int>& ring) {
  using Role = schedule::CollectiveProgram::Role;
  PreparedCollective pc;
  pc.program = std::move(program);
  const schedule::CollectiveProgram& pr = pc.program;
  const int p = static_cast<int>(ring.size());
  std::vector<int> pos(static_cast<std::size_t>(p), 0);  // per rank: its ring position
  pc.succ.assign(static_cast<std::size_t>(p), 0);
  for (int i = 0; i < p; ++i) {
    pos[static_cast<std::size_t>(ring[i])] = i;
    pc.succ[static_cast<std::size_t>(ring[i])] = ring[(i + 1) % p];
  }
  // Price classes: steps of one role, rows and copies cost the same (a send: per position).
  std::vector<int> cls;  // per step
  cls.reserve(pr.steps.size());
  for (const schedule::CollectiveProgram::Step& st : pr.steps) {
    auto same = [&](const schedule::CollectiveProgram::Step& c) {
      return c.role == st.role && c.rows == st.rows && c.copies == st.copies;
    };
    auto it = std::find_if(pc.classes.begin(), pc.classes.end(), same);
    if (it == pc.classes.end()) {
      schedule::CollectiveProgram::Step c;
      c.role = st.role;
      c.rows = st.rows;
      c.copies = st.copies;
      pc.classes.push_back(c);
      it = pc.classes.end() - 1;
    }
    cls.push_back(static_cast<int>(it - pc.classes.begin()));
  }
  pc.sends.resize(static_cast<std::size_t>(p));
  pc.ops.reserve(pr.follow.size());
  for (int k : pr.follow) {
    const schedule::CollectiveProgram::Step& st = pr.steps[k];
    if (st.role == Role::send) pc.sends[st.rank].push_back(k);
    pc.ops.push_back(PreparedCollective::Op{k, cls[k], st.rank, pos[st.rank], st.waits,
                                            st.role, st.role == Role::send && st.ring_step == 0});
  }
  return pc;
}

namespace {

// AG-GEMM's breakdown: the compute stream's work on the slowest rank (the GEMMs and the staged
// output's copies, without their issue: the work alone under any knobs) and the communication
// alone (every part's p - 1 ring steps).
Outcome ag_breakdown(const Ctx& c, int d) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t part_rows = c.op.m / d;  // all ranks' rows of one part
  const bool staged = d > 1 && p > 1;
  const double g = c.gemm(part_rows, s.n, s.k);
  const double out_copy = staged ? c.copy_work(static_cast<double>(part_rows) * s.n * c.e) : 0;
  o.compute_s = d * (g + out_copy);
  if (c.details) {
    const CollectiveCosts cc = collective_costs(c, part_rows);
    o.bottleneck = cc.bottleneck;
    o.comm_s = d * (p - 1) * cc.step_s;
  }
  return o;
}

// GEMM-RS's and GEMM-AR's breakdown: the compute stream's work on the slowest rank (GEMMs,
// staged input's copies, the own block's copy and the adds; the copies without their issue)
// and the communication alone (the reduce-scatter, and GEMM-AR's all-gather, of every part).
Outcome rs_breakdown(const Ctx& c, int d) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t part_rows = c.op.m / d;  // M/d rows: every chunk's sub-block of one part
  const bool staged = d > 1 && p > 1;
  const bool ar = c.op.kind == OpKind::gemm_ar;
  const double g = c.gemm(part_rows, s.n, s.k);
  const double in_copy = staged ? c.copy_work(static_cast<double>(part_rows) * s.k * c.e) : 0;
  const double block = static_cast<double>(part_rows) / p * c.op.n * c.e;
  // The own block's partial is copied into the output unless it is computed there (unstaged
  // GEMM-AR computes its partials in the output).
  const double own_copy = p > 1 && (staged || !ar) ? c.copy_work(block) : 0;
  const double add = p > 1 ? c.add(block) : 0;  // a received block into the local one
  o.compute_s = d * (g + in_copy + own_copy + (p - 1) * add);
  if (c.details) {
    const CollectiveCosts cc = collective_costs(c, part_rows);
    o.bottleneck = cc.bottleneck;
    o.comm_s = d * (ar ? 2 : 1) * (p - 1) * cc.step_s;
  }
  return o;
}

}  // namespace

Outcome decompose(const Ctx& c, int d) {
  Outcome o = c.op.kind == OpKind::ag_gemm ? ag_breakdown(c, d) : rs_breakdown(c, d);
  // The program reads the operator's kind, M and tp, the parts and the ring.
  std::vector<std::uint64_t> key{0, static_cast<std::uint64_t>(c.op.kind),
                                 static_cast<std::uint64_t>(c.op.m),
                                 static_cast<std::uint64_t>(c.op.tp),
                                 static_cast<std::uint64_t>(d)};
  for (int r : c.plan.ring) key.push_back(static_cast<std::uint64_t>(r));
  seal_key(key);
  auto& programs = c.caches.tables().collective_programs;
  auto it = programs.find(key);
  if (it == programs.end()) {
    if (programs.size() >= 1024) programs.clear();  // bounded: the degrees of a few shapes
    const schedule::Strategy st = d == 1
                                      ? schedule::Strategy{schedule::StrategyKind::sequential, 0}
                                      : schedule::Strategy{schedule::StrategyKind::decompose, d};
    it = programs
             .emplace(std::move(key),
                      std::make_shared<const PreparedCollective>(prepare_collective(
                          schedule::collective_program(c.op, st, c.plan), c.plan.ring)))
             .first;
  }
  o.total_s = follow_collectives(c, *it->second);
  return o;
}

double follow_collectives(const Ctx& c, const PreparedCollective& pc,
                          std::vector<double>* start_s, std::vector<double>* end_s) {
  CollectiveWorkspace& ws = c.caches.tables().collective;
  const double total = CollectiveFollower(c, pc, ws).run();
  const auto steps = static_cast<std::ptrdiff_t>(pc.program.steps.size());
  if (start_s != nullptr) start_s->assign(ws.start.begin(), ws.start.begin() + steps);
  if (end_s != nullptr) end_s->assign(ws.end.begin(), ws.end.begin() + steps);
  return total;
}

}  // namespace detail

DecomposeParts decompose_parts(const hardware::Profile& p, const workload::OperatorSpec& op,
                               int d, const schedule::CommPlan& plan, Caches& caches) {
  COMPASS_CHECK(d >= 1 && workload::rows_per_rank(op) % d == 0, "decompose_parts: bad degree {}", d);
  const detail::Ctx c(p, op, plan, {true, true}, caches);
  DecomposeParts dp;
  const workload::GemmShape s = workload::local_gemm(op);
  const std::int64_t part_rows = op.m / d;
  const bool staged = d > 1 && c.p > 1;
  const detail::CollectiveCosts cc = detail::collective_costs(c, part_rows);
  const double steps = c.p - 1;
  dp.comm_first = op.kind == OpKind::ag_gemm;
  dp.gemm_slowdown = c.fg_nccl;
  dp.comm_slowdown = c.fc;
  dp.gemm_part_s = c.launch + c.gemm(part_rows, s.n, s.k);
  if (c.p == 1) return dp;
  if (op.kind == OpKind::ag_gemm) {
    dp.comm_part_s = c.coll_launch + c.copies(1, static_cast<double>(part_rows) / c.p * op.k * c.e) +
                     steps * cc.step_s;
    if (staged) dp.gemm_part_s += c.copies(c.p, static_cast<double>(part_rows) * s.n * c.e);
  } else {
    dp.comm_part_s = c.coll_launch + steps * (cc.step_s + cc.add_s) +
                     c.copies(1, static_cast<double>(part_rows) / c.p * op.n * c.e);
    if (op.kind == OpKind::gemm_ar) dp.comm_part_s += c.coll_launch + steps * cc.step_s;
    if (staged) dp.gemm_part_s += c.copies(c.p, static_cast<double>(part_rows) * s.k * c.e);
  }
  return dp;
}

}  // namespace compass::model
