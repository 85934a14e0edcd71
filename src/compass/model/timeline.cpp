#include "compass/model/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "compass/hardware/flows.hpp"
#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/caches.hpp"
#include "compass/model/estimate_ctx.hpp"
#include "compass/model/program.hpp"
#include "compass/schedule/prices.hpp"
#include "compass/schedule/program.hpp"

namespace compass::model {

using schedule::ResourceKind;
using schedule::TaskKind;

namespace {

// What a task does after its fixed cost (launch, issue or flag wait).
enum class Work : std::uint8_t { gemm, flow, local };
// Where a task is: waiting for deps or its resource, paying its fixed cost, computing, moving
// bytes, waiting out its route latency, doing a local memory operation, finished.
enum class Phase : std::uint8_t { waiting, fixed, gemm, flow, latency, local, done };

struct Cost {
  Work work = Work::local;
  double fixed_s = 0;   // launch / issue / flag wait, before the work
  double gemm_s = 0;    // GEMM work at full speed
  double bytes = 0;     // transfer bytes (before the slowdown beside a GEMM)
  double latency_s = 0; // transfer route latency, before the bytes (as the simulator)
  double local_s = 0;   // copy / add / same-GPU transfer time
  bool copy_engine = false;
  int rank = 0, src_rank = 0, dst_rank = 0;
};

// The model's price of every task: schedule::task_prices, the rule the simulator reads too,
// with the fixed costs switched off without overheads.
Result<std::vector<Cost>> price(const hardware::Profile& p, const schedule::Schedule& s,
                                const ModelKnobs& knobs) {
  COMPASS_ASSIGN(const std::vector<schedule::TaskPrice> prices, schedule::task_prices(p, s));
  const double oh = knobs.overheads ? 1.0 : 0.0;
  std::vector<Cost> out(s.tasks.size());
  for (const schedule::Task& t : s.tasks) {
    const schedule::TaskPrice& pr = prices[static_cast<std::size_t>(t.id)];
    Cost& c = out[static_cast<std::size_t>(t.id)];
    c.rank = t.resource.rank;
    c.copy_engine = t.resource.kind == ResourceKind::copy_engine;
    c.fixed_s = oh * pr.fixed_s;
    if (t.kind == TaskKind::gemm) {
      c.work = Work::gemm;
      c.gemm_s = pr.gemm_s;
      continue;
    }
    c.src_rank = s.owner(t.src);
    c.dst_rank = s.owner(t.dst);
    if (pr.crosses) {
      c.work = Work::flow;
      c.bytes = static_cast<double>(pr.bytes);
      c.latency_s = p.route_latency_s(s.gpus[static_cast<std::size_t>(c.src_rank)],
                                      s.gpus[static_cast<std::size_t>(c.dst_rank)]);
      continue;
    }
    c.work = Work::local;
    c.local_s = pr.local_s;
  }
  return out;
}

class Run {
 public:
  Run(const hardware::Profile& p, const schedule::Schedule& s, const ModelKnobs& knobs,
      std::vector<Cost> costs)
      : s_(s), costs_(std::move(costs)) {
    const std::size_t n = s.tasks.size();
    if (knobs.interference && s.ranks() > 1) {
      // GEMMs in fused kernels run beside copy engines, the others beside collectives on SMs.
      const bool fused_gemms =
          std::any_of(s.tasks.begin(), s.tasks.end(), schedule::in_fused_kernel);
      fg_ = hardware::gemm_slowdown(p, fused_gemms, s.ranks());
      fc_ = std::max(1.0, p.interference.comm_slowdown_beside_gemm);
    }
    lanes_ = schedule::resource_lanes(s);
    lane_next_.assign(lanes_.tasks.size(), 0);
    lane_busy_.assign(lanes_.tasks.size(), 0);
    deps_left_.assign(n, 0);
    dependents_.resize(n);
    for (const schedule::Task& t : s.tasks) {
      deps_left_[t.id] = static_cast<int>(t.deps.size());
      for (int d : t.deps) dependents_[static_cast<std::size_t>(d)].push_back(t.id);
    }
    phase_.assign(n, Phase::waiting);
    until_.assign(n, 0);
    remaining_.assign(n, 0);
    out_.start_s.assign(n, 0);
    out_.end_s.assign(n, 0);
    copies_.assign(static_cast<std::size_t>(s.ranks()), 0);
    gemms_on_.assign(static_cast<std::size_t>(s.ranks()), 0);
    // One flow path per task (empty for tasks that move nothing between GPUs).
    cap_ = hardware::sharing::dir_capacities(p);
    for (const schedule::Task& t : s.tasks) {
      const Cost& c = costs_[static_cast<std::size_t>(t.id)];
      if (c.work == Work::flow) {
        const std::vector<int> dirs = hardware::sharing::route_dirs(
            p, s.gpus[static_cast<std::size_t>(c.src_rank)], s.gpus[static_cast<std::size_t>(c.dst_rank)]);
        paths_.dirs.insert(paths_.dirs.end(), dirs.begin(), dirs.end());
      }
      paths_.offset.push_back(static_cast<int>(paths_.dirs.size()));
    }
    sharing_.reset(cap_, paths_);
  }

  Result<Timeline> run() {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    for (const std::vector<int>& lane : lanes_.tasks)
      if (!lane.empty()) candidates_.push_back(lane.front());
    start_candidates();
    const std::size_t n = s_.tasks.size();
    while (done_ < n) {
      double next = kInf;
      for (int t : timed_) next = std::min(next, until_[t]);
      for (int t : gemms_) next = std::min(next, now_ + remaining_[t] * gemm_factor(t));
      const std::vector<double>* rate = nullptr;
      if (!sharing_.active().empty()) {
        rate = &sharing_.rates();
        for (int f : sharing_.active())
          if ((*rate)[f] > 0) next = std::min(next, now_ + remaining_[f] / (*rate)[f]);
      }
      if (!(next < kInf))
        return make_error("timeline: {} of {} tasks can never finish (a transfer over a link "
                          "with no bandwidth)", n - done_, n);
      const double dt = std::max(0.0, next - now_);
      ended_.clear();
      for (int t : gemms_) {
        remaining_[t] -= dt / gemm_factor(t);
        if (remaining_[t] <= 1e-9 * costs_[t].gemm_s) ended_.push_back(t);
      }
      if (rate != nullptr)
        for (int f : sharing_.active()) {
          remaining_[f] -= (*rate)[f] * dt;
          if (remaining_[f] <= 1e-9 * costs_[f].bytes) ended_.push_back(f);
        }
      now_ = next;
      for (int t : timed_)
        if (until_[t] <= now_) ended_.push_back(t);
      std::sort(ended_.begin(), ended_.end());
      for (int t : ended_) advance(t);
      start_candidates();
    }
    out_.makespan_s = n == 0 ? 0.0 : *std::max_element(out_.end_s.begin(), out_.end_s.end());
    return out_;
  }

 private:
  // Seconds per second of GEMM work: fg while the rank's copy engines move data.
  double gemm_factor(int t) const {
    return copies_[static_cast<std::size_t>(costs_[t].rank)] > 0 ? fg_ : 1.0;
  }

  void drop(std::vector<int>& v, int t) {
    auto it = std::find(v.begin(), v.end(), t);
    *it = v.back();
    v.pop_back();
  }
  void timed(int t, Phase ph, double duration) {
    phase_[t] = ph;
    until_[t] = now_ + duration;
    timed_.push_back(t);
  }

  // Moves task t past the phase that just ended.
  void advance(int t) {
    const Cost& c = costs_[static_cast<std::size_t>(t)];
    switch (phase_[t]) {
      case Phase::fixed:
        drop(timed_, t);
        if (c.work == Work::gemm) {
          phase_[t] = Phase::gemm;
          remaining_[t] = c.gemm_s;
          ++gemms_on_[static_cast<std::size_t>(c.rank)];
          gemms_.push_back(t);  // zero work ends at the next event, at once
        } else if (c.work == Work::flow) {
          // The copy engine moves data from here on; beside a GEMM at either end the bytes
          // count fc times (the model's and the simulator's rule).
          ++copies_[static_cast<std::size_t>(c.rank)];
          const bool beside = gemms_on_[static_cast<std::size_t>(c.src_rank)] > 0 ||
                              gemms_on_[static_cast<std::size_t>(c.dst_rank)] > 0;
          remaining_[t] = c.bytes * (beside ? fc_ : 1.0);
          // Its route's latency first, then its bytes (the simulator's order).
          timed(t, Phase::latency, c.latency_s);
        } else {
          if (c.copy_engine) ++copies_[static_cast<std::size_t>(c.rank)];
          timed(t, Phase::local, c.local_s);
        }
        break;
      case Phase::gemm:
        drop(gemms_, t);
        --gemms_on_[static_cast<std::size_t>(c.rank)];
        finish(t);
        break;
      case Phase::latency:
        drop(timed_, t);
        if (remaining_[t] > 0) {
          phase_[t] = Phase::flow;
          sharing_.add(t);
          break;
        }
        if (c.copy_engine) --copies_[static_cast<std::size_t>(c.rank)];
        finish(t);
        break;
      case Phase::flow:
        sharing_.remove(t);
        if (c.copy_engine) --copies_[static_cast<std::size_t>(c.rank)];
        finish(t);
        break;
      case Phase::local:
        drop(timed_, t);
        if (c.copy_engine) --copies_[static_cast<std::size_t>(c.rank)];
        finish(t);
        break;
      case Phase::waiting:
      case Phase::done:
        break;
    }
  }

  void finish(int t) {
    phase_[t] = Phase::done;
    out_.end_s[t] = now_;
    ++done_;
    const int lane = lanes_.lane_of[t];
    lane_busy_[lane] = 0;
    const std::vector<int>& order = lanes_.tasks[lane];
    if (++lane_next_[lane] < order.size()) candidates_.push_back(order[lane_next_[lane]]);
    for (int d : dependents_[static_cast<std::size_t>(t)])
      if (--deps_left_[d] == 0) candidates_.push_back(d);
  }

  // Starts every candidate that is ready: deps done, first unfinished task of its free lane.
  // Lowest id first, as schedule::issue_order.
  void start_candidates() {
    while (!candidates_.empty()) {
      std::sort(candidates_.begin(), candidates_.end());
      candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
      std::vector<int> now_ready;
      now_ready.swap(candidates_);
      for (int t : now_ready) {
        const int lane = lanes_.lane_of[t];
        if (phase_[t] != Phase::waiting || deps_left_[t] != 0 || lane_busy_[lane] ||
            lanes_.tasks[lane][lane_next_[lane]] != t)
          continue;
        lane_busy_[lane] = 1;
        out_.start_s[t] = now_;
        timed(t, Phase::fixed, costs_[static_cast<std::size_t>(t)].fixed_s);
      }
    }
  }

  const schedule::Schedule& s_;
  std::vector<Cost> costs_;
  double fg_ = 1, fc_ = 1;
  schedule::ResourceLanes lanes_;
  std::vector<std::size_t> lane_next_;
  std::vector<char> lane_busy_;
  std::vector<int> deps_left_;
  std::vector<std::vector<int>> dependents_;
  std::vector<Phase> phase_;
  std::vector<double> until_, remaining_;
  std::vector<int> copies_, gemms_on_;  // per rank: copy-engine tasks moving data, GEMMs running
  std::vector<int> timed_, gemms_, candidates_, ended_;
  std::vector<double> cap_;
  hardware::sharing::FlatPaths paths_;
  hardware::sharing::IncrementalMaxmin sharing_;
  double now_ = 0;
  std::size_t done_ = 0;
  Timeline out_;
};

// Whether every task of `s` is started as a fused program's follower charges it: a rank's
// first GEMM launches its fused kernel, its later GEMMs and its adds wait on a flag, transfers
// are issued copies.
bool launched_as_program(const schedule::Schedule& s) {
  std::vector<char> launched(static_cast<std::size_t>(s.ranks()), 0);
  for (const schedule::Task& t : s.tasks) {
    schedule::Launch want = schedule::Launch::copy;
    if (t.kind == TaskKind::gemm) {
      char& first = launched[static_cast<std::size_t>(t.resource.rank)];
      want = first ? schedule::Launch::flag_wait : schedule::Launch::fused_kernel;
      first = 1;
    } else if (t.kind == TaskKind::add) {
      want = schedule::Launch::flag_wait;
    }
    if (t.launch != want) return false;
  }
  return true;
}

// A schedule that is one fused program (schedule::program_of), followed as the estimate
// follows the strategy's program: the same prices (model::detail::price_program), costs
// (fused_follow_costs) and follower.
Timeline follow_schedule(const hardware::Profile& p, const schedule::Schedule& s,
                         const schedule::Program& program, const ModelKnobs& knobs) {
  detail::FusedProgram pr = detail::price_program(program, p, s.op, s.gpus.front());
  detail::prepare_program(pr, p, s.gpus, schedule::program_row_bytes(s.op));
  hardware::sharing::IncrementalMaxmin sharing;
  detail::FollowedTimes times;
  const detail::Followed f = detail::follow_program(
      pr, detail::fused_follow_costs(p, s.ranks(), knobs.overheads, knobs.interference), true,
      sharing, &times);
  Timeline out;
  out.makespan_s = f.end_s;
  out.start_s.assign(s.tasks.size(), 0.0);
  out.end_s.assign(s.tasks.size(), 0.0);
  // The program's steps in task order (schedule::program_of): transfers in list order, items
  // per rank in list order.
  std::size_t send = 0;
  std::vector<std::size_t> item(static_cast<std::size_t>(s.ranks()), 0);
  for (const schedule::Task& t : s.tasks) {
    if (t.kind == TaskKind::transfer) {
      out.start_s[t.id] = times.send_start_s[send];
      out.end_s[t.id] = times.send_end_s[send++];
    } else {
      const std::size_t v = static_cast<std::size_t>(t.resource.rank);
      const std::size_t at = pr.item_base[v] + item[v]++;
      out.start_s[t.id] = times.item_start_s[at];
      out.end_s[t.id] = times.item_end_s[at];
    }
  }
  return out;
}

// The ring a sequential or decompose:d schedule's transfers travel: every rank sends to one
// successor, and following them from rank 0 visits every rank once. Nothing otherwise.
std::optional<std::vector<int>> ring_of(const schedule::Schedule& s) {
  const int p = s.ranks();
  std::vector<int> succ(static_cast<std::size_t>(p), -1);
  for (const schedule::Task& t : s.tasks) {
    if (t.kind != TaskKind::transfer) continue;
    int& to = succ[static_cast<std::size_t>(s.owner(t.src))];
    if (to >= 0 && to != s.owner(t.dst)) return std::nullopt;
    to = s.owner(t.dst);
  }
  std::vector<int> ring{0};
  std::vector<char> seen(static_cast<std::size_t>(p), 0);
  seen[0] = 1;
  for (int k = 1; k < p; ++k) {
    const int next = succ[static_cast<std::size_t>(ring.back())];
    if (next < 0 || seen[static_cast<std::size_t>(next)]) return std::nullopt;
    seen[static_cast<std::size_t>(next)] = 1;
    ring.push_back(next);
  }
  return ring;
}

// A sequential or decompose:d schedule that is its program's lowering along its own ring (what
// generate() builds), followed as the estimate follows the program: the same follower
// (detail::follow_collectives) under the same prices. Nothing when the schedule is not one.
std::optional<Timeline> follow_collective_schedule(const hardware::Profile& p,
                                                   const schedule::Schedule& s,
                                                   const ModelKnobs& knobs) {
  const std::optional<std::vector<int>> ring = ring_of(s);
  if (!ring) return std::nullopt;
  schedule::CommPlan plan;
  plan.gpus = s.gpus;
  plan.ring = *ring;
  plan.ring2.assign(ring->rbegin(), ring->rend());
  plan.copy_engines = std::max(1, s.copy_engines);
  const Result<schedule::Schedule> lowered = schedule::generate(s.op, s.strategy, plan);
  if (!lowered.ok() || !(*lowered == s)) return std::nullopt;
  const detail::PreparedCollective pc =
      detail::prepare_collective(schedule::collective_program(s.op, s.strategy, plan), plan.ring);
  const schedule::CollectiveProgram& pr = pc.program;
  Caches caches;
  const detail::Ctx c(p, s.op, plan, knobs, caches);
  std::vector<double> start, end;
  Timeline out;
  out.makespan_s = detail::follow_collectives(c, pc, &start, &end);
  // The program's steps in task order; a step of several copies is split evenly among them.
  out.start_s.reserve(s.tasks.size());
  out.end_s.reserve(s.tasks.size());
  for (std::size_t k = 0; k < pr.steps.size(); ++k) {
    const int n = pr.steps[k].tasks();
    const double each = (end[k] - start[k]) / n;
    for (int j = 0; j < n; ++j) {
      out.start_s.push_back(start[k] + j * each);
      out.end_s.push_back(j + 1 == n ? end[k] : start[k] + (j + 1) * each);
    }
  }
  return out;
}

// What every timeline needs of the schedule and the machine: that it runs there, and that its
// deps and resource orders do not deadlock.
Status check(const hardware::Profile& p, const schedule::Schedule& s) {
  COMPASS_TRY(schedule::check_on_machine(p, s));
  COMPASS_TRY(schedule::issue_order(s));
  return Status::success();
}

// `s` (checked) task by task.
Result<Timeline> run_tasks(const hardware::Profile& p, const schedule::Schedule& s,
                           const ModelKnobs& knobs) {
  COMPASS_ASSIGN(std::vector<Cost> costs, price(p, s, knobs));
  Run run(p, s, knobs, std::move(costs));
  return run.run();
}

}  // namespace

Result<Timeline> evaluate_task_timeline(const hardware::Profile& p, const schedule::Schedule& s,
                                        const ModelKnobs& knobs) {
  COMPASS_TRY(check(p, s));
  return run_tasks(p, s, knobs);
}

Result<Timeline> evaluate_timeline(const hardware::Profile& p, const schedule::Schedule& s,
                                   const ModelKnobs& knobs) {
  COMPASS_TRY(check(p, s));
  if ((s.strategy.kind == schedule::StrategyKind::sequential ||
       s.strategy.kind == schedule::StrategyKind::decompose) &&
      !s.tasks.empty())
    if (std::optional<Timeline> t = follow_collective_schedule(p, s, knobs); t.has_value()) {
      if (std::isfinite(t->makespan_s)) return *t;
      return make_error("timeline: the schedule can never finish (a transfer over a link with "
                        "no bandwidth)");
    }
  if (schedule::is_fused(s.strategy.kind) && !s.tasks.empty() && launched_as_program(s))
    if (auto program = schedule::program_of(s); program.ok()) {
      Timeline t = follow_schedule(p, s, *program, knobs);
      if (!std::isnan(t.makespan_s)) return t;
      return make_error("timeline: the schedule can never finish (a transfer over a link with "
                        "no bandwidth)");
    }
  return run_tasks(p, s, knobs);
}

}  // namespace compass::model
