// The strategy estimates (estimate.hpp): the fused strategies follow their program
// (schedule/program.hpp, model/program.hpp), the tree patterns through tree_estimate.cpp,
// sequential and decompose:d in decompose.cpp; the compute work and the communication alone
// from one evaluation, the split of the rest from two more under the knobs.

#include "compass/model/estimate.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "compass/hardware/rings.hpp"
#include "compass/model/estimate_ctx.hpp"
#include "compass/model/program.hpp"
#include "compass/model/tree_estimate.hpp"
#include "compass/schedule/comm_order.hpp"
#include "compass/schedule/patterns.hpp"
#include "compass/schedule/program.hpp"

namespace compass::model {

using schedule::StrategyKind;
using workload::OpKind;

namespace {

using detail::Ctx;
using detail::decompose;
using detail::Outcome;

// ---- IntraFusion: the fused strategies' programs ----------------------------------------------

// The strategy's program (schedule::program) priced and followed under the context's costs,
// and with `comm_alone` also without GEMM, adds, overheads or interference (the communication
// alone, as the tree patterns' estimate gives it). The prepared program is kept per operator,
// strategy and plan, and the answer per program and costs (cache_tables.hpp, TreeMemo): a hit
// returns the bits a fresh follow would.
detail::Followed follow(const Ctx& c, StrategyKind kind, double* comm_alone = nullptr) {
  detail::TreeMemo& memo = detail::memo_for(c.caches.tables().trees, c.prof);
  std::vector<std::uint64_t> key = {0,
                                    static_cast<std::uint64_t>(kind),
                                    static_cast<std::uint64_t>(c.op.kind),
                                    static_cast<std::uint64_t>(c.op.dtype),
                                    static_cast<std::uint64_t>(c.op.m),
                                    static_cast<std::uint64_t>(c.op.n),
                                    static_cast<std::uint64_t>(c.op.k),
                                    static_cast<std::uint64_t>(c.plan.copy_engines)};
  for (const std::vector<int>* v : {&c.plan.gpus, &c.plan.ring, &c.plan.ring2}) {
    key.push_back(v->size());
    for (int x : *v) key.push_back(static_cast<std::uint64_t>(x));
  }
  detail::seal_key(key);
  const detail::FollowCosts costs =
      detail::fused_follow_costs(c.prof, c.p, c.knobs.overheads, c.knobs.interference);
  std::vector<std::uint64_t> result_key = key;
  for (double x : {costs.launch, costs.copy_issue, costs.flag_wait, costs.fg, costs.fc})
    result_key.push_back(detail::key_bits(x));
  detail::seal_key(result_key);
  const auto found = memo.fused_results.find(result_key);
  if (found != memo.fused_results.end() && comm_alone == nullptr)
    return {found->second.first, found->second.second};
  std::shared_ptr<const detail::FusedProgram> program;
  for (const auto& [k, pr] : memo.fused_programs)
    if (k == key) program = pr;
  if (!program) {
    // The program reads the operator's kind, rows and ranks and the plan, never what only
    // prices its items (N and K but for the row bytes, the dtype but for them): built, routed
    // and prepared once per structure (TreeMemo::skeletons, as the tree patterns' are), priced
    // per operator.
    const double row_bytes = schedule::program_row_bytes(c.op);
    // (Its second word sets it apart from the tree patterns' structure keys.)
    std::vector<std::uint64_t> structure_key = {0,
                                                ~std::uint64_t{0},
                                                static_cast<std::uint64_t>(kind),
                                                static_cast<std::uint64_t>(c.op.kind),
                                                static_cast<std::uint64_t>(c.op.m),
                                                static_cast<std::uint64_t>(c.op.tp),
                                                detail::key_bits(row_bytes)};
    structure_key.insert(structure_key.end(), key.begin() + 8, key.end());  // engines, rings
    structure_key.push_back(static_cast<std::uint64_t>(c.plan.copy_engines));
    detail::seal_key(structure_key);
    program = detail::program_by_structure(
        memo, structure_key,
        [&] {
          return schedule::program(c.op, {kind, 0}, c.plan);
        },
        c.prof, c.op, c.gpus, row_bytes);
    constexpr std::size_t kPrograms = 4;
    if (memo.fused_programs.size() >= kPrograms)
      memo.fused_programs.erase(memo.fused_programs.begin());
    memo.fused_programs.emplace_back(key, program);
  }
  if (comm_alone != nullptr)
    *comm_alone =
        detail::follow_program(*program, detail::FollowCosts{}, false, c.caches.tables().following)
            .end_s;
  if (found != memo.fused_results.end()) return {found->second.first, found->second.second};
  const detail::Followed f =
      detail::follow_program(*program, costs, true, c.caches.tables().following);
  constexpr std::size_t kResults = 4096;  // bounds the memo (the planner's working set is less)
  if (memo.fused_results.size() >= kResults) memo.fused_results.clear();
  memo.fused_results.emplace(std::move(result_key), std::make_pair(f.end_s, f.work_s));
  return f;
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

// fuse:ring, fuse:double-ring and fuse:all2all: the program followed, and with details the
// communication alone (the same program without compute, overheads or interference), the
// ring's bottleneck link (its step alone) or the all-to-all's congestion.
Outcome fused(const Ctx& c, StrategyKind kind) {
  Outcome o;
  const bool ag = c.op.kind == OpKind::ag_gemm;
  const std::int64_t rows = ag ? workload::shard_rows(c.op) : workload::max_row_share(c.op);
  const double bytes = static_cast<double>(rows) * (ag ? c.op.k : c.op.n) * c.e;
  const bool all2all = kind == StrategyKind::fuse_all2all;
  const bool dr = kind == StrategyKind::fuse_double_ring;
  const detail::Followed f = follow(c, kind, c.details ? &o.comm_s : nullptr);
  o.total_s = f.end_s;
  o.compute_s = f.work_s;
  if (!c.details || c.p <= 1) return o;
  if (all2all) {
    all2all_congestion(c, bytes, &o);
  } else {
    o.bottleneck = (dr ? c.dring_step(bytes / 2) : c.ring_step(bytes)).bottleneck;
  }
  return o;
}

// fuse:hier and fuse:synth (model/tree_estimate.hpp).
Outcome fused_tree(const Ctx& c, const schedule::TreePlan& tp) {
  detail::TreeCosts tc{
      detail::fused_follow_costs(c.prof, c.p, c.knobs.overheads, c.knobs.interference),
      c.details};
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
      return fused(c, st.kind);
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
  COMPASS_ASSIGN(Estimate e, estimate_without_split(p, op, strategy, plan, caches));
  const double no_interf = evaluate(Ctx(p, op, plan, {false, true}, caches), strategy).total_s;
  const double bare = evaluate(Ctx(p, op, plan, {false, false}, caches), strategy).total_s;
  e.interference_s = e.total_s - no_interf;
  e.overhead_s = no_interf - bare;
  e.exposed_comm_s = std::max(0.0, bare - e.compute_s);
  return e;
}

Result<Estimate> estimate_without_split(const hardware::Profile& p,
                                        const workload::OperatorSpec& op,
                                        const schedule::Strategy& strategy,
                                        const schedule::CommPlan& plan, Caches& caches,
                                        bool communication) {
  COMPASS_TRY(check_inputs(p, op, strategy, plan));
  Ctx full_ctx(p, op, plan, {true, true}, caches);
  full_ctx.details = communication;
  const Outcome full = evaluate(full_ctx, strategy);
  Estimate e;
  e.strategy = strategy;
  e.total_s = full.total_s;
  e.compute_s = full.compute_s;  // the work alone, whatever the knobs (Outcome)
  if (!communication) return e;
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

}  // namespace compass::model
