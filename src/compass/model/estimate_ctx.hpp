#pragma once
// What the strategy estimates share inside the model (model/estimate.cpp, decompose.cpp): one
// evaluation's shapes, rings and costs under the knobs, and its outcome. Used only by the
// model's own .cpp files.

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/model/estimate.hpp"
#include "compass/schedule/collective_program.hpp"

namespace compass::model::detail {

// Everything one evaluation needs: shapes, GPUs of the rings, and the costs under the knobs.
struct Ctx {
  const hardware::Profile& prof;
  const workload::OperatorSpec& op;
  Caches& caches;
  ModelKnobs knobs;
  bool details = false;         // also compute comm alone, bottleneck and congestion (slower)
  int p = 1;
  double e = 2;                 // bytes per element
  const std::vector<int>& gpus;  // GPU of each rank (the plan's)
  std::vector<int> ring;        // GPU order of the one-way ring
  std::vector<int> ring2;       // GPU order of the second ring
  int engines = 2;              // copy engines per rank
  const schedule::CommPlan& plan;
  double launch = 0, coll_launch = 0, copy_issue = 0, flag_wait = 0;
  double fg = 1, fc = 1;        // interference factors (transfers run on copy engines)
  double fg_nccl = 1;           // GEMM beside NCCL-style collectives (sequential, decompose)

  Ctx(const hardware::Profile& pr, const workload::OperatorSpec& o,
      const schedule::CommPlan& plan, ModelKnobs k, Caches& ca)
      : prof(pr), op(o), caches(ca), knobs(k), p(o.tp), e(dtype_bytes(o.dtype)), gpus(plan.gpus),
        engines(std::max(1, plan.copy_engines)), plan(plan) {
    ring.reserve(plan.ring.size());
    for (int r : plan.ring) ring.push_back(gpus[r]);
    if (plan.ring2.empty()) {
      ring2.assign(ring.rbegin(), ring.rend());
    } else {
      ring2.reserve(plan.ring2.size());
      for (int r : plan.ring2) ring2.push_back(gpus[r]);
    }
    if (k.overheads) {
      launch = pr.overheads.kernel_launch_s;
      coll_launch = pr.overheads.collective_launch_s;
      copy_issue = pr.overheads.copy_launch_s;
      flag_wait = pr.overheads.flag_wait_s;
    }
    if (k.interference && p > 1) {
      fg = hardware::gemm_slowdown(pr, true, p);
      fg_nccl = hardware::gemm_slowdown(pr, false, p);
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
    return hardware::fused_chunk_compute_s(prof, rows, op.m, n, k, op.dtype, gpus.front());
  }
  // Reduction of a received partial into the local one: read both, write one.
  double add(double bytes) const { return hardware::add_s(prof, gpus.front(), bytes); }
  // `count` local copy tasks moving `bytes` in all (staging, own shard): each is one issued
  // copy (hardware::copy_issue_s, as the executors issue them and the simulator charges them).
  double copies(int count, double bytes) const { return count * copy_issue + copy_work(bytes); }
  // The same copies' work alone, without their issue (what copies() is with overheads off).
  double copy_work(double bytes) const { return hardware::copy_s(prof, gpus.front(), bytes); }
  // One step of the one-way ring: every rank sends `bytes` to its successor.
  StepTime ring_step(double bytes) const {
    return cached_ring_step_time(prof, ring, nullptr, bytes, caches);
  }
  StepTime dring_step(double bytes_each) const {
    return cached_ring_step_time(prof, ring, &ring2, bytes_each, caches);
  }
  // One ring step's transfers: every rank sends `bytes_each` to its successor on the ring;
  // entry i is ring[i] -> ring[i+1].
  std::vector<TimedFlow> ring_flows(double bytes_each) const {
    std::vector<TimedFlow> flows;
    for (std::size_t i = 0; i < ring.size(); ++i)
      flows.push_back(TimedFlow{ring[i], ring[(i + 1) % ring.size()], bytes_each});
    return flows;
  }
  // Per-edge durations (latency included) of one ring step whose flows all start at once, each
  // waiting out its latency before its bytes share the links (latency_first_flows), indexed as
  // ring_flows. Ranks are not in lock-step, so a rank behind a fast edge is not paced by the
  // slowest one.
  std::vector<double> ring_edges(double bytes_each) const {
    return latency_first_flows(prof, ring_flows(bytes_each), caches);
  }
  // ring_edges(bytes_each * fc), given `edges` = ring_edges(bytes_each): every flow's bytes
  // count fc times. With the same latency on every edge its data time scales by fc and its
  // route latency does not (the scaled run of latency_first_flows); otherwise the step is
  // run again.
  std::vector<double> ring_edges_beside_gemm(double bytes_each,
                                             const std::vector<double>& edges) const {
    if (fc == 1.0) return edges;
    if (!same_latencies(prof, ring_flows(bytes_each))) return ring_edges(bytes_each * fc);
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
  double compute_s = 0;  // the compute stream's work (GEMMs, adds, copies) on the slowest rank,
                         // without overheads or interference whatever the knobs
  double comm_s = 0;     // the communication alone
  std::string bottleneck;
  std::vector<std::string> congested;
};

/// sequential (d = 1) and decompose:d (model/decompose.cpp): their program followed.
Outcome decompose(const Ctx& c, int d);

/// A sequential or decompose:d program with what following it needs besides prices: its steps
/// in follow order, each with its price class (steps of one role, rows and copies cost the
/// same) and its rank's ring position, and per rank its successor and its sends in follow
/// order.
struct PreparedCollective {
  /// One step as the follower reads it.
  struct Op {
    int step, cls, rank;
    int at;                   ///< its rank's ring position
    std::array<int, 2> wait;  ///< the steps it waits for (-1: none)
    schedule::CollectiveProgram::Role role;
    bool launches;            ///< a send at ring step 0: pays the collective's launch
  };
  schedule::CollectiveProgram program;
  std::vector<Op> ops;  ///< in follow order
  std::vector<int> succ;
  std::vector<std::vector<int>> sends;
  std::vector<schedule::CollectiveProgram::Step> classes;  ///< one step of each class
};

/// `program`, built along `ring` (plan.ring), prepared for following.
PreparedCollective prepare_collective(schedule::CollectiveProgram program,
                                      const std::vector<int>& ring);

/// The makespan of a prepared sequential or decompose:d program (schedule::collective_program)
/// of c.op along c.plan.ring, followed under c's prices and knobs, as decompose() follows it;
/// with `start_s` / `end_s`, per step (in the program's steps' order) when its resource took it
/// and when it ended. The timeline follows a schedule that is this program's lowering with it.
double follow_collectives(const Ctx& c, const PreparedCollective& pc,
                          std::vector<double>* start_s = nullptr,
                          std::vector<double>* end_s = nullptr);

}  // namespace compass::model::detail
