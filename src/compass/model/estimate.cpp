#include "compass/model/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <utility>

#include "compass/hardware/rings.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/model/program.hpp"
#include "compass/schedule/comm_order.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/tree_estimate.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::model {

using hardware::add_s;
using hardware::copy_issue_s;
using hardware::copy_s;
using hardware::fused_chunk_compute_s;
using hardware::gemm_slowdown;
using hardware::slowed_end;
using hardware::transfer_issue_s;
using hardware::Window;

using schedule::StrategyKind;
using workload::OpKind;

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Most rounds of decompose's fixed point (it stops as soon as a round repeats the previous one;
// a guard, not a tuning knob).
constexpr int kDecomposeFixedPointRounds = 64;

// Everything one evaluation needs: shapes, GPUs of the rings, and the costs under the knobs.
struct Ctx {
  const hardware::Profile& prof;
  const workload::OperatorSpec& op;
  Caches& caches;
  ModelKnobs knobs;
  bool details = false;         // also compute comm alone, bottleneck and congestion (slower)
  int p = 1;
  double e = 2;                 // bytes per element
  std::vector<int> gpus;        // GPU of each rank
  std::vector<int> ring;        // GPU order of the one-way ring
  std::vector<int> ring2;       // GPU order of the second ring
  std::vector<int> ring_ranks, ring2_ranks;  // the same rings in rank numbers
  int engines = 2;              // copy engines per rank
  const schedule::CommPlan& plan;
  double launch = 0, coll_launch = 0, copy_issue = 0, flag_wait = 0;
  double fg = 1, fc = 1;        // interference factors (transfers run on copy engines)
  double fg_nccl = 1;           // GEMM beside NCCL-style collectives (sequential, decompose)

  Ctx(const hardware::Profile& pr, const workload::OperatorSpec& o,
      const schedule::CommPlan& plan, ModelKnobs k, Caches& ca)
      : prof(pr), op(o), caches(ca), knobs(k), p(o.tp), e(dtype_bytes(o.dtype)), gpus(plan.gpus),
        engines(std::max(1, plan.copy_engines)), plan(plan) {
    for (int r : plan.ring) ring.push_back(gpus[r]);
    for (int r : plan.ring2) ring2.push_back(gpus[r]);
    if (ring2.empty()) ring2.assign(ring.rbegin(), ring.rend());
    ring_ranks = plan.ring;
    ring2_ranks = plan.ring2;
    if (ring2_ranks.empty()) ring2_ranks.assign(ring_ranks.rbegin(), ring_ranks.rend());
    if (k.overheads) {
      launch = pr.overheads.kernel_launch_s;
      coll_launch = pr.overheads.collective_launch_s;
      copy_issue = pr.overheads.copy_launch_s;
      flag_wait = pr.overheads.flag_wait_s;
    }
    if (k.interference && p > 1) {
      fg = gemm_slowdown(pr, true, p);
      fg_nccl = gemm_slowdown(pr, false, p);
      fc = pr.interference.comm_slowdown_beside_gemm;
    }
  }

  // GEMM work without launch (the model of one GEMM's tiles).
  double gemm(std::int64_t m, std::int64_t n, std::int64_t k) const {
    return hardware::gemm_compute_s(prof, m, n, k, op.dtype, gpus.front());
  }
  // A chunk of `rows` rows inside a fused kernel computing all M rows (model::
  // fused_chunk_compute_s: the kernel's chunks share one GEMM's waves).
  double fused_chunk(std::int64_t rows, std::int64_t n, std::int64_t k) const {
    return fused_chunk_compute_s(prof, rows, op.m, n, k, op.dtype, gpus.front());
  }
  // Reduction of a received partial into the local one: read both, write one.
  double add(double bytes) const { return add_s(prof, gpus.front(), bytes); }
  // `count` local copy tasks moving `bytes` in all (staging, own shard): each is one issued
  // copy (hardware::copy_issue_s, as the executors issue them and the simulator charges them).
  double copies(int count, double bytes) const {
    return count * copy_issue + copy_s(prof, gpus.front(), bytes);
  }
  // One step of the one-way ring: every rank sends `bytes` to its successor.
  StepTime ring_step(double bytes) const {
    return cached_ring_step_time(prof, ring, nullptr, bytes, caches);
  }
  StepTime dring_step(double bytes_each) const {
    return cached_ring_step_time(prof, ring, &ring2, bytes_each, caches);
  }
  // The double ring's two lanes share copy engine 0 when a rank has only one (the generator's
  // engine of the second ring, schedule/generate.cpp): their transfers run one after the other.
  bool lanes_share_engine() const { return engines < 2; }
  // Per-edge durations (latency included) of one ring step whose flows all share the links at
  // once: entry i is ring[i] -> ring[i+1]; with `both`, ring2's edges follow (p + i). Ranks are
  // not in lock-step, so a rank behind a fast edge is not paced by the slowest one.
  std::vector<double> ring_edges(double bytes_each, bool both) const {
    std::vector<TimedFlow> flows;
    for (const std::vector<int>* r : {&ring, both ? &ring2 : nullptr}) {
      if (r == nullptr) continue;
      const std::size_t n = r->size();
      for (std::size_t i = 0; i < n; ++i) {
        TimedFlow f;
        f.src = (*r)[i];
        f.dst = (*r)[(i + 1) % n];
        f.bytes = bytes_each;
        flows.push_back(f);
      }
    }
    return cached_released_flows(prof, flows, caches);
  }
  // ring_edges(bytes_each * fc, false) from ring_edges(bytes_each, false): every flow's bytes
  // count fc times, so its data time scales by fc and its route latency does not (the scaling
  // cached_released_flows applies).
  std::vector<double> ring_edges_beside_gemm(const std::vector<double>& edges) const {
    if (fc == 1.0) return edges;
    std::vector<double> out(edges.size());
    for (std::size_t i = 0; i < edges.size(); ++i) {
      const double lat = prof.route_latency_s(ring[i], ring[(i + 1) % ring.size()]);
      out[i] = lat + (edges[i] - lat) * fc;
    }
    return out;
  }
};

struct Outcome {
  double total_s = 0;
  double compute_s = 0;  // the compute stream's work (GEMMs, adds, copies) on the slowest rank
  double comm_s = 0;     // the communication alone
  std::string bottleneck;
  std::vector<std::string> congested;
};

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
  const std::vector<double> edge = p > 1 ? c.ring_edges(block, false) : std::vector<double>{};
  const std::vector<double> edge_slow =
      p > 1 ? c.ring_edges_beside_gemm(edge) : edge;
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
  const std::vector<double> edge = c.ring_edges(block, false);
  const std::vector<double> edge_slow = c.ring_edges_beside_gemm(edge);
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

Outcome decompose(const Ctx& c, int d) {
  return c.op.kind == OpKind::ag_gemm ? decompose_ag(c, d) : decompose_rs(c, d);
}

// ---- IntraFusion: the fused strategies' programs ----------------------------------------------

// A fused strategy's program (model/program.hpp) followed under the context's costs, every
// transfer moving `row_bytes` per row.
detail::Followed follow(const Ctx& c, detail::FusedProgram& pr, double row_bytes) {
  detail::prepare_program(pr, c.prof, c.gpus, row_bytes);
  return detail::follow_program(pr, {c.launch, c.copy_issue, c.flag_wait, c.fg, c.fc}, true,
                                c.caches.tables().following);
}

// The ranks around one or two rings (Ctx::ring_ranks, ring2_ranks), the rows each lane moves
// per step (a block of `rows`, halved on the double ring) and the engine each lane's transfers
// queue on, as the generator issues them (schedule/generate.cpp).
class RingLanes {
 public:
  RingLanes(const Ctx& c, bool double_ring, std::int64_t rows)
      : p_(c.p), lanes_(double_ring ? 2 : 1),
        // With one copy engine both lanes queue on it (lane 0's transfer, then lane 1's, per
        // step).
        shared_(double_ring && c.lanes_share_engine()) {
    rows_[0] = double_ring ? ceil_div(rows, 2) : rows;
    rows_[1] = rows - rows_[0];
    for (int h = 0; h < lanes_; ++h) {
      pos_[h] = schedule::ring_positions(h == 0 ? c.ring_ranks : c.ring2_ranks);
      rank_at_[h].assign(p_, 0);
      for (int q = 0; q < p_; ++q) rank_at_[h][pos_[h][q]] = q;
    }
  }
  int lanes() const { return lanes_; }
  std::int64_t rows(int h) const { return rows_[h]; }
  // The communication alone, (p-1) ring steps of the block of `bytes`, and its bottleneck.
  static void comm_alone(const Ctx& c, bool double_ring, double bytes, Outcome& o) {
    const StepTime st = double_ring ? c.dring_step(bytes / 2) : c.ring_step(bytes);
    o.comm_s = (c.p - 1) * st.time_s;
    o.bottleneck = st.bottleneck;
  }
  // The rank after and before q on ring h.
  int next(int h, int q) const { return rank_at_[h][(pos_[h][q] + 1) % p_]; }
  int prev(int h, int q) const { return rank_at_[h][(pos_[h][q] + p_ - 1) % p_]; }
  // Transfer (k, h, q) of a phase whose transfers start at index `base`: rank q's on lane h at
  // step k.
  int id(int base, int k, int h, int q) const { return base + (k * lanes_ + h) * p_ + q; }
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

// Ring all-gather fused with the GEMM (one ring, or a double ring with half of every shard on
// each ring), as the schedule runs it: at step k the rank at ring position P forwards the
// shard (half) of ring[P - k] to its successor once it landed and its copy engine is free (one
// engine per ring, or both rings on engine 0 when a rank has one: Ctx::lanes_share_engine),
// and computes its own shard first, then per step the rows that landed.
Outcome fused_ag_ring(const Ctx& c, bool double_ring) {
  Outcome o;
  const int p = c.p;
  const std::int64_t shard_rows = workload::shard_rows(c.op);
  RingLanes::comm_alone(c, double_ring, static_cast<double>(shard_rows) * c.op.k * c.e, o);
  const RingLanes ring(c, double_ring, shard_rows);
  const workload::GemmShape s = workload::local_gemm(c.op);
  const double own_gemm = c.fused_chunk(shard_rows, s.n, s.k);
  const double lane_gemm[2] = {c.fused_chunk(ring.rows(0), s.n, s.k),
                               c.fused_chunk(ring.rows(1), s.n, s.k)};
  detail::FusedProgram pr;
  pr.items.resize(p);
  for (int q = 0; q < p; ++q) {
    pr.items[q].push_back({false, own_gemm, -1});
    for (int k = 1; k < p; ++k)
      for (int h = 0; h < ring.lanes(); ++h)
        pr.items[q].push_back({false, lane_gemm[h], ring.id(0, k - 1, h, ring.prev(h, q))});
  }
  for (int k = 0; k + 1 < p; ++k)
    for (int h = 0; h < ring.lanes(); ++h)
      for (int q = 0; q < p; ++q)
        pr.sends.push_back({q, ring.next(h, q), ring.after(0, k, h, q, -1, 0), -1,
                            k > 0 ? ring.id(0, k - 1, h, ring.prev(h, q)) : -1, ring.rows(h)});
  const detail::Followed f = follow(c, pr, c.op.k * c.e);
  o.total_s = f.end_s;
  o.compute_s = f.work_s;
  return o;
}

// All-to-all pushes as the schedule issues them, every one ready at once (the communication
// alone): rank r sends to r+k on copy engine (k-1) mod engines, one transfer after another per
// engine, each after a copy issue. Returns finish times indexed [src * p + dst] (route latency
// included).
std::vector<double> all2all_pushes(const Ctx& c, double bytes) {
  std::vector<TimedFlow> flows;
  std::vector<int> flow_of(static_cast<std::size_t>(c.p * c.p), -1);
  std::vector<int> queue_pos;
  for (int r = 0; r < c.p; ++r) {
    std::vector<int> last_on_engine(static_cast<std::size_t>(c.engines), -1);
    for (int k = 1; k < c.p; ++k) {
      const int dst = schedule::all2all_peer(r, k, c.p);
      const int engine = schedule::all2all_engine(k, c.engines);
      TimedFlow f{c.gpus[r], c.gpus[dst], bytes, 0.0, last_on_engine[engine], 0.0};
      last_on_engine[engine] = static_cast<int>(flows.size());
      flow_of[r * c.p + dst] = static_cast<int>(flows.size());
      queue_pos.push_back((k - 1) / c.engines);
      flows.push_back(f);
    }
  }
  // The chained flows scale exactly with their size, so one cached run per pattern serves all
  // sizes; the copy issue before each push of an engine queue is added afterwards (it shifts
  // that queue by one issue per push).
  std::vector<double> fin = cached_released_flows(c.prof, flows, c.caches);
  for (std::size_t i = 0; i < fin.size(); ++i) fin[i] += (queue_pos[i] + 1) * c.copy_issue;
  std::vector<double> out(static_cast<std::size_t>(c.p * c.p), 0);
  for (std::size_t i = 0; i < out.size(); ++i)
    if (flow_of[i] >= 0) out[i] = fin[flow_of[i]];
  return out;
}

// Link directions the all-to-all exchange of `block` bytes per pair loads beyond the busiest
// direction of the one-way ring all-gather of the same data (the plan's ring), busiest first.
void all2all_congestion(const Ctx& c, double block, Outcome* o) {
  // Loads are linear in the bytes, so the answer depends on the pattern only: cache it.
  std::vector<double> key;
  for (const hardware::Link& l : c.prof.links)
    key.insert(key.end(), {l.bandwidth_bytes_per_s, l.reverse_bandwidth_bytes_per_s});
  key.push_back(-1);
  for (int g : c.gpus) key.push_back(g);
  key.push_back(-1);
  for (int g : c.ring) key.push_back(g);
  auto& cache = c.caches.tables().congestion;
  if (auto it = cache.find(key); it != cache.end()) {
    o->bottleneck = it->second.bottleneck;
    o->congested = it->second.congested;
    return;
  }
  std::vector<hardware::Flow> a2a;
  for (int s = 0; s < c.p; ++s)
    for (int d = 0; d < c.p; ++d)
      if (s != d) a2a.push_back({c.gpus[s], c.gpus[d], block});
  std::vector<hardware::Flow> ring;
  for (int i = 0; i < c.p; ++i)
    ring.push_back({c.ring[i], c.ring[(i + 1) % c.p], block * (c.p - 1)});
  const hardware::FlowOutcome ra = hardware::run_flows(c.prof, a2a);
  const hardware::FlowOutcome rr = hardware::run_flows(c.prof, ring);
  const double ring_busy = rr.loads.empty() ? 0.0 : rr.loads.front().busy_s;
  detail::Congestion found;
  if (!ra.loads.empty()) found.bottleneck = ra.loads.front().name;
  found.congested = hardware::congested_beyond(ra.loads, ring_busy);
  o->bottleneck = found.bottleneck;
  o->congested = found.congested;
  if (cache.size() > 1024) cache.clear();
  cache.emplace(std::move(key), std::move(found));
}

// All-to-all: rank r pushes its shard to r+k on copy engine (k-1) mod engines (one push after
// another per engine), computes its own shard, then the shard of r-k for k = 1..p-1, each when
// it landed.
Outcome fused_ag_all2all(const Ctx& c) {
  Outcome o;
  const int p = c.p;
  const std::int64_t shard_rows = workload::shard_rows(c.op);
  const double shard_bytes = static_cast<double>(shard_rows) * c.op.k * c.e;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const double g = c.fused_chunk(shard_rows, s.n, s.k);
  detail::FusedProgram pr;
  std::vector<int> flow_to(static_cast<std::size_t>(p * p), -1);
  for (int r = 0; r < p; ++r) {
    std::vector<int> last_on_engine(static_cast<std::size_t>(c.engines), -1);
    for (int k = 1; k < p; ++k) {
      const int to = schedule::all2all_peer(r, k, p);
      int& last = last_on_engine[schedule::all2all_engine(k, c.engines)];
      pr.sends.push_back({r, to, last, -1, -1, shard_rows});
      last = flow_to[r * p + to] = static_cast<int>(pr.sends.size()) - 1;
    }
  }
  pr.items.resize(p);
  for (int r = 0; r < p; ++r) {
    pr.items[r].push_back({false, g, -1});
    for (int k = 1; k < p; ++k)
      pr.items[r].push_back({false, g, flow_to[schedule::all2all_source(r, k, p) * p + r]});
  }
  const detail::Followed f = follow(c, pr, c.op.k * c.e);
  o.total_s = f.end_s;
  o.compute_s = f.work_s;
  if (c.details && p > 1) {
    const std::vector<double> alone = all2all_pushes(c, shard_bytes);
    o.comm_s = *std::max_element(alone.begin(), alone.end());
    all2all_congestion(c, shard_bytes, &o);
  }
  return o;
}

// ---- IntraFusion, GEMM-RS (and the reduce-scatter half of GEMM-AR) ---------------------------

// Ring reduce-scatter fused with the GEMM (one ring, or a double ring with half of every chunk
// on each ring): at step k the rank at ring position P computes the partial of the chunk owned
// by ring[P - k - 1], adds the running sum that arrived, and forwards it; at the last step the
// chunk is its own. Compute-stream order per step: (GEMM, add) per ring; the last step computes
// the whole own chunk, then adds both arrivals. GEMM-AR: the all-gather follows in the same
// pattern, each rank forwarding chunk half h on ring h as soon as its own chunk's half is
// reduced (k = 0) or the half arrived (k > 0), behind its reduce-scatter transfers on the same
// copy engine.
Outcome fused_rs_ring(const Ctx& c, bool double_ring) {
  Outcome o;
  const int p = c.p;
  const std::int64_t chunk_rows = workload::max_row_share(c.op);
  RingLanes::comm_alone(c, double_ring, static_cast<double>(chunk_rows) * c.op.n * c.e, o);
  const RingLanes ring(c, double_ring, chunk_rows);
  const int lanes = ring.lanes();
  const workload::GemmShape s = workload::local_gemm(c.op);
  const double chunk_gemm = c.fused_chunk(chunk_rows, s.n, s.k);
  double lane_gemm[2], lane_add[2];
  for (int h = 0; h < 2; ++h) {
    lane_gemm[h] = c.fused_chunk(ring.rows(h), s.n, s.k);
    lane_add[h] = c.add(static_cast<double>(ring.rows(h)) * c.op.n * c.e);
  }
  const bool ar = c.op.kind == OpKind::gemm_ar && p > 1;
  const int steps = p - 1;
  const int ag_base = steps * lanes * p;  // the all-gather's first transfer
  detail::FusedProgram pr;
  pr.items.resize(p);
  pr.sends.resize(static_cast<std::size_t>((ar ? 2 : 1) * ag_base));
  for (int q = 0; q < p; ++q) {
    std::vector<detail::FusedProgram::Item>& items = pr.items[q];
    for (int k = 0; k < p; ++k) {
      const bool last = k + 1 == p;
      if (last) items.push_back({false, chunk_gemm, -1});
      for (int h = 0; h < lanes; ++h) {
        if (!last) items.push_back({false, lane_gemm[h], -1});
        if (k >= 1) items.push_back({true, lane_add[h], ring.id(0, k - 1, h, ring.prev(h, q))});
        const int ready = static_cast<int>(items.size()) - 1;
        if (!last) {
          pr.sends[ring.id(0, k, h, q)] = {q, ring.next(h, q), ring.after(0, k, h, q, -1, 0),
                                           ready, -1, ring.rows(h)};
        } else if (ar) {
          pr.sends[ring.id(ag_base, 0, h, q)] = {
              q, ring.next(h, q), ring.after(ag_base, 0, h, q, 0, steps - 1), ready, -1,
              ring.rows(h)};
        }
      }
    }
    if (ar)
      for (int k = 1; k < steps; ++k)
        for (int h = 0; h < lanes; ++h)
          pr.sends[ring.id(ag_base, k, h, q)] = {
              q, ring.next(h, q), ring.after(ag_base, k, h, q, 0, steps - 1), -1,
              ring.id(ag_base, k - 1, h, ring.prev(h, q)), ring.rows(h)};
  }
  const detail::Followed f = follow(c, pr, c.op.n * c.e);
  o.total_s = f.end_s;
  o.compute_s = f.work_s;
  return o;
}

// All-to-all: rank r computes the partials of chunks r+1, ..., r+p-1 (pushing each to its owner
// when done, on copy engine (k-1) mod engines, one push after another per engine) and then its
// own; after its GEMMs it adds the p-1 received partials in the order r-1, r-2, ... as they
// land. GEMM-AR: then it pushes its reduced chunk to every peer in the same pattern, behind its
// reduce-scatter pushes.
Outcome fused_rs_all2all(const Ctx& c) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t chunk_rows = workload::max_row_share(c.op);
  const double chunk_bytes = static_cast<double>(chunk_rows) * c.op.n * c.e;
  const double g = c.fused_chunk(chunk_rows, s.n, s.k);
  const double add_work = c.add(chunk_bytes);
  const bool ar = c.op.kind == OpKind::gemm_ar && p > 1;
  detail::FusedProgram pr;
  pr.items.resize(p);
  std::vector<int> flow_to(static_cast<std::size_t>(p * p), -1);
  std::vector<std::vector<int>> last_on_engine(
      p, std::vector<int>(static_cast<std::size_t>(c.engines), -1));
  auto push = [&](int r, int k, int ready_item) {
    const int to = schedule::all2all_peer(r, k, p);
    int& last = last_on_engine[r][schedule::all2all_engine(k, c.engines)];
    pr.sends.push_back({r, to, last, ready_item, -1, chunk_rows});
    last = static_cast<int>(pr.sends.size()) - 1;
    return last;
  };
  for (int r = 0; r < p; ++r)
    for (int k = 1; k < p; ++k) {
      pr.items[r].push_back({false, g, -1});
      flow_to[r * p + schedule::all2all_peer(r, k, p)] =
          push(r, k, static_cast<int>(pr.items[r].size()) - 1);
    }
  for (int r = 0; r < p; ++r) {
    pr.items[r].push_back({false, g, -1});
    for (int k = 1; k < p; ++k)
      pr.items[r].push_back({true, add_work, flow_to[schedule::all2all_source(r, k, p) * p + r]});
    if (ar)
      for (int k = 1; k < p; ++k) push(r, k, static_cast<int>(pr.items[r].size()) - 1);
  }
  const detail::Followed f = follow(c, pr, c.op.n * c.e);
  o.total_s = f.end_s;
  o.compute_s = f.work_s;
  if (c.details && p > 1) {
    const std::vector<double> alone = all2all_pushes(c, chunk_bytes);
    o.comm_s = *std::max_element(alone.begin(), alone.end());
    all2all_congestion(c, chunk_bytes, &o);
  }
  return o;
}

// GEMM-AR fused: the fused reduce-scatter, then an all-gather of the reduced chunks in the same
// pattern (nothing left to overlap it with).
Outcome fused_ar(const Ctx& c, StrategyKind kind) {
  Outcome o = kind == StrategyKind::fuse_all2all
                  ? fused_rs_all2all(c)
                  : fused_rs_ring(c, kind == StrategyKind::fuse_double_ring);
  if (c.p <= 1) return o;
  const std::int64_t chunk_rows = workload::max_row_share(c.op);
  const double chunk_bytes = static_cast<double>(chunk_rows) * c.op.n * c.e;
  // The all-gather is part of the reduce-scatter's timeline (each rank forwards its chunk as
  // soon as it is reduced); here only its time alone.
  double alone = 0;
  if (kind == StrategyKind::fuse_all2all) {
    const std::vector<double> fin = all2all_pushes(c, chunk_bytes);
    alone = *std::max_element(fin.begin(), fin.end());
  } else {
    const bool dr = kind == StrategyKind::fuse_double_ring;
    alone = (c.p - 1) * (dr ? c.dring_step(chunk_bytes / 2) : c.ring_step(chunk_bytes)).time_s;
  }
  o.comm_s += alone;
  return o;
}

// fuse:hier and fuse:synth (model/tree_estimate.hpp).
Outcome fused_tree(const Ctx& c, const schedule::TreePlan& tp) {
  detail::TreeCosts tc{{c.launch, c.copy_issue, c.flag_wait, c.fg, c.fc}, c.details};
  const detail::TreeOutcome t = detail::tree_estimate(c.prof, c.op, tp, c.plan, tc, c.caches);
  Outcome o;
  o.total_s = t.total_s;
  o.compute_s = t.compute_s;
  o.comm_s = t.comm_s;
  o.bottleneck = t.bottleneck;
  return o;
}

Outcome evaluate(const Ctx& c, const schedule::Strategy& st) {
  switch (st.kind) {
    case StrategyKind::fuse_hier: return fused_tree(c, c.plan.hier);
    case StrategyKind::fuse_synth: return fused_tree(c, c.plan.synth);
    case StrategyKind::sequential: return decompose(c, 1);
    case StrategyKind::decompose: return decompose(c, st.parts);
    case StrategyKind::fuse_all2all:
    case StrategyKind::fuse_ring:
    case StrategyKind::fuse_double_ring:
      if (c.op.kind == OpKind::ag_gemm) {
        return st.kind == StrategyKind::fuse_all2all
                   ? fused_ag_all2all(c)
                   : fused_ag_ring(c, st.kind == StrategyKind::fuse_double_ring);
      }
      if (c.op.kind == OpKind::gemm_rs) {
        return st.kind == StrategyKind::fuse_all2all
                   ? fused_rs_all2all(c)
                   : fused_rs_ring(c, st.kind == StrategyKind::fuse_double_ring);
      }
      return fused_ar(c, st.kind);
  }
  return {};
}

Status check_inputs(const hardware::Profile& p, const workload::OperatorSpec& op,
                    const schedule::Strategy& strategy, const schedule::CommPlan& plan) {
  COMPASS_TRY(workload::validate(op));
  const auto n = static_cast<std::size_t>(op.tp);
  if (plan.gpus.size() != n)
    return make_error("comm plan has {} ranks but tp is {}", plan.gpus.size(), op.tp);
  if (plan.ring.size() != n || (!plan.ring2.empty() && plan.ring2.size() != n))
    return make_error("comm plan rings must list all {} ranks", op.tp);
  for (int r : plan.ring)
    if (r < 0 || r >= op.tp) return make_error("comm plan ring names rank {} (tp {})", r, op.tp);
  for (int r : plan.ring2)
    if (r < 0 || r >= op.tp) return make_error("comm plan ring2 names rank {} (tp {})", r, op.tp);
  for (int g : plan.gpus)
    if (g < 0 || g >= p.gpu_count())
      return make_error("GPU {} does not exist on '{}' ({} GPUs)", g, p.name, p.gpu_count());
  if (strategy.kind == StrategyKind::fuse_hier || strategy.kind == StrategyKind::fuse_synth) {
    const schedule::TreePlan& tp =
        strategy.kind == StrategyKind::fuse_hier ? plan.hier : plan.synth;
    if (Status st = schedule::validate_tree_plan(tp, op.tp); !st.ok())
      return make_error("comm plan: {}: {}", schedule::to_string(strategy), st.error().message);
  }
  if (strategy.kind == StrategyKind::decompose) {
    const std::int64_t rows = workload::rows_per_rank(op);
    if (strategy.parts < 1 || rows % strategy.parts != 0)
      return make_error("decompose:{}: the parts must divide the {} rows each rank owns",
                        strategy.parts, rows);
  }
  return Status::success();
}

}  // namespace

Result<double> estimate_time_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                               const schedule::Strategy& strategy, const schedule::CommPlan& plan,
                               const ModelKnobs& knobs, Caches& caches) {
  COMPASS_TRY(check_inputs(p, op, strategy, plan));
  return evaluate(Ctx(p, op, plan, knobs, caches), strategy).total_s;
}

Result<double> estimate_time_s(const hardware::Profile& p, const workload::OperatorSpec& op,
                               const schedule::Strategy& strategy, const schedule::CommPlan& plan,
                               const ModelKnobs& knobs) {
  Caches caches;
  return estimate_time_s(p, op, strategy, plan, knobs, caches);
}

Result<Estimate> estimate(const hardware::Profile& p, const workload::OperatorSpec& op,
                          const schedule::Strategy& strategy, const schedule::CommPlan& plan) {
  Caches caches;
  return estimate(p, op, strategy, plan, caches);
}

Result<Estimate> estimate(const hardware::Profile& p, const workload::OperatorSpec& op,
                          const schedule::Strategy& strategy, const schedule::CommPlan& plan,
                          Caches& caches) {
  COMPASS_TRY(check_inputs(p, op, strategy, plan));
  Ctx full_ctx(p, op, plan, {true, true}, caches);
  full_ctx.details = true;
  const Outcome full = evaluate(full_ctx, strategy);
  const double no_interf = evaluate(Ctx(p, op, plan, {false, true}, caches), strategy).total_s;
  const Outcome bare = evaluate(Ctx(p, op, plan, {false, false}, caches), strategy);
  Estimate e;
  e.strategy = strategy;
  e.total_s = full.total_s;
  e.compute_s = bare.compute_s;
  e.interference_s = full.total_s - no_interf;
  e.overhead_s = no_interf - bare.total_s;
  e.exposed_comm_s = std::max(0.0, bare.total_s - bare.compute_s);
  // Rounding can leave a sliver; keep the parts summing to the total.
  e.compute_s = e.total_s - e.interference_s - e.overhead_s - e.exposed_comm_s;
  e.comm_s = full.comm_s;
  e.bottleneck = full.bottleneck;
  e.congested = full.congested;
  return e;
}

Result<std::vector<std::string>> all2all_congested_links(const hardware::Profile& p,
                                                         const workload::OperatorSpec& op,
                                                         const schedule::CommPlan& plan,
                                                         Caches& caches) {
  COMPASS_TRY(check_inputs(p, op, schedule::Strategy{StrategyKind::fuse_all2all, 0}, plan));
  const Ctx c(p, op, plan, {true, true}, caches);
  if (c.p <= 1) return std::vector<std::string>{};
  const double cols = op.kind == OpKind::ag_gemm ? op.k : op.n;
  Outcome o;
  all2all_congestion(c, static_cast<double>(workload::max_row_share(op)) * cols * c.e, &o);
  return o.congested;
}

DecomposeParts decompose_parts(const hardware::Profile& p, const workload::OperatorSpec& op,
                               int d, const schedule::CommPlan& plan, Caches& caches) {
  COMPASS_CHECK(d >= 1 && workload::rows_per_rank(op) % d == 0, "decompose_parts: bad degree {}", d);
  const Ctx c(p, op, plan, {true, true}, caches);
  DecomposeParts dp;
  const workload::GemmShape s = workload::local_gemm(op);
  const std::int64_t part_rows = op.m / d;
  const bool staged = d > 1 && c.p > 1;
  const CollectiveCosts cc = collective_costs(c, part_rows);
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
