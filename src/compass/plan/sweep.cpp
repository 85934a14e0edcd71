#include "compass/plan/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "compass/core/workers.hpp"

namespace compass::plan {

using workload::OpKind;

using schedule::StrategyKind;

Distribution distribution(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int>(values.size());
  d.min = values.front();
  d.max = values.back();
  const std::size_t n = values.size();
  d.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(n);
  return d;
}

SweepSummary summarise(const std::vector<SweepRow>& rows) {
  SweepSummary s;
  for (const char* k : {"sequential", "decompose", "fuse:all2all", "fuse:ring", "fuse:double-ring",
                        "fuse:hier", "fuse:synth"})
    s.wins[k] = 0;
  std::vector<double> dr, d4, worst, choice, gap, trees_dr, trees_a2a;
  for (const SweepRow& r : rows) {
    const model::OperatorChoice& c = r.choice;
    const schedule::Strategy& st = c.choice().strategy;
    ++s.wins[st.kind == StrategyKind::decompose ? "decompose" : schedule::to_string(st)];
    const double seq = c.of(StrategyKind::sequential).total_s;
    const double a2a = c.of(StrategyKind::fuse_all2all).total_s;
    const double dring = c.of(StrategyKind::fuse_double_ring).total_s;
    const double dstar = c.of(StrategyKind::decompose).total_s;
    dr.push_back(a2a / dring);
    const double trees = std::min(c.of(StrategyKind::fuse_hier).total_s,
                                  c.of(StrategyKind::fuse_synth).total_s);
    trees_dr.push_back(dring / trees);
    trees_a2a.push_back(a2a / trees);
    if (r.decompose4_s > 0) d4.push_back(r.decompose4_s / dstar);
    worst.push_back(r.worst_d_s / dstar);
    choice.push_back(seq / c.choice().total_s);
    gap.push_back(c.odp.gap());
    if (a2a > seq) ++s.all2all_slower_than_sequential;
    if (c.odp.d_closed == c.odp.d_argmin) ++s.closed_form_is_argmin;
  }
  s.double_ring_over_all2all = distribution(dr);
  s.trees_over_double_ring = distribution(trees_dr);
  s.trees_over_all2all = distribution(trees_a2a);
  s.dstar_over_d4 = distribution(d4);
  s.dstar_over_worst_d = distribution(worst);
  s.choice_over_sequential = distribution(choice);
  s.odp_gap = distribution(gap);
  return s;
}

Result<SweepResult> run_sweep(const hardware::Profile& p,
                              const std::vector<workload::GridEntry>& grid,
                              const std::function<void(std::size_t, std::size_t)>& progress,
                              const std::vector<int>& gpus, int threads, bool explain) {
  model::Caches caches;
  return run_sweep(p, grid, caches, progress, gpus, threads, explain);
}

Result<SweepResult> run_sweep(const hardware::Profile& p,
                              const std::vector<workload::GridEntry>& grid, model::Caches& caches,
                              const std::function<void(std::size_t, std::size_t)>& progress,
                              const std::vector<int>& gpus, int threads, bool explain) {
  COMPASS_CHECK(threads >= 0, "run_sweep: {} threads", threads);
  // One topology-aware plan per TP degree, made by the first worker that needs it (a larger
  // group's takes milliseconds: the other workers plan operators of smaller groups meanwhile).
  struct PlanSlot {
    std::vector<int> group;
    std::atomic<int> state{0};  // 0: not begun, 1: being made, 2: made
    std::optional<Result<schedule::CommPlan>> plan;
  };
  // The rows in order, up to the first whose TP group cannot be formed (its error is returned
  // unless an earlier row fails to plan): each row's plan, and the row whose choice it takes.
  // Models share operators (the same hidden size gives the same qkv and proj): an operator met
  // before on this plan has the same choice, so it is planned once.
  std::map<int, PlanSlot> plans;  // by tp; complete before the workers start
  std::vector<PlanSlot*> plan_of;
  std::vector<std::size_t> source;  // the row planned for this one (itself when planned)
  std::vector<std::size_t> todo;    // the rows planned
  std::optional<Error> stop;        // why the rows end early
  for (std::size_t i = 0; i < grid.size() && !stop; ++i) {
    const workload::GridEntry& g = grid[i];
    const int tp = g.op.tp;
    if (tp < 1 || tp > p.gpu_count()) {
      stop = make_error("grid row {} ({} {}): tp={} exceeds the {} GPUs of '{}'", i, g.model,
                        g.layer, tp, p.gpu_count(), p.name);
      break;
    }
    if (!gpus.empty() && tp > static_cast<int>(gpus.size())) {
      stop = make_error("grid row {} ({} {}): tp={} exceeds the {} GPUs given", i, g.model,
                        g.layer, tp, gpus.size());
      break;
    }
    auto [it, added] = plans.try_emplace(tp);
    if (added) {
      std::vector<int>& group = it->second.group;
      group.resize(static_cast<std::size_t>(tp));
      if (gpus.empty()) {
        std::iota(group.begin(), group.end(), 0);
      } else {
        std::copy(gpus.begin(), gpus.begin() + tp, group.begin());
      }
    }
    plan_of.push_back(&it->second);
    std::size_t from = i;
    for (std::size_t j = 0; j < i; ++j)
      if (grid[j].op == g.op) {
        from = source[j];
        break;
      }
    source.push_back(from);
    if (from == i) todo.push_back(i);
  }
  // The costliest operators first (a larger group, then more rows: more program steps to
  // follow), so that no worker is left with a long one while the others have finished. Among
  // equals, operators whose programs share what is built once per shape side by side, taken by
  // one worker together (`claim`) so that one worker builds it: the decompositions' collective
  // programs (kind, rows and group), then the fused programs' structure (row bytes too: an
  // all-gather of the same input, say).
  auto collectives = [&](std::size_t i) {
    const workload::OperatorSpec& o = grid[i].op;
    return std::make_tuple(-o.tp, -o.m, o.kind);
  };
  auto structure = [&](std::size_t i) {
    const workload::OperatorSpec& o = grid[i].op;
    return std::make_tuple(-o.tp, -o.m, o.kind, o.dtype, o.kind == OpKind::ag_gemm ? o.k : o.n);
  };
  std::stable_sort(todo.begin(), todo.end(),
                   [&](std::size_t a, std::size_t b) { return structure(a) < structure(b); });

  // Plan the distinct operators, on `threads` workers (0: one per hardware thread). The calling
  // thread is one of them, plans through `caches` and reports progress; the others plan through
  // caches of their own. The estimates do not depend on what a cache holds, nor on which worker
  // made a plan, so neither do the rows.
  std::vector<std::optional<Result<model::OperatorChoice>>> planned(grid.size());
  const std::size_t workers = std::max<std::size_t>(1, worker_count(threads, todo.size()));
  // A worker takes the costliest operators left (those after the first that share its
  // collective programs, up to kRun or an equal share of half the operators left, whichever is
  // more), or, while another worker makes their plan, the cheapest one (whose plan it can make
  // or use): the positions [first, last) of `todo`.
  constexpr std::size_t kRun = 4;
  std::mutex claiming;
  std::size_t front = 0, back = todo.size();
  bool stopping = false;
  auto claim = [&]() -> std::optional<std::pair<std::size_t, std::size_t>> {
    const std::lock_guard<std::mutex> lock(claiming);
    if (stopping || front == back) return std::nullopt;
    const bool busy = plan_of[todo[front]]->state.load() == 1;
    if (busy && plan_of[todo[back - 1]]->state.load() != 1) {
      --back;
      return std::make_pair(back, back + 1);
    }
    const std::size_t most = std::max(kRun, (back - front) / (2 * workers));
    const std::size_t first = front++;
    while (front < back && front - first < most &&
           collectives(todo[front]) == collectives(todo[first]))
      ++front;
    return std::make_pair(first, front);
  };
  // The slot's plan, made here if no worker has begun it, else once made.
  auto plan_in = [&](PlanSlot& slot) -> const Result<schedule::CommPlan>& {
    int expected = 0;
    if (slot.state.compare_exchange_strong(expected, 1)) {
      struct Made {  // wakes the waiting workers however the making ends
        PlanSlot& slot;
        ~Made() {
          if (!slot.plan) slot.plan = make_error("no plan for the TP group: its search failed");
          slot.state.store(2);
          slot.state.notify_all();
        }
      } made{slot};
      slot.plan = schedule::comm_plan_for(p, slot.group);
    } else {
      for (int s = expected; s != 2; s = slot.state.load()) slot.state.wait(s);
    }
    return *slot.plan;
  };
  std::atomic<std::size_t> done{0};
  std::size_t reported = 0;  // operators reported to `progress`, one call each, in order
  auto report = [&](std::size_t upto) {
    while (progress && reported < upto) progress(++reported, todo.size());
  };
  std::vector<std::exception_ptr> failed(workers);
  auto work = [&](std::size_t w, model::Caches& c) {
    try {
      for (auto run = claim(); run; run = claim())
        for (std::size_t t = run->first; t < run->second; ++t) {
          const std::size_t i = todo[t];
          const Result<schedule::CommPlan>& cp = plan_in(*plan_of[i]);
          // A plan that cannot be made is the rows' error (below); its operators are not
          // planned.
          if (cp.ok())
            planned[i] = model::choose_strategy(
                p, grid[i].op, *cp, c, explain ? model::Breakdown::chosen : model::Breakdown::none);
          ++done;
          if (w == 0) report(done);
        }
    } catch (...) {
      failed[w] = std::current_exception();
      const std::lock_guard<std::mutex> lock(claiming);
      stopping = true;  // the others stop after their current operator
    }
  };
  {
    std::vector<model::Caches> own(workers - 1);
    std::vector<std::jthread> pool;
    for (std::size_t w = 1; w < workers; ++w) pool.emplace_back(work, w, std::ref(own[w - 1]));
    work(0, caches);
  }  // joined
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
  report(todo.size());

  SweepResult res;
  res.profile = p.name;
  res.rows.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    const workload::GridEntry& g = grid[i];
    if (!plan_of[i]->plan->ok()) return plan_of[i]->plan->error();
    const Result<model::OperatorChoice>& c = *planned[source[i]];
    if (!c.ok())
      return make_error("grid row {} ({} {}): {}", i, g.model, g.layer, c.error().message);
    SweepRow row;
    row.entry = g;
    row.choice = c.value();
    const model::OdpResult& odp = row.choice.odp;
    row.decompose4_s = odp.exact_at(4);
    for (std::size_t j = 0; j < odp.feasible.size(); ++j)
      if (odp.exact_s[j] >= row.worst_d_s) {
        row.worst_d_s = odp.exact_s[j];
        row.worst_d = odp.feasible[j];
      }
    res.rows.push_back(std::move(row));
  }
  if (stop) return *stop;
  res.summary = summarise(res.rows);
  return res;
}

}  // namespace compass::plan
