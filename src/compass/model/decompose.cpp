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
  CollectiveFollower(const Ctx& c, const Program& pr)
      : c_(c), pr_(pr), p_(c.p), n_(pr.steps.size()), work_(n_, 0.0), edge_(n_, 0.0),
        edge_slow_(n_, 0.0), slow_(n_, 0), from_(n_, 0.0), start_(n_, 0.0), end_(n_, 0.0),
        sends_(p_), first_busy_(p_), busy_(p_), computing_(p_) {
    const workload::GemmShape s = workload::local_gemm(c.op);
    const double cols = c.op.kind == OpKind::ag_gemm ? c.op.k : c.op.n;
    std::vector<int> pos(static_cast<std::size_t>(p_), 0);
    succ_.assign(static_cast<std::size_t>(p_), 0);
    for (int i = 0; i < p_; ++i) {
      pos[static_cast<std::size_t>(c.plan.ring[i])] = i;
      succ_[static_cast<std::size_t>(c.plan.ring[i])] = c.plan.ring[(i + 1) % p_];
    }
    // A program has few distinct sizes: each block size's ring edges are priced once.
    std::vector<std::pair<std::int64_t, std::pair<std::vector<double>, std::vector<double>>>> edges;
    for (std::size_t k = 0; k < n_; ++k) {
      const Program::Step& st = pr.steps[k];
      const double block = static_cast<double>(st.rows) * cols * c.e;
      switch (st.role) {
        case Role::gemm: work_[k] = c.gemm(st.rows, s.n, s.k); break;
        case Role::copy_own: work_[k] = copy_s(c.prof, c.gpus.front(), block); break;
        case Role::copy_out:
          work_[k] = c.copies(st.copies, static_cast<double>(st.copies * st.rows) * s.n * c.e);
          break;
        case Role::copy_in:
          work_[k] = c.copies(st.copies, static_cast<double>(st.copies * st.rows) * s.k * c.e);
          break;
        case Role::copy_partial: work_[k] = c.copies(1, block); break;
        case Role::add: work_[k] = c.add(block); break;
        case Role::send: {
          auto e = std::find_if(edges.begin(), edges.end(),
                                [&](const auto& kv) { return kv.first == st.rows; });
          if (e == edges.end()) {
            std::vector<double> edge = c.ring_edges(block);
            std::vector<double> edge_slow = c.ring_edges_beside_gemm(block, edge);
            edges.emplace_back(st.rows, std::make_pair(std::move(edge), std::move(edge_slow)));
            e = edges.end() - 1;
          }
          const std::size_t P = static_cast<std::size_t>(pos[static_cast<std::size_t>(st.rank)]);
          edge_[k] = e->second.first[P];
          edge_slow_[k] = e->second.second[P];
          break;
        }
      }
    }
    // Each rank's sends in follow order: its copy engine's order, so their starts ascend.
    for (int k : pr.follow)
      if (pr.steps[k].role == Role::send) sends_[pr.steps[k].rank].push_back(k);
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
  // Per step, after run(): when its resource took it (before its launch or issue) and when it
  // ended.
  const std::vector<double>& start_s() const { return start_; }
  const std::vector<double>& end_s() const { return end_; }

 private:
  double round() {
    cs_.assign(p_, 0.0);
    ce_.assign(p_, 0.0);
    std::fill(first_busy_.begin(), first_busy_.end(), 0);
    for (std::vector<Window>& b : busy_) b.clear();
    for (std::vector<Window>& g : computing_) g.clear();
    double total = 0;
    for (int k : pr_.follow) {
      const Program::Step& st = pr_.steps[k];
      const int P = st.rank;
      double ready = 0;
      for (int w : st.waits)
        if (w >= 0) ready = std::max(ready, end_[w]);
      switch (st.role) {
        case Role::send: {
          // Behind its copy engine's previous task, with the collective's launch at step 0
          // (later steps run inside the same kernel, hardware::transfer_issue_s).
          start_[k] = std::max(ready, ce_[P]);
          const double from = start_[k] + (st.ring_step == 0 ? c_.coll_launch : 0.0);
          end_[k] = from + (slow_[k] ? edge_slow_[k] : edge_[k]);
          from_[k] = from;
          ce_[P] = end_[k];
          busy_[P].push_back(Window{from, end_[k]});  // the engine's tasks follow one another
          break;
        }
        case Role::copy_own: {
          start_[k] = ce_[P];
          const double from = ce_[P] + c_.copy_issue;
          ce_[P] = end_[k] = from + work_[k];
          busy_[P].push_back(Window{from, ce_[P]});
          break;
        }
        case Role::gemm: {
          start_[k] = std::max(cs_[P], ready);
          const double from = start_[k] + c_.launch;
          // P's GEMMs start in time order: windows over before this one are over for the later
          // ones.
          const std::vector<Window>& b = busy_[P];
          std::size_t& first = first_busy_[P];
          while (first < b.size() && b[first].until <= from) ++first;
          cs_[P] = end_[k] =
              slowed_end(from, work_[k], std::span<const Window>(b).subspan(first), c_.fg_nccl);
          computing_[P].push_back(Window{from, cs_[P]});
          break;
        }
        default:  // a copy or an add on the compute stream
          start_[k] = std::max(cs_[P], ready);
          cs_[P] = end_[k] = start_[k] + work_[k];
      }
      total = std::max(total, end_[k]);
    }
    return total;
  }

  // After a round: each send's bytes count fc times when a GEMM computes at its sender or its
  // receiver as they start. Returns whether any changed.
  bool update_slow() {
    if (c_.fc == 1.0) return false;
    bool changed = false;
    for (int P = 0; P < p_; ++P) {
      if (sends_[P].empty()) continue;
      // P's sends follow one another on its copy engine, so their starts ascend, and so do
      // the GEMMs of both ends: one pass over each.
      Cursor here(computing_[P]), there(computing_[succ_[P]]);
      for (int k : sends_[P]) {
        const double t = from_[k];
        const char s = here.computing_at(t) || there.computing_at(t);
        changed |= s != slow_[k];
        slow_[k] = s;
      }
    }
    return changed;
  }

  const Ctx& c_;
  const Program& pr_;
  int p_;
  std::size_t n_;
  std::vector<double> work_, edge_, edge_slow_;  // per step: its cost, a send's two edge times
  std::vector<char> slow_;    // per send: beside a GEMM as it starts (the previous round)
  std::vector<double> from_;  // per send: when its bytes start
  std::vector<double> start_, end_;
  std::vector<int> succ_;     // per rank: its successor on the ring
  std::vector<std::vector<int>> sends_;  // per rank: its sends in follow order
  std::vector<double> cs_;    // per rank: the compute stream free at
  std::vector<double> ce_;    // per rank: copy engine 0 free at
  std::vector<std::size_t> first_busy_;  // per rank: its first window not over yet
  std::vector<std::vector<Window>> busy_, computing_;
};

// AG-GEMM's breakdown: the compute stream's work on the slowest rank (the GEMMs and the staged
// output's copies) and the communication alone (every part's p - 1 ring steps).
Outcome ag_breakdown(const Ctx& c, int d) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t part_rows = c.op.m / d;  // all ranks' rows of one part
  const bool staged = d > 1 && p > 1;
  const double g = c.gemm(part_rows, s.n, s.k);
  const double out_copy = staged ? c.copies(p, static_cast<double>(part_rows) * s.n * c.e) : 0;
  o.compute_s = d * (g + out_copy);
  if (c.details) {
    const CollectiveCosts cc = collective_costs(c, part_rows);
    o.bottleneck = cc.bottleneck;
    o.comm_s = d * (p - 1) * cc.step_s;
  }
  return o;
}

// GEMM-RS's and GEMM-AR's breakdown: the compute stream's work on the slowest rank (GEMMs,
// staged input's copies, the own block's copy and the adds) and the communication alone (the
// reduce-scatter, and GEMM-AR's all-gather, of every part).
Outcome rs_breakdown(const Ctx& c, int d) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t part_rows = c.op.m / d;  // M/d rows: every chunk's sub-block of one part
  const bool staged = d > 1 && p > 1;
  const bool ar = c.op.kind == OpKind::gemm_ar;
  const double g = c.gemm(part_rows, s.n, s.k);
  const double in_copy = staged ? c.copies(p, static_cast<double>(part_rows) * s.k * c.e) : 0;
  const double block = static_cast<double>(part_rows) / p * c.op.n * c.e;
  // The own block's partial is copied into the output unless it is computed there (unstaged
  // GEMM-AR computes its partials in the output).
  const double own_copy = p > 1 && (staged || !ar) ? c.copies(1, block) : 0;
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
                                 static_cast<std::uint64_t>(c.op.tp), static_cast<std::uint64_t>(d)};
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
             .emplace(std::move(key), std::make_shared<const schedule::CollectiveProgram>(
                                          schedule::collective_program(c.op, st, c.plan)))
             .first;
  }
  o.total_s = follow_collectives(c, *it->second);
  return o;
}

double follow_collectives(const Ctx& c, const schedule::CollectiveProgram& pr,
                          std::vector<double>* start_s, std::vector<double>* end_s) {
  CollectiveFollower f(c, pr);
  const double total = f.run();
  if (start_s != nullptr) *start_s = f.start_s();
  if (end_s != nullptr) *end_s = f.end_s();
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
