#include "compass/model/estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <numeric>
#include <tuple>
#include <span>
#include <utility>

#include "compass/hardware/rings.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
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

// Most rounds of the fused reduce-scatter ring's release/finish fixed point (it stops as soon
// as a round repeats the previous one bit for bit; a guard, not a tuning knob).
constexpr int kRingFixedPointRounds = 64;

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

// Adds `w` to `windows`, kept ascending by start (hardware::slowed_end reads them in order).
void insert_window(std::vector<Window>& windows, Window w) {
  windows.insert(std::upper_bound(windows.begin(), windows.end(), w,
                                  [](const Window& x, const Window& y) { return x.from < y.from; }),
                 w);
}

// Whether one of `gemms` (ascending, disjoint) is under way at `t`.
bool computing_at(const std::vector<Window>& gemms, double t) {
  const auto it = std::upper_bound(gemms.begin(), gemms.end(), t,
                                   [](double x, const Window& w) { return x < w.from; });
  return it != gemms.begin() && t < std::prev(it)->until;
}

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
  for (int iter = 0; iter < kRingFixedPointRounds; ++iter) {
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

// ---- IntraFusion, AG-GEMM --------------------------------------------------------------------

// When flow i of a run starts moving its bytes: its release, and not before the flows it waits
// for have finished (plus its gap), as run_released_flows starts it.
double bytes_start(const std::vector<TimedFlow>& flows, const std::vector<double>& finish,
                   std::size_t i) {
  const TimedFlow& f = flows[i];
  double t = f.release_s;
  if (f.after >= 0) t = std::max(t, finish[f.after] + f.gap_s);
  if (f.also_after >= 0) t = std::max(t, finish[f.also_after] + f.gap_s);
  return t;
}

// One rank's fused AG kernel as the schedule runs it: GEMM pieces of `rows` rows in order,
// piece i once its rows arrived (arrivals[i]); the first pays the kernel launch, each later one
// a flag wait (Task::launch); each advances at 1/fg while the rank's own transfers move data
// (`busy`, ascending by start: the proportional rule); the pieces share one GEMM's waves
// (Ctx::fused_chunk). Sets when each piece computes in `computing`; returns the kernel's end.
double fused_ag_gemms(const Ctx& c, const std::vector<double>& arrivals,
                      const std::vector<std::int64_t>& rows, const std::vector<Window>& busy,
                      std::vector<Window>* computing, double* compute_acc) {
  const workload::GemmShape s = workload::local_gemm(c.op);
  computing->clear();
  double t = 0;
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    const double from = std::max(t, arrivals[i]) + (i == 0 ? c.launch : c.flag_wait);
    const double work = c.fused_chunk(rows[i], s.n, s.k);
    *compute_acc += work;
    t = slowed_end(from, work, busy, c.fg);
    computing->push_back(Window{from, t});
  }
  return t;
}

// A fused AG's transfers and per-rank GEMMs, run to the fixed point of which transfers start
// beside a GEMM: `flows` (their bytes set as if every one did) run together; each rank's GEMM
// pieces follow from their arrivals (`arrivals(rank, finish)`) and its transfers' windows
// (flows are sent by `src_rank[i]` to `dst_rank[i]`, `bytes[i]` before any slowdown); then a
// transfer's bytes count fc times when a GEMM computes on either end as its bytes start. Stops
// when a round keeps every transfer's bytes. Returns the makespan; `compute_s` of rank 0.
double fused_ag_fixed_point(
    const Ctx& c, std::vector<TimedFlow>& flows, const std::vector<int>& src_rank,
    const std::vector<int>& dst_rank, const std::vector<double>& bytes,
    const std::vector<std::int64_t>& rows,
    const std::function<void(int, const std::vector<double>&, std::vector<double>*)>& arrivals,
    double* compute_s) {
  const int p = c.p;
  std::vector<std::vector<Window>> busy(p), computing(p);
  std::vector<double> arrive(rows.size(), 0.0);
  double total = 0;
  for (int iter = 0; iter < kRingFixedPointRounds; ++iter) {
    const std::vector<double> finish = run_released_flows(c.prof, flows, c.caches);
    for (std::vector<Window>& b : busy) b.clear();
    for (std::size_t i = 0; i < flows.size(); ++i)
      insert_window(busy[src_rank[i]], Window{bytes_start(flows, finish, i), finish[i]});
    total = 0;
    for (int q = 0; q < p; ++q) {
      arrivals(q, finish, &arrive);
      double acc = 0;
      total = std::max(total, fused_ag_gemms(c, arrive, rows, busy[q], &computing[q], &acc));
      if (q == 0) *compute_s = acc;
    }
    if (c.fc == 1.0) break;
    bool same = true;
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const double from = bytes_start(flows, finish, i);
      const bool beside = computing_at(computing[src_rank[i]], from) ||
                          computing_at(computing[dst_rank[i]], from);
      const double b = bytes[i] * (beside ? c.fc : 1.0);
      if (b != flows[i].bytes) same = false;
      flows[i].bytes = b;
    }
    if (same) break;
  }
  return total;
}

// Ring all-gather fused with the GEMM (one ring, or a double ring with half of every shard on
// each ring), as the schedule runs it: at step s the rank at ring position P forwards the
// shard (half) of ring[P - s] to its successor once it landed and its copy engine is free (one
// engine per ring, or both rings on engine 0 when a rank has one: Ctx::lanes_share_engine),
// and computes the rows that landed at step s - 1 (its own shard first).
Outcome fused_ag_ring(const Ctx& c, bool double_ring) {
  Outcome o;
  const int p = c.p;
  const std::int64_t shard_rows = workload::shard_rows(c.op);
  const double shard_bytes = static_cast<double>(shard_rows) * c.op.k * c.e;
  const StepTime st = double_ring ? c.dring_step(shard_bytes / 2) : c.ring_step(shard_bytes);
  o.comm_s = (p - 1) * st.time_s;
  o.bottleneck = st.bottleneck;
  const int lanes = double_ring ? 2 : 1;
  const std::int64_t half = double_ring ? ceil_div(shard_rows, 2) : shard_rows;
  const std::int64_t lane_rows[2] = {half, shard_rows - half};
  std::vector<int> pos[2], rank_at[2];
  for (int h = 0; h < lanes; ++h) {
    pos[h] = schedule::ring_positions(h == 0 ? c.ring_ranks : c.ring2_ranks);
    rank_at[h].assign(p, 0);
    for (int q = 0; q < p; ++q) rank_at[h][pos[h][q]] = q;
  }
  auto succ = [&](int h, int q) { return rank_at[h][(pos[h][q] + 1) % p]; };
  auto pred = [&](int h, int q) { return rank_at[h][(pos[h][q] + p - 1) % p]; };
  const bool shared = double_ring && c.lanes_share_engine();
  auto fid = [&](int k, int h, int q) { return (k * lanes + h) * p + q; };
  const int steps = p - 1;
  const auto n = static_cast<std::size_t>(steps * lanes * p);
  std::vector<TimedFlow> flows(n);
  std::vector<int> src(n), dst(n);
  std::vector<double> bytes(n);
  for (int k = 0; k < steps; ++k)
    for (int h = 0; h < lanes; ++h)
      for (int q = 0; q < p; ++q) {
        const int i = fid(k, h, q);
        TimedFlow& f = flows[i];
        src[i] = q;
        dst[i] = succ(h, q);
        f.src = c.gpus[q];
        f.dst = c.gpus[dst[i]];
        bytes[i] = static_cast<double>(lane_rows[h]) * c.op.k * c.e;
        f.bytes = bytes[i] * c.fc;
        f.release_s = c.copy_issue;
        f.gap_s = c.copy_issue;
        f.after = shared ? (h == 1 ? fid(k, 0, q) : (k > 0 ? fid(k - 1, 1, q) : -1))
                         : (k > 0 ? fid(k - 1, h, q) : -1);
        f.also_after = k > 0 ? fid(k - 1, h, pred(h, q)) : -1;  // the rows it forwards
      }
  // Own shard first (one GEMM), then per step the chunk (or both half-chunks) that landed.
  std::vector<std::int64_t> rows{shard_rows};
  for (int s = 1; s < p; ++s)
    for (int h = 0; h < lanes; ++h) rows.push_back(lane_rows[h]);
  const auto arrivals = [&](int q, const std::vector<double>& finish, std::vector<double>* out) {
    std::size_t i = 0;
    (*out)[i++] = 0.0;
    for (int s = 1; s < p; ++s)
      for (int h = 0; h < lanes; ++h) (*out)[i++] = finish[fid(s - 1, h, pred(h, q))];
  };
  o.total_s = fused_ag_fixed_point(c, flows, src, dst, bytes, rows, arrivals, &o.compute_s);
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
  std::vector<TimedFlow> flows;
  std::vector<int> src, dst, flow_of(static_cast<std::size_t>(p * p), -1);
  for (int r = 0; r < p; ++r) {
    std::vector<int> last_on_engine(static_cast<std::size_t>(c.engines), -1);
    for (int k = 1; k < p; ++k) {
      const int to = schedule::all2all_peer(r, k, p);
      const int engine = schedule::all2all_engine(k, c.engines);
      TimedFlow f;
      f.src = c.gpus[r];
      f.dst = c.gpus[to];
      f.bytes = shard_bytes * c.fc;
      f.release_s = c.copy_issue;
      f.after = last_on_engine[engine];
      f.gap_s = c.copy_issue;
      last_on_engine[engine] = static_cast<int>(flows.size());
      flow_of[r * p + to] = static_cast<int>(flows.size());
      src.push_back(r);
      dst.push_back(to);
      flows.push_back(f);
    }
  }
  const std::vector<double> bytes(flows.size(), shard_bytes);
  const std::vector<std::int64_t> rows(static_cast<std::size_t>(p), shard_rows);
  const auto arrivals = [&](int r, const std::vector<double>& finish, std::vector<double>* out) {
    (*out)[0] = 0.0;
    for (int k = 1; k < p; ++k) (*out)[k] = finish[flow_of[schedule::all2all_source(r, k, p) * p + r]];
  };
  o.total_s = fused_ag_fixed_point(c, flows, src, dst, bytes, rows, arrivals, &o.compute_s);
  if (c.details && p > 1) {
    const std::vector<double> alone = all2all_pushes(c, shard_bytes);
    o.comm_s = *std::max_element(alone.begin(), alone.end());
    all2all_congestion(c, shard_bytes, &o);
  }
  return o;
}

// ---- IntraFusion, GEMM-RS (and the reduce-scatter half of GEMM-AR) ---------------------------

// Ring reduce-scatter fused with the GEMM (one ring, or a double ring with half of every chunk
// on each ring): at step s the rank at ring position P computes the partial of the chunk owned
// by ring[P - s - 1], adds the running sum that arrived, and forwards it; at the last step the
// chunk is its own. Compute-stream order per step: (GEMM, add) per ring; the last step computes
// the whole own chunk, then adds both arrivals.
//
// Followed per rank (not in lock-step): the transfer on ring h from rank q leaves when q's add
// of that lane is done and q's previous transfer on that lane has finished, and takes that
// edge's time under the step's sharing (docs/model.md, "Model vs simulation"). Flow (k, h, q):
// rank q forwards on lane h after step k's add (k = 0..p-2); its finish time is the arrival at
// the lane's next rank. First guess: each edge's time under full sharing; then the compute
// recurrence gives release times, the flows run together with those releases (max-min, one
// copy engine per lane), and the two are iterated to a fixed point.
class FusedRsRing {
 public:
  FusedRsRing(const Ctx& c, bool double_ring)
      : c_(c), p_(c.p), lanes_(double_ring ? 2 : 1), steps_(c.p - 1),
        chunk_rows_(workload::max_row_share(c.op)),
        // GEMM-AR: the all-gather follows in the same pattern; flow (k, h, q) of it forwards
        // chunk half h on ring h at step k, each rank as soon as its own chunk is reduced
        // (k = 0) or the half arrived (k > 0), behind its reduce-scatter transfers on the same
        // copy engine.
        ar_(c.op.kind == OpKind::gemm_ar && c.p > 1),
        rs_flows_(std::max(0, steps_ * lanes_ * p_)),
        // With one copy engine both lanes queue on it (lane 0's transfer, then lane 1's, per
        // step).
        shared_(double_ring && c.lanes_share_engine()) {
    const workload::GemmShape s = workload::local_gemm(c.op);
    const double chunk_bytes = static_cast<double>(chunk_rows_) * c.op.n * c.e;
    const std::int64_t half = double_ring ? ceil_div(chunk_rows_, 2) : chunk_rows_;
    lane_rows_[0] = half;
    lane_rows_[1] = chunk_rows_ - half;
    step_ = double_ring ? c.dring_step(chunk_bytes / 2) : c.ring_step(chunk_bytes);
    // Rank index -> position on each ring, and each lane's per-edge time.
    const std::vector<double> all =
        p_ > 1 ? c.ring_edges(double_ring ? chunk_bytes / 2 : chunk_bytes, double_ring)
               : std::vector<double>{};
    for (int h = 0; h < lanes_; ++h) {
      pos_[h] = schedule::ring_positions(h == 0 ? c.ring_ranks : c.ring2_ranks);
      if (p_ > 1) edge_[h].assign(all.begin() + h * p_, all.begin() + (h + 1) * p_);
      rank_at_[h].assign(p_, 0);
      for (int q = 0; q < p_; ++q) rank_at_[h][pos_[h][q]] = q;
    }
    finish_.assign(static_cast<std::size_t>(ar_ ? 2 * rs_flows_ : rs_flows_), 0);
    ag_ready_.assign(static_cast<std::size_t>(lanes_ * p_), 0);
    release_.assign(finish_.size(), 0);
    t_.assign(p_, 0.0);
    // The same for every rank and step: computed once (gemm_compute_s is the costly part).
    chunk_gemm_ = c.fused_chunk(chunk_rows_, s.n, s.k);
    for (int h = 0; h < lanes_; ++h) {
      lane_gemm_[h] = c.fused_chunk(lane_rows_[h], s.n, s.k);
      lane_add_[h] = c.add(static_cast<double>(lane_rows_[h]) * c.op.n * c.e);
    }
    busy_.resize(p_);
    computing_.resize(p_);
  }

  Outcome run() {
    recurrence(true);
    std::vector<TimedFlow> flows, previous;
    // Iterated to the fixed point: a release depends only on earlier finishes, so the rounds
    // settle one event after another (the timeline oracle's grid needs up to
    // 29 rounds at tp 8 on the double ring; cutting at 3 rounds left the estimate up to 21% off
    // the schedule's timeline, docs/model.md, "Timeline oracle").
    for (int iter = 0; iter < kRingFixedPointRounds && steps_ > 0; ++iter) {
      round_flows(flows);
      // Converged: the same flows give the same finishes, and the recurrence then gives the
      // same releases, so every later round would repeat this one bit for bit.
      if (iter > 0 && same_timed_flows(flows, previous)) break;
      finish_ = run_released_flows(c_.prof, flows, c_.caches);
      recurrence(false);
      std::swap(flows, previous);
    }
    o_.total_s = *std::max_element(t_.begin(), t_.end());
    if (ar_) o_.total_s = std::max(o_.total_s, *std::max_element(finish_.begin(), finish_.end()));
    o_.comm_s = (p_ - 1) * step_.time_s;
    o_.bottleneck = step_.bottleneck;
    return o_;
  }

 private:
  int fid(int k, int h, int q) const { return (k * lanes_ + h) * p_ + q; }
  int gid(int k, int h, int q) const { return rs_flows_ + fid(k, h, q); }
  // The rank after and before q on ring h.
  int next(int h, int q) const { return rank_at_[h][(pos_[h][q] + 1) % p_]; }
  int prev(int h, int q) const { return rank_at_[h][(pos_[h][q] + p_ - 1) % p_]; }
  // The transfer that must finish before (k, h, q) starts on its copy engine, or -1.
  int after_of(int k, int h, int q) const {
    if (!shared_) return k > 0 ? fid(k - 1, h, q) : -1;
    return h == 1 ? fid(k, 0, q) : (k > 0 ? fid(k - 1, 1, q) : -1);
  }
  int ag_after_of(int k, int h, int q) const {
    if (!shared_) return k > 0 ? gid(k - 1, h, q) : fid(steps_ - 1, h, q);
    return h == 1 ? gid(k, 0, q) : (k > 0 ? gid(k - 1, 1, q) : fid(steps_ - 1, 1, q));
  }

  // GEMM work `w` on rank q's compute stream, which is free at `tq`: a fused kernel's first
  // GEMM pays the launch, each later one a flag wait.
  void compute(int q, double w, bool first, double& tq) {
    if (q == 0) o_.compute_s += w;
    const double from = tq + (first ? c_.launch : c_.flag_wait);
    tq = slowed_end(from, w, busy_[q], c_.fg);
    computing_[q].push_back(Window{from, tq});
  }

  // The compute recurrence: per rank, its GEMMs and adds in order, each add after its arrival
  // (finish_), giving the transfers' releases; on the first guess the transfers' finishes too.
  // Per rank: the windows in which its copy engines move data (its transfers from their bytes'
  // start to their landing), ascending by start; its GEMMs advance at 1/fg inside them (the
  // proportional rule, as the schedule's timeline and the simulator apply it); and when its
  // GEMMs compute (after their launch or flag wait), in order.
  void recurrence(bool first_guess) {
    for (std::vector<Window>& b : busy_) b.clear();
    for (std::vector<Window>& g : computing_) g.clear();
    std::fill(t_.begin(), t_.end(), 0.0);
    o_.compute_s = 0;
    for (int k = 0; k < p_; ++k) {
      const bool last = k + 1 == p_;
      for (int q = 0; q < p_; ++q) {
        double& tq = t_[q];
        if (last) compute(q, chunk_gemm_, k == 0, tq);
        for (int h = 0; h < lanes_; ++h) {
          if (!last) compute(q, lane_gemm_[h], k == 0 && h == 0, tq);
          if (k >= 1) {
            tq = std::max(tq, finish_[fid(k - 1, h, prev(h, q))]) + c_.flag_wait;
            if (q == 0) o_.compute_s += lane_add_[h];
            tq += lane_add_[h];
            if (last) ag_ready_[static_cast<std::size_t>(h * p_ + q)] = tq;
          }
          if (!last) forward(k, h, q, tq, first_guess);
        }
      }
    }
  }

  // Rank q forwards lane h's sum of step k, ready at `tq`: its release, and on the first guess
  // its finish (the edge alone, beside a GEMM).
  void forward(int k, int h, int q, double tq, bool first_guess) {
    const int f = fid(k, h, q);
    release_[f] = tq;
    const int a = after_of(k, h, q);
    const double bytes_from = std::max(tq, a >= 0 ? finish_[a] : 0.0) + c_.copy_issue;
    if (first_guess) finish_[f] = bytes_from + edge_[h][pos_[h][q]] * c_.fc;
    if (c_.fg != 1.0) insert_window(busy_[q], Window{bytes_from, std::max(bytes_from, finish_[f])});
  }

  // Rank q's transfer of lane h to rank `to`, ready at `ready`, behind flow `after` on its copy
  // engine. Beside a GEMM (one computing on either end as its bytes start) a transfer holds its
  // share longer: its bytes count fc times.
  TimedFlow ring_flow(int q, int to, int h, double ready, int after) const {
    TimedFlow f;
    f.src = c_.gpus[q];
    f.dst = c_.gpus[to];
    f.release_s = ready + c_.copy_issue;
    f.after = after;
    f.gap_s = c_.copy_issue;
    const double bytes_from =
        std::max(f.release_s, after >= 0 ? finish_[after] + c_.copy_issue : 0.0);
    const bool beside =
        computing_at(computing_[q], bytes_from) || computing_at(computing_[to], bytes_from);
    f.bytes = static_cast<double>(lane_rows_[h]) * c_.op.n * c_.e * (beside ? c_.fc : 1.0);
    return f;
  }

  // One round's flows from the releases and finishes of the previous one: the reduce-scatter's,
  // then GEMM-AR's all-gather.
  void round_flows(std::vector<TimedFlow>& flows) const {
    flows.assign(finish_.size(), TimedFlow{});
    for (int k = 0; k < steps_; ++k)
      for (int h = 0; h < lanes_; ++h)
        for (int q = 0; q < p_; ++q)
          flows[fid(k, h, q)] =
              ring_flow(q, next(h, q), h, release_[fid(k, h, q)], after_of(k, h, q));
    if (!ar_) return;
    for (int k = 0; k < steps_; ++k)
      for (int h = 0; h < lanes_; ++h)
        for (int q = 0; q < p_; ++q) {
          const double ready = k == 0 ? ag_ready_[static_cast<std::size_t>(h * p_ + q)]
                                      : finish_[gid(k - 1, h, prev(h, q))];
          flows[gid(k, h, q)] = ring_flow(q, next(h, q), h, ready, ag_after_of(k, h, q));
        }
  }

  const Ctx& c_;
  int p_, lanes_, steps_;
  std::int64_t chunk_rows_;
  bool ar_;
  int rs_flows_;
  bool shared_;
  std::int64_t lane_rows_[2] = {0, 0};
  StepTime step_;
  std::vector<int> pos_[2], rank_at_[2];  // rank -> position on ring h, and back
  std::vector<double> edge_[2];           // per position: its edge's time on ring h
  std::vector<double> finish_, ag_ready_, release_, t_;
  double chunk_gemm_ = 0, lane_gemm_[2] = {0, 0}, lane_add_[2] = {0, 0};
  std::vector<std::vector<Window>> busy_, computing_;
  Outcome o_;
};

Outcome fused_rs_ring(const Ctx& c, bool double_ring) { return FusedRsRing(c, double_ring).run(); }

// All-to-all: rank r computes the partials of chunks r+1, ..., r+p-1 (pushing each to its owner
// when done, on copy engine (k-1) mod engines, one push after another per engine) and then its
// own; after its GEMMs it adds the p-1 received partials in the order r-1, r-2, ... as they
// land. GEMM-AR: then it pushes its reduced chunk to every peer in the same pattern, behind its
// reduce-scatter pushes. Followed per rank like fused_rs_ring: the compute recurrence gives the
// pushes' releases, the pushes run together (run_released_flows), iterated to the fixed point.
Outcome fused_rs_all2all(const Ctx& c) {
  Outcome o;
  const workload::GemmShape s = workload::local_gemm(c.op);
  const int p = c.p;
  const std::int64_t chunk_rows = workload::max_row_share(c.op);
  const double chunk_bytes = static_cast<double>(chunk_rows) * c.op.n * c.e;
  const double g = c.fused_chunk(chunk_rows, s.n, s.k);
  const double add_work = c.add(chunk_bytes);
  o.compute_s = p * g + (p - 1) * add_work;
  const bool ar = c.op.kind == OpKind::gemm_ar && p > 1;
  // Push (r, k) of the reduce-scatter is flow r * (p-1) + k-1; the all-gather's follow.
  const int per = p - 1;
  const auto n = static_cast<std::size_t>((ar ? 2 : 1) * p * per);
  auto rs_id = [&](int r, int k) { return r * per + k - 1; };
  auto ag_id = [&](int r, int k) { return p * per + r * per + k - 1; };
  std::vector<int> after(n, -1), src(n), dst(n), flow_to(static_cast<std::size_t>(p * p), -1);
  for (int r = 0; r < p; ++r) {
    std::vector<int> last_on_engine(static_cast<std::size_t>(c.engines), -1);
    for (int phase = 0; phase < (ar ? 2 : 1); ++phase)
      for (int k = 1; k < p; ++k) {
        const int i = phase == 0 ? rs_id(r, k) : ag_id(r, k);
        const int engine = schedule::all2all_engine(k, c.engines);
        after[i] = last_on_engine[engine];
        last_on_engine[engine] = i;
        src[i] = r;
        dst[i] = schedule::all2all_peer(r, k, p);
        if (phase == 0) flow_to[r * p + dst[i]] = i;
      }
  }
  std::vector<double> release(n, 0), finish(n, 0), ends(p, 0);
  std::vector<std::vector<Window>> busy(p), computing(p);
  // The push i released at `t`: its bytes' start; the first guess times it alone.
  auto push = [&](int i, double t, bool first_guess, std::vector<Window>* windows) {
    release[i] = t;
    const double from = std::max(t, after[i] >= 0 ? finish[after[i]] : 0.0) + c.copy_issue;
    if (first_guess)
      finish[i] = from + transfer_time_s(c.prof, c.gpus[src[i]], c.gpus[dst[i]], chunk_bytes * c.fc);
    if (windows != nullptr) insert_window(*windows, Window{from, std::max(from, finish[i])});
  };
  auto recurrence = [&](bool first_guess) {
    for (int r = 0; r < p; ++r) {
      busy[r].clear();
      computing[r].clear();
      double t = 0;
      // A fused kernel: its first GEMM pays the launch, each later one a flag wait; slowed
      // while the rank's pushes move data (the proportional rule).
      auto gemm = [&](bool first) {
        const double from = t + (first ? c.launch : c.flag_wait);
        t = slowed_end(from, g, busy[r], c.fg);
        computing[r].push_back(Window{from, t});
      };
      for (int k = 1; k < p; ++k) {
        gemm(k == 1);
        push(rs_id(r, k), t, first_guess, &busy[r]);
      }
      gemm(p == 1);
      for (int k = 1; k < p; ++k)
        t = std::max(t, finish[flow_to[schedule::all2all_source(r, k, p) * p + r]]) +
            c.flag_wait + add_work;
      if (ar)
        for (int k = 1; k < p; ++k) push(ag_id(r, k), t, first_guess, nullptr);
      ends[r] = t;
    }
  };
  recurrence(true);
  std::vector<TimedFlow> flows, previous;
  for (int iter = 0; iter < kRingFixedPointRounds && p > 1; ++iter) {
    flows.assign(n, TimedFlow{});
    for (std::size_t i = 0; i < n; ++i) {
      TimedFlow& f = flows[i];
      f.src = c.gpus[src[i]];
      f.dst = c.gpus[dst[i]];
      f.release_s = release[i] + c.copy_issue;
      f.after = after[i];
      f.gap_s = c.copy_issue;
      // Beside a GEMM (one computing on either end as its bytes start): bytes count fc times.
      const double from = std::max(f.release_s, f.after >= 0 ? finish[f.after] + c.copy_issue : 0.0);
      const bool beside =
          computing_at(computing[src[i]], from) || computing_at(computing[dst[i]], from);
      f.bytes = chunk_bytes * (beside ? c.fc : 1.0);
    }
    if (iter > 0 && same_timed_flows(flows, previous)) break;
    finish = run_released_flows(c.prof, flows, c.caches);
    recurrence(false);
    std::swap(flows, previous);
  }
  o.total_s = *std::max_element(ends.begin(), ends.end());
  if (ar) o.total_s = std::max(o.total_s, *std::max_element(finish.begin(), finish.end()));
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
  detail::TreeCosts tc{c.launch, c.copy_issue, c.flag_wait, c.fg, c.fc, c.details};
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
