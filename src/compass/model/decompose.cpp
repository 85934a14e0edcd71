// sequential and decompose:d: NCCL-style collectives beside separate GEMM kernels, followed
// per ring position in the schedule's order of tasks to a fixed point of their interference
// (docs/model.md, "Strategy estimates").

#include <algorithm>
#include <cstdint>
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

// One round of decompose's fixed point, followed per ring position P (every rank computes the
// same work, so position P stands for the rank at ring[P]) in the schedule's order of tasks
// (schedule/generate.cpp, ag_decompose and rs_decompose): GEMMs, copies and adds on the compute
// stream, the collectives' transfers on copy engine 0, one after the other. A transfer from P
// lands at P + 1 after its edge's time (Ctx::ring_edges, the step's flows sharing the links);
// its bytes count fc times when a GEMM computes on either end as they start (`slow`, from the
// previous round), and P's GEMMs advance at 1/fg while P's copy engine moves data (the
// proportional rule), as the schedule's timeline and the simulator apply both. Transfer ids
// are the callers': id % p is the sending position, and a position's ids ascend in its copy
// engine's order.
class DecomposeRound {
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
  DecomposeRound(const Ctx& c, std::size_t transfers, const std::vector<double>& edge,
                 const std::vector<double>& edge_slow)
      : c_(c), p_(c.p), edge_(edge), edge_slow_(edge_slow), slow_(transfers, 0),
        from_(transfers, 0.0), ce_(p_), first_busy_(p_), busy_(p_), computing_(p_) {}

  // Starts a round: every position idle at 0.
  void reset() {
    cs_.assign(p_, 0.0);
    std::fill(ce_.begin(), ce_.end(), 0.0);
    std::fill(first_busy_.begin(), first_busy_.end(), 0);
    for (std::vector<Window>& b : busy_) b.clear();
    for (std::vector<Window>& g : computing_) g.clear();
  }

  // Transfer `id` from position P, ready at `ready`, started on P's copy engine behind its
  // previous task with `issue` (the collective's launch at step 0): returns when it lands.
  double send(int id, int P, double ready, double issue) {
    const double from = std::max(ready, ce_[P]) + issue;
    const double land = from + (slow_[id] ? edge_slow_[P] : edge_[P]);
    from_[id] = from;
    ce_[P] = land;
    busy_[P].push_back(Window{from, land});  // the engine's tasks follow one another
    return land;
  }
  // A local copy of `work` after its issue on P's copy engine (moving data): returns its end.
  double engine_copy(int P, double work) {
    const double from = ce_[P] + c_.copy_issue;
    ce_[P] = from + work;
    busy_[P].push_back(Window{from, ce_[P]});
    return ce_[P];
  }
  // A GEMM of `work` on P's compute stream, not before `ready`, after its kernel launch:
  // returns its end.
  double gemm(int P, double ready, double work) {
    const double from = std::max(cs_[P], ready) + c_.launch;
    // P's GEMMs start in time order: windows over before this one are over for the later ones.
    const std::vector<Window>& b = busy_[P];
    std::size_t& first = first_busy_[P];
    while (first < b.size() && b[first].until <= from) ++first;
    cs_[P] = slowed_end(from, work, std::span<const Window>(b).subspan(first), c_.fg_nccl);
    computing_[P].push_back(Window{from, cs_[P]});
    return cs_[P];
  }
  // Other work on P's compute stream (a copy or an add), not before `ready`: returns its end.
  double compute(int P, double ready, double work) {
    cs_[P] = std::max(cs_[P], ready) + work;
    return cs_[P];
  }
  double compute_free(int P) const { return cs_[P]; }

  // After a round: each transfer's bytes count fc times when a GEMM computes at its sending
  // (id % p) or receiving position as they start. Returns whether any changed.
  bool update_slow() {
    if (c_.fc == 1.0) return false;
    bool changed = false;
    for (int P = 0; P < p_; ++P) {
      // P's transfers (ids P, P + p, ...) follow one another on its copy engine, so their
      // starts ascend, and so do the GEMMs of both ends: one pass over each.
      Cursor here(computing_[P]), there(computing_[(P + 1) % p_]);
      for (std::size_t id = P; id < slow_.size(); id += p_) {
        const double t = from_[id];
        const char s = here.computing_at(t) || there.computing_at(t);
        changed |= s != slow_[id];
        slow_[id] = s;
      }
    }
    return changed;
  }


 private:
  const Ctx& c_;
  int p_;
  const std::vector<double>& edge_;
  const std::vector<double>& edge_slow_;
  std::vector<char> slow_;
  std::vector<double> from_;  // per transfer: when its bytes start
  std::vector<double> cs_;    // per position: the compute stream free at
  std::vector<double> ce_;    // per position: copy engine 0 free at
  std::vector<std::size_t> first_busy_;  // per position: its first window not over yet
  std::vector<std::vector<Window>> busy_, computing_;
};

// Runs `round` (one pass over the schedule, returning the makespan) to the fixed point of which
// transfers start beside a GEMM: a round repeats the previous one once no transfer changes.
template <typename Round>
double decompose_fixed_point(DecomposeRound& r, const Round& round) {
  double total = 0;
  for (int iter = 0; iter < kDecomposeFixedPointRounds; ++iter) {
    r.reset();
    total = round();
    if (!r.update_slow()) break;
  }
  return total;
}

// AG-GEMM, per part i: copy engine 0 copies the own block into the gathered input, then the
// ring all-gather's p-1 steps (step s forwards what landed at step s-1); GEMM i waits for its
// part's last arrival; staged outputs are copied back on the compute stream.
Outcome decompose_ag(const Ctx& c, int d) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t part_rows = c.op.m / d;  // all ranks' rows of one part
  const bool staged = d > 1 && p > 1;
  const double g = c.gemm(part_rows, s.n, s.k);
  const double block = static_cast<double>(part_rows) / p * c.op.k * c.e;
  const double own_copy = p > 1 ? copy_s(c.prof, c.gpus.front(), block) : 0;
  const double out_copy = staged ? c.copies(p, static_cast<double>(part_rows) * s.n * c.e) : 0;
  o.compute_s = d * (g + out_copy);
  if (c.details) {
    const CollectiveCosts cc = collective_costs(c, part_rows);
    o.bottleneck = cc.bottleneck;
    o.comm_s = d * (p - 1) * cc.step_s;
  }
  const std::vector<double> edge = p > 1 ? c.ring_edges(block) : std::vector<double>{};
  const std::vector<double> edge_slow =
      p > 1 ? c.ring_edges_beside_gemm(block, edge) : edge;
  const int steps = p - 1;
  auto id = [&](int i, int st, int P) { return (i * steps + st) * p + P; };
  DecomposeRound r(c, static_cast<std::size_t>(d * steps * p), edge, edge_slow);
  std::vector<double> gathered(static_cast<std::size_t>(d * p), 0.0), land(p), arrived(p);
  o.total_s = decompose_fixed_point(r, [&] {
    for (int i = 0; i < d && p > 1; ++i) {
      for (int P = 0; P < p; ++P) {
        gathered[i * p + P] = r.engine_copy(P, own_copy);
        land[P] = r.send(id(i, 0, P), P, 0.0, c.coll_launch);
      }
      for (int st = 1; st < steps; ++st) {
        std::swap(arrived, land);
        for (int P = 0; P < p; ++P)
          land[P] = r.send(id(i, st, P), P, arrived[(P + p - 1) % p], 0.0);
      }
      for (int P = 0; P < p; ++P)
        gathered[i * p + P] = std::max(gathered[i * p + P], land[(P + p - 1) % p]);
    }
    double total = 0;
    for (int P = 0; P < p; ++P) {
      for (int i = 0; i < d; ++i) {
        r.gemm(P, gathered[i * p + P], g);
        r.compute(P, 0.0, out_copy);
      }
      total = std::max(total, r.compute_free(P));
    }
    return total;
  });
  return o;
}

// GEMM-RS and GEMM-AR, in the schedule's program order: GEMM 0, then per part i GEMM i+1, the
// own block's copy (when it is not already in place) and the adds of part i's ring
// reduce-scatter, each after its step's transfer landed; the step-s transfer forwards the sum
// of step s-1's add (step 0 the GEMM's partial). GEMM-AR: the ring all-gather of part i's sums
// follows on the same copy engine, each rank starting when its own last add is done and
// forwarding at step k what landed at step k-1.
Outcome decompose_rs(const Ctx& c, int d) {
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
  if (p == 1) {
    o.total_s = d * (c.launch + g);
    return o;
  }
  const std::vector<double> edge = c.ring_edges(block);
  const std::vector<double> edge_slow = c.ring_edges_beside_gemm(block, edge);
  const int steps = p - 1;
  const int phases = ar ? 2 : 1;  // the reduce-scatter, then GEMM-AR's all-gather
  auto id = [&](int i, int phase, int st, int P) {
    return ((i * phases + phase) * steps + st) * p + P;
  };
  DecomposeRound r(c, static_cast<std::size_t>(d * phases * steps * p), edge, edge_slow);
  std::vector<double> gemm_end(static_cast<std::size_t>(d * p), 0.0), land(p), arrived(p);
  o.total_s = decompose_fixed_point(r, [&] {
    auto gemms = [&](int i) {
      for (int P = 0; P < p; ++P) {
        r.compute(P, 0.0, in_copy);
        gemm_end[i * p + P] = r.gemm(P, 0.0, g);
      }
    };
    double total = 0;
    gemms(0);
    for (int i = 0; i < d; ++i) {
      // Step 0 leaves when part i's GEMM is done: before GEMM i+1, beside which it moves.
      for (int P = 0; P < p; ++P)
        land[P] = r.send(id(i, 0, 0, P), P, gemm_end[i * p + P], c.coll_launch);
      if (i + 1 < d) gemms(i + 1);
      for (int P = 0; P < p; ++P) r.compute(P, 0.0, own_copy);
      for (int st = 0; st < steps; ++st) {
        std::swap(arrived, land);
        for (int P = 0; P < p; ++P) {
          // Position P adds what its predecessor sent and forwards the sum at the next step.
          const double sum = r.compute(P, arrived[(P + p - 1) % p], add);
          if (st + 1 < steps) land[P] = r.send(id(i, 0, st + 1, P), P, sum, 0.0);
        }
      }
      if (!ar) continue;
      for (int P = 0; P < p; ++P)
        land[P] = r.send(id(i, 1, 0, P), P, r.compute_free(P), c.coll_launch);
      for (int st = 1; st < steps; ++st) {
        std::swap(arrived, land);
        for (int P = 0; P < p; ++P)
          land[P] = r.send(id(i, 1, st, P), P, arrived[(P + p - 1) % p], 0.0);
      }
      for (int P = 0; P < p; ++P) total = std::max(total, land[P]);
    }
    for (int P = 0; P < p; ++P) total = std::max(total, r.compute_free(P));
    return total;
  });
  return o;
}

}  // namespace

Outcome decompose(const Ctx& c, int d) {
  return c.op.kind == OpKind::ag_gemm ? decompose_ag(c, d) : decompose_rs(c, d);
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
