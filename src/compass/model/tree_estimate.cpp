#include "compass/model/tree_estimate.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::model::detail {

using workload::OpKind;

namespace {

// Rounds of the release/arrival fixed point of the reduce-scatter (it stops early once a round
// repeats the previous one bit for bit).
constexpr int kFixedPointRounds = 8;

struct Shapes {
  std::vector<std::vector<int>> depth, parent;       // [tree][rank]
  std::vector<std::vector<std::vector<int>>> kids;   // [tree][rank] -> children in edge order
  std::vector<int> height;
};

Shapes shapes_of(const schedule::TreePlan& tp, int p) {
  Shapes s;
  for (const schedule::RankTree& t : tp.trees) {
    s.depth.push_back(schedule::tree_depths(t, p));
    std::vector<int> parent(p, -1);
    std::vector<std::vector<int>> kids(p);
    for (auto [a, b] : t.edges) {
      parent[b] = a;
      kids[a].push_back(b);
    }
    s.parent.push_back(parent);
    s.kids.push_back(std::move(kids));
    s.height.push_back(*std::max_element(s.depth.back().begin(), s.depth.back().end()));
  }
  return s;
}

// The schedule of a tree pattern as the model follows it: per rank, its compute stream's items
// in program order; per transfer, its ends, rows, its copy engine's previous transfer and what
// its data waits for.
struct Item {
  bool add = false;   // an add of a received partial, else a GEMM piece
  double work = 0;
  int flow_in = -1;   // the transfer it waits for (-1: none)
};
struct Send {
  int from = 0, to = 0, after = -1;
  int ready_item = -1;  // the sender's item that completes the data, or
  int dep_flow = -1;    // the transfer that brings it (neither: ready at the start)
  std::int64_t rows = 0;
};
struct Program {
  std::vector<std::vector<Item>> items;
  std::vector<Send> sends;
};

// The program of `op` along `tp`, in the generator's order (schedule/patterns.cpp): the same
// rounds, pieces, engines and compute order.
template <class Gemm, class Add>
Program program_of(const workload::OperatorSpec& op, const schedule::TreePlan& tp,
                   const schedule::CommPlan& plan, const Shapes& sh,
                   const std::vector<std::vector<schedule::TreePiece>>& pieces, const Gemm& gemm,
                   const Add& add) {
  const int p = op.tp;
  Program pr;
  pr.items.resize(p);
  std::map<std::pair<int, int>, int> last_on_engine;   // (rank, engine) -> transfer
  auto push_send = [&](Send sd, int engine) {
    if (auto it = last_on_engine.find({sd.from, engine}); it != last_on_engine.end())
      sd.after = it->second;
    last_on_engine[{sd.from, engine}] = static_cast<int>(pr.sends.size());
    pr.sends.push_back(sd);
    return static_cast<int>(pr.sends.size()) - 1;
  };
  auto push_item = [&](int v, Item it) {
    pr.items[v].push_back(it);
    return static_cast<int>(pr.items[v].size()) - 1;
  };
  std::map<std::tuple<int, int, int>, int> last_item;  // (rank, owner, piece) -> item
  // All-gather rounds down the trees: piece chunk k crosses the edge into depth d in round
  // k + d - 1; `root_ready(owner, piece)` is the owner's item completing it (-1: ready at once);
  // with `gemms`, every rank computes each piece after the round it landed in.
  auto allgather = [&](bool gemms, bool root_items) {
    const auto down = schedule::tree_engines(tp, plan.copy_engines, false);
    std::map<std::tuple<int, int, int>, int> into;  // (rank, owner, piece) -> transfer
    int rounds = 0;
    for (int j = 0; j < p; ++j)
      for (const auto& pc : pieces[j]) rounds = std::max(rounds, pc.chunk + sh.height[pc.tree]);
    for (int rho = 0; rho < rounds; ++rho) {
      for (int j = 0; j < p; ++j)
        for (std::size_t i = 0; i < pieces[j].size(); ++i) {
          const schedule::TreePiece& pc = pieces[j][i];
          const int pi = static_cast<int>(i);
          for (auto [a, b] : tp.trees[pc.tree].edges) {
            if (pc.chunk + sh.depth[pc.tree][b] - 1 != rho) continue;
            Send sd{a, b, -1, -1, -1, pc.len};
            if (a != j) sd.dep_flow = into.at({a, j, pi});
            else if (root_items) sd.ready_item = last_item.at({j, j, pi});
            into[{b, j, pi}] = push_send(sd, down.at({a, b}));
          }
        }
      if (!gemms) continue;
      for (int j = 0; j < p; ++j)
        for (std::size_t i = 0; i < pieces[j].size(); ++i) {
          const schedule::TreePiece& pc = pieces[j][i];
          for (int r = 0; r < p; ++r)
            if (r != j && pc.chunk + sh.depth[pc.tree][r] - 1 == rho)
              push_item(r, Item{false, gemm(pc.len), into.at({r, j, static_cast<int>(i)})});
        }
    }
  };
  if (op.kind == OpKind::ag_gemm) {
    for (int r = 0; r < p; ++r) push_item(r, Item{false, gemm(op.m / p), -1});
    allgather(true, false);
    return pr;
  }
  // Reduce-scatter up the trees: rank v at depth d completes its sum of piece chunk k in round
  // k + height - d and sends it to its parent; the GEMMs of round r + 1 come before the adds of
  // round r in program order.
  const auto up = schedule::tree_engines(tp, plan.copy_engines, true);
  auto round_of = [&](const schedule::TreePiece& pc, int v) {
    return pc.chunk + sh.height[pc.tree] - sh.depth[pc.tree][v];
  };
  int rounds = 0;
  for (int j = 0; j < p; ++j)
    for (const auto& pc : pieces[j]) rounds = std::max(rounds, round_of(pc, j) + 1);
  auto gemms_of_round = [&](int rho) {
    for (int j = 0; j < p; ++j)
      for (std::size_t i = 0; i < pieces[j].size(); ++i)
        for (int v = 0; v < p; ++v)
          if (round_of(pieces[j][i], v) == rho)
            last_item[{v, j, static_cast<int>(i)}] =
                push_item(v, Item{false, gemm(pieces[j][i].len), -1});
  };
  std::map<std::tuple<int, int, int>, int> sent;  // (sender, owner, piece) -> transfer
  gemms_of_round(0);
  for (int rho = 0; rho < rounds; ++rho) {
    if (rho + 1 < rounds) gemms_of_round(rho + 1);
    for (int j = 0; j < p; ++j)
      for (std::size_t i = 0; i < pieces[j].size(); ++i) {
        const schedule::TreePiece& pc = pieces[j][i];
        const int pi = static_cast<int>(i);
        for (int v = 0; v < p; ++v) {
          if (round_of(pc, v) != rho) continue;
          for (int u : sh.kids[pc.tree][v])
            last_item[{v, j, pi}] = push_item(
                v, Item{true, add(pc.len), sent.at({u, j, pi})});
          if (v == j) continue;
          const int to = sh.parent[pc.tree][v];
          sent[{v, j, pi}] =
              push_send(Send{v, to, -1, last_item.at({v, j, pi}), -1, pc.len}, up.at({v, to}));
        }
      }
  }
  // gemm_ar: the reduced pieces go down the same trees, after every reduce-scatter transfer in
  // program order.
  if (op.kind == OpKind::gemm_ar) allgather(false, true);
  return pr;
}

// Follows a program: each rank's compute stream runs its items in order (a fused kernel: one
// launch, then a flag wait before every further GEMM piece and every add; an item waits for the
// transfer it needs), a transfer leaves when its data is complete (the item or the transfer it
// waits for) and its copy engine's previous transfer is done (plus one copy issue), and the
// transfers share the links max-min with those release times (run_released_flows). Releases
// and arrivals depend on each other: the two are iterated to a fixed point, as for the fused
// ring reduce-scatter in estimate.cpp. Interference as in the simulator: a GEMM runs 1/fg as
// fast while its rank sends (hardware::slowed_end over the rank's transfer windows), and a
// transfer that starts while a GEMM runs at either end counts its bytes fc times.
struct Followed {
  double end_s = 0;      // the last item or transfer
  double work_s = 0;     // GEMM and add work of the busiest rank
};
Followed follow(const hardware::Profile& prof, const schedule::CommPlan& plan, const Program& pr,
                double row_bytes, const TreeCosts& c, Caches& caches) {
  const int p = static_cast<int>(pr.items.size());
  const std::vector<Send>& sends = pr.sends;
  const std::size_t nf = sends.size();
  std::vector<double> finish(nf, 0), start(nf, 0), release(nf, 0);
  std::vector<std::vector<double>> item_end(p);
  std::vector<std::vector<hardware::Window>> gemm_windows(p), busy(p);
  Followed out;
  auto run_compute = [&]() {
    for (int v = 0; v < p; ++v) {
      item_end[v].assign(pr.items[v].size(), 0);
      gemm_windows[v].clear();
      double t = 0;
      bool first = true;
      for (std::size_t i = 0; i < pr.items[v].size(); ++i) {
        const Item& it = pr.items[v][i];
        const double ready = it.flow_in >= 0 ? std::max(t, finish[it.flow_in]) : t;
        if (it.add) {
          t = ready + c.flag_wait + it.work;
        } else {
          const double from = ready + (first ? c.launch : c.flag_wait);
          first = false;
          t = hardware::slowed_end(from, it.work, busy[v], c.fg);
          gemm_windows[v].push_back(hardware::Window{from, t});
        }
        item_end[v][i] = t;
      }
    }
    for (std::size_t f = 0; f < nf; ++f)
      release[f] = sends[f].ready_item >= 0 ? item_end[sends[f].from][sends[f].ready_item]
                   : sends[f].dep_flow >= 0 ? finish[sends[f].dep_flow]
                                            : 0.0;
  };
  auto gemm_running = [&](int rank, double t) {
    for (const hardware::Window& w : gemm_windows[rank])
      if (w.from <= t && t < w.until) return true;
    return false;
  };
  // First guess: every transfer alone on its route after its data and its engine's previous
  // transfer, in program order (a transfer's predecessors come before it).
  run_compute();
  for (std::size_t f = 0; f < nf; ++f) {
    const Send& sd = sends[f];
    if (sd.dep_flow >= 0) release[f] = finish[sd.dep_flow];
    start[f] = std::max(release[f], sd.after >= 0 ? finish[sd.after] : 0.0) + c.copy_issue;
    finish[f] = start[f] + model::transfer_time_s(prof, plan.gpus[sd.from], plan.gpus[sd.to],
                                                  static_cast<double>(sd.rows) * row_bytes);
  }
  std::vector<TimedFlow> flows, previous;
  for (int iter = 0; iter < kFixedPointRounds && nf > 0; ++iter) {
    run_compute();
    flows.assign(nf, TimedFlow{});
    for (std::size_t f = 0; f < nf; ++f) {
      const Send& sd = sends[f];
      TimedFlow& tf = flows[f];
      tf.src = plan.gpus[sd.from];
      tf.dst = plan.gpus[sd.to];
      const bool beside_gemm = gemm_running(sd.from, start[f]) || gemm_running(sd.to, start[f]);
      tf.bytes = static_cast<double>(sd.rows) * row_bytes * (beside_gemm ? c.fc : 1.0);
      tf.release_s = release[f] + c.copy_issue;
      tf.after = sd.after;
      tf.gap_s = c.copy_issue;
    }
    if (iter > 0 && same_timed_flows(flows, previous)) break;
    finish = run_released_flows(prof, flows, caches);
    for (std::size_t f = 0; f < nf; ++f)
      start[f] = std::max(flows[f].release_s,
                          sends[f].after >= 0 ? finish[sends[f].after] + c.copy_issue : 0.0);
    // The windows in which each rank's copy engines move data, merged.
    std::vector<std::vector<hardware::Window>> raw(p);
    for (std::size_t f = 0; f < nf; ++f)
      raw[sends[f].from].push_back(hardware::Window{start[f], finish[f]});
    for (int v = 0; v < p; ++v) {
      busy[v].clear();
      std::sort(raw[v].begin(), raw[v].end(),
                [](const hardware::Window& a, const hardware::Window& b) { return a.from < b.from; });
      for (const hardware::Window& w : raw[v]) {
        if (!busy[v].empty() && w.from <= busy[v].back().until)
          busy[v].back().until = std::max(busy[v].back().until, w.until);
        else
          busy[v].push_back(w);
      }
    }
    std::swap(flows, previous);
  }
  run_compute();
  for (std::size_t f = 0; f < nf; ++f) out.end_s = std::max(out.end_s, finish[f]);
  for (int v = 0; v < p; ++v) {
    double work = 0;
    for (const Item& it : pr.items[v]) work += it.work;
    out.work_s = std::max(out.work_s, work);
    if (!item_end[v].empty()) out.end_s = std::max(out.end_s, item_end[v].back());
  }
  return out;
}

}  // namespace

TreeOutcome tree_estimate(const hardware::Profile& prof, const workload::OperatorSpec& op,
                          const schedule::TreePlan& tp, const schedule::CommPlan& plan,
                          const TreeCosts& c, Caches& caches) {
  TreeOutcome o;
  const int p = op.tp;
  const double e = dtype_bytes(op.dtype);
  const bool ag = op.kind == OpKind::ag_gemm;
  const workload::GemmShape local = workload::local_gemm(op);
  const int gpu = plan.gpus.front();
  // A fused kernel's chunks share one GEMM's waves (hardware::fused_chunk_compute_s); every
  // rank computes all M rows of its local GEMM.
  std::map<std::int64_t, double> gemm_cache;
  auto gemm = [&](std::int64_t rows) {
    auto it = gemm_cache.find(rows);
    if (it != gemm_cache.end()) return it->second;
    const double t = hardware::fused_chunk_compute_s(prof, rows, local.m, local.n, local.k, op.dtype, gpu);
    gemm_cache.emplace(rows, t);
    return t;
  };
  if (p == 1) {
    const double g = hardware::gemm_compute_s(prof, local.m, local.n, local.k, op.dtype, gpu);
    o.total_s = c.launch + g;
    o.compute_s = g;
    return o;
  }
  const double row_bytes = (ag ? op.k : op.n) * e;
  auto chunk_rows = [&](int j) {
    return op.m * (j + 1) / p - op.m * j / p;
  };
  const std::int64_t rows_per_root = ag ? op.m / p : (op.m + p - 1) / p;
  const int chunks = schedule::tree_chunks(tp, static_cast<double>(rows_per_root) * row_bytes);
  const Shapes sh = shapes_of(tp, p);
  std::vector<std::vector<schedule::TreePiece>> pieces(p);
  for (int j = 0; j < p; ++j)
    pieces[j] = schedule::tree_pieces(tp, j, ag ? op.m / p : chunk_rows(j), chunks);
  auto add = [&](std::int64_t rows) {
    return hardware::add_s(prof, gpu, static_cast<double>(rows) * row_bytes);
  };
  const Program pr = program_of(op, tp, plan, sh, pieces, gemm, add);
  const Followed f = follow(prof, plan, pr, row_bytes, c, caches);
  o.total_s = f.end_s;
  o.compute_s = f.work_s;
  if (c.details) {
    // The communication alone: the same program without GEMM, adds, overheads or interference.
    Program bare = pr;
    for (auto& items : bare.items)
      for (Item& it : items) it.work = 0;
    o.comm_s = follow(prof, plan, bare, row_bytes, TreeCosts{}, caches).end_s;
  }
  // Busiest link direction of the all-gather along the trees (the reduce-scatter loads the
  // reverse directions the same way).
  hardware::TreePattern hp;
  hp.gpus = plan.gpus;
  for (const schedule::RankTree& rt : tp.trees) {
    hardware::BroadcastTree bt{plan.gpus[rt.root], rt.share, {}};
    for (auto [a, b] : rt.edges)
      bt.edges.push_back(ag ? std::make_pair(plan.gpus[a], plan.gpus[b])
                            : std::make_pair(plan.gpus[b], plan.gpus[a]));
    hp.trees.push_back(std::move(bt));
  }
  o.bottleneck = hardware::allgather_load_pattern(prof, hp, 1.0).bottleneck;
  return o;
}

}  // namespace compass::model::detail
