#include "compass/model/tree_estimate.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::model::detail {

using workload::OpKind;

namespace {

// Rounds of the release/arrival fixed point of the reduce-scatter (it stops early once a round
// repeats the previous one bit for bit).
constexpr int kFixedPointRounds = 64;

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

// Flat tables over (rank, owner, piece) and (sender, receiver) for program_of's bookkeeping.
class PieceTable {
 public:
  PieceTable(int p, std::size_t pieces) : p_(p), pieces_(pieces), v_(p * p * pieces, -1) {}
  int& at(int rank, int owner, int piece) {
    return v_[(static_cast<std::size_t>(rank) * p_ + owner) * pieces_ + piece];
  }

 private:
  int p_;
  std::size_t pieces_;
  std::vector<int> v_;
};

// The engine of every edge of tree_engines, as a p x p table (-1: no edge).
std::vector<int> engine_table(const std::map<std::pair<int, int>, int>& engines, int p) {
  std::vector<int> t(static_cast<std::size_t>(p) * p, -1);
  for (const auto& [edge, engine] : engines) t[edge.first * p + edge.second] = engine;
  return t;
}

// The program of `op` along `tp`, in the generator's order (schedule/patterns.cpp): the same
// rounds, pieces, engines and compute order.
template <class Gemm, class Add>
Program program_of(const workload::OperatorSpec& op, const schedule::TreePlan& tp,
                   const schedule::CommPlan& plan, const std::vector<schedule::TreeShape>& sh,
                   const std::vector<std::vector<schedule::TreePiece>>& pieces, double row_bytes,
                   const Gemm& gemm, const Add& add) {
  const int p = op.tp;
  std::size_t max_pieces = 1;
  for (const auto& pc : pieces) max_pieces = std::max(max_pieces, pc.size());
  Program pr;
  pr.items.resize(p);
  std::vector<int> last_on_engine;  // [engine * p + rank] -> its last transfer (-1: none)
  auto push_send = [&](Send sd, int engine) {
    const std::size_t at = static_cast<std::size_t>(engine) * p + sd.from;
    if (at >= last_on_engine.size()) last_on_engine.resize(at + 1, -1);
    sd.after = last_on_engine[at];
    last_on_engine[at] = static_cast<int>(pr.sends.size());
    pr.sends.push_back(sd);
    return static_cast<int>(pr.sends.size()) - 1;
  };
  auto push_item = [&](int v, Item it) {
    pr.items[v].push_back(it);
    return static_cast<int>(pr.items[v].size()) - 1;
  };
  PieceTable last_item(p, max_pieces);  // (rank, owner, piece) -> item
  // The all-gather down the trees in the generator's program order
  // (schedule::tree_allgather_program); `root_items`: a root's send waits for the root's item
  // completing the piece; with `gemms`, every rank computes each piece where it arrives.
  auto allgather = [&](bool gemms, bool root_items) {
    PieceTable into(p, max_pieces);  // (rank, owner, piece) -> transfer
    for (const schedule::TreeAgStep& st :
         schedule::tree_allgather_program(tp, sh, pieces, row_bytes, plan.copy_engines)) {
      const int a = st.from, b = st.to, j = st.owner, pi = st.piece;
      const std::int64_t len = pieces[j][static_cast<std::size_t>(pi)].len;
      if (st.arrival) {
        if (gemms) push_item(b, Item{false, gemm(len), into.at(b, j, pi)});
        continue;
      }
      Send sd{a, b, -1, -1, -1, len};
      if (a != j) sd.dep_flow = into.at(a, j, pi);
      else if (root_items) sd.ready_item = last_item.at(j, j, pi);
      into.at(b, j, pi) = push_send(sd, st.engine);
    }
  };
  if (op.kind == OpKind::ag_gemm) {
    for (int r = 0; r < p; ++r) push_item(r, Item{false, gemm(workload::shard_rows(op)), -1});
    allgather(true, false);
    return pr;
  }
  // Reduce-scatter up the trees, in the order of schedule::tree_reduce_scatter_program.
  const std::vector<int> up = engine_table(schedule::tree_engines(tp, plan.copy_engines, true), p);
  PieceTable sent(p, max_pieces);  // (sender, owner, piece) -> transfer
  for (const schedule::TreeRsStep& st : schedule::tree_reduce_scatter_program(sh, pieces)) {
    const schedule::TreePiece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
    const int v = st.rank, j = st.owner, pi = st.piece;
    switch (st.kind) {
      case schedule::TreeRsStep::Kind::gemm:
        last_item.at(v, j, pi) = push_item(v, Item{false, gemm(pc.len), -1});
        break;
      case schedule::TreeRsStep::Kind::add:
        last_item.at(v, j, pi) = push_item(v, Item{true, add(pc.len), sent.at(st.peer, j, pi)});
        break;
      case schedule::TreeRsStep::Kind::send:
        sent.at(v, j, pi) = push_send(Send{v, st.peer, -1, last_item.at(v, j, pi), -1, pc.len},
                                      up[v * p + st.peer]);
        break;
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
// transfers share the links max-min with those release times (run_released_flows); a forward
// waits for the transfer that brings its data inside the run (TimedFlow::also_after). Releases
// and arrivals depend on each other through compute: the two are iterated to a fixed point, as
// for the fused ring reduce-scatter in estimate.cpp. Interference as in the simulator: a GEMM
// runs 1/fg as fast while its rank sends (hardware::slowed_end over the rank's transfer
// windows), and a transfer that starts while a GEMM runs at either end counts its bytes fc
// times.
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
  // Whether a rank's GEMM windows are in order and disjoint (each ends before the next
  // begins), as the program order makes them unless a cost is negative or not a number.
  std::vector<char> in_order(p, 1);
  Followed out;
  auto run_compute = [&]() {
    for (int v = 0; v < p; ++v) {
      item_end[v].assign(pr.items[v].size(), 0);
      gemm_windows[v].clear();
      in_order[v] = 1;
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
          if (!(t >= from) || (!gemm_windows[v].empty() && !(from >= gemm_windows[v].back().until)))
            in_order[v] = 0;
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
    const std::vector<hardware::Window>& ws = gemm_windows[rank];
    if (in_order[rank]) {
      // Only the last window opening at or before t can hold it.
      const auto after = std::upper_bound(
          ws.begin(), ws.end(), t,
          [](double x, const hardware::Window& w) { return x < w.from; });
      return after != ws.begin() && t < std::prev(after)->until;
    }
    for (const hardware::Window& w : ws)
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
  std::vector<std::vector<hardware::Window>> raw(p);  // per rank: its transfers' windows
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
      tf.after = sd.after;
      tf.gap_s = c.copy_issue;
      if (sd.dep_flow >= 0 && static_cast<std::size_t>(sd.dep_flow) < f) {
        // A forward waits for its data inside the run, not for the previous round's arrival.
        tf.also_after = sd.dep_flow;
        tf.release_s = c.copy_issue;
      } else {
        tf.release_s = release[f] + c.copy_issue;
      }
    }
    if (iter > 0 && same_timed_flows(flows, previous)) break;
    finish = run_released_flows(prof, flows, caches, /*memoise=*/false);
    for (std::size_t f = 0; f < nf; ++f)
      start[f] = std::max({flows[f].release_s,
                           sends[f].after >= 0 ? finish[sends[f].after] + c.copy_issue : 0.0,
                           flows[f].also_after >= 0 ? finish[flows[f].also_after] + c.copy_issue
                                                    : 0.0});
    // The windows in which each rank's copy engines move data, merged.
    for (std::vector<hardware::Window>& r : raw) r.clear();
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

// The words of a memo key that name a tree pattern, its group and its copy engines.
void append_pattern(const schedule::TreePlan& tp, const schedule::CommPlan& plan,
                    std::vector<std::uint64_t>& key) {
  key.push_back(static_cast<std::uint64_t>(plan.copy_engines));
  key.push_back(plan.gpus.size());
  for (int g : plan.gpus) key.push_back(static_cast<std::uint64_t>(g));
  key.push_back(static_cast<std::uint64_t>(tp.chunks));
  key.push_back(tp.trees.size());
  for (const schedule::RankTree& t : tp.trees) {
    key.insert(key.end(), {static_cast<std::uint64_t>(t.root), key_bits(t.share), t.edges.size()});
    for (auto [a, b] : t.edges)
      key.push_back(static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 |
                    static_cast<std::uint32_t>(b));
  }
  key.push_back(tp.routes.size());
  for (const schedule::RouteCost& rc : tp.routes) {
    key.insert(key.end(), {key_bits(rc.fixed_s), rc.links.size()});
    for (auto [dir, bw] : rc.links) key.insert(key.end(), {static_cast<std::uint64_t>(dir), key_bits(bw)});
  }
}

// Bounds the memo by the words its keys hold (the planner's working set is far below it).
constexpr std::size_t kMaxTreeMemoWords = std::size_t{1} << 20;  // 8 MiB of keys

template <class Value>
void remember(TreeMemo& memo, std::unordered_map<std::vector<std::uint64_t>, Value, KeyHash>& table,
              const std::vector<std::uint64_t>& key, Value value) {
  if (memo.words + key.size() > kMaxTreeMemoWords) {
    memo.results.clear();
    memo.comm.clear();
    memo.words = 0;
  }
  if (table.emplace(key, std::move(value)).second) memo.words += key.size();
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
  if (p == 1) {
    const double g = hardware::gemm_compute_s(prof, local.m, local.n, local.k, op.dtype, gpu);
    o.total_s = c.launch + g;
    o.compute_s = g;
    return o;
  }
  const double row_bytes = (ag ? op.k : op.n) * e;
  // The memo (cache_tables.hpp): answers for this profile only, keyed by every other input.
  TreeMemo& memo = caches.tables().trees;
  if (!memo.profile || !(*memo.profile == prof)) {
    memo = TreeMemo{};
    memo.profile = prof;
  }
  std::vector<std::uint64_t> key = {0,
                                    static_cast<std::uint64_t>(op.kind),
                                    static_cast<std::uint64_t>(op.dtype),
                                    static_cast<std::uint64_t>(op.m),
                                    static_cast<std::uint64_t>(op.n),
                                    static_cast<std::uint64_t>(op.k),
                                    key_bits(c.launch),
                                    key_bits(c.copy_issue),
                                    key_bits(c.flag_wait),
                                    key_bits(c.fg),
                                    key_bits(c.fc)};
  append_pattern(tp, plan, key);
  seal_key(key);
  std::vector<std::uint64_t> comm_key;
  if (c.details) {
    comm_key = {0, static_cast<std::uint64_t>(op.kind), static_cast<std::uint64_t>(op.m),
                key_bits(row_bytes)};
    append_pattern(tp, plan, comm_key);
    seal_key(comm_key);
  }
  std::optional<TreeResult> known;
  std::optional<double> known_comm;
  if (auto it = memo.results.find(key); it != memo.results.end()) known = it->second;
  if (c.details)
    if (auto it = memo.comm.find(comm_key); it != memo.comm.end()) known_comm = it->second;
  auto answer = [&]() {
    o.total_s = known->total_s;
    o.compute_s = known->compute_s;
    o.bottleneck = known->bottleneck;
    if (c.details) o.comm_s = *known_comm;
    return o;
  };
  if (known && (!c.details || known_comm)) return answer();
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
  const std::int64_t rows_per_root =
      ag ? workload::shard_rows(op) : workload::max_row_share(op);
  const int chunks = schedule::tree_chunks(tp, static_cast<double>(rows_per_root) * row_bytes);
  const std::vector<schedule::TreeShape> sh = schedule::tree_shapes(tp, p);
  std::vector<std::vector<schedule::TreePiece>> pieces(p);
  for (int j = 0; j < p; ++j)
    pieces[j] = schedule::tree_pieces(tp, j, ag ? workload::shard_rows(op) : workload::row_share(op, j).len, chunks);
  auto add = [&](std::int64_t rows) {
    return hardware::add_s(prof, gpu, static_cast<double>(rows) * row_bytes);
  };
  const Program pr = program_of(op, tp, plan, sh, pieces, row_bytes, gemm, add);
  if (!known) {
    const Followed f = follow(prof, plan, pr, row_bytes, c, caches);
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
    known = TreeResult{f.end_s, f.work_s,
                       hardware::allgather_load_pattern(prof, hp, 1.0).bottleneck};
    remember(memo, memo.results, key, *known);
  }
  if (c.details && !known_comm) {
    // The communication alone: the same program without GEMM, adds, overheads or interference.
    Program bare = pr;
    for (auto& items : bare.items)
      for (Item& it : items) it.work = 0;
    known_comm = follow(prof, plan, bare, row_bytes, TreeCosts{}, caches).end_s;
    remember(memo, memo.comm, comm_key, *known_comm);
  }
  return answer();
}

}  // namespace compass::model::detail
