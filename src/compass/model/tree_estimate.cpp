#include "compass/model/tree_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>

#include "compass/hardware/gemm_cost.hpp"
#include "compass/hardware/synthesis.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/model/cache_tables.hpp"
#include "compass/model/comm_model.hpp"
#include "compass/schedule/patterns.hpp"

namespace compass::model::detail {

using workload::OpKind;

// The schedule of a tree pattern as the model follows it: per rank, its compute stream's items
// in program order; per transfer, its ends, rows, its copy engine's previous transfer and what
// its data waits for. prepare() adds what following it needs, once: the planner follows one
// program under several costs (the choice, then the chosen strategy's breakdown).
struct TreeProgram {
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
  // Index lists keyed 0..n-1 in one array (key k: at[begin[k]] .. at[begin[k + 1] - 1]), each
  // in the order its (key, index) pairs were given.
  struct Lists {
    std::vector<std::size_t> begin{0};
    std::vector<int> at;
    Lists() = default;
    Lists(std::size_t n, const std::vector<std::pair<int, int>>& pairs) : begin(n + 1, 0) {
      for (const auto& kv : pairs) ++begin[static_cast<std::size_t>(kv.first) + 1];
      for (std::size_t k = 0; k < n; ++k) begin[k + 1] += begin[k];
      std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
      at.resize(pairs.size());
      for (const auto& kv : pairs) at[next[static_cast<std::size_t>(kv.first)]++] = kv.second;
    }
    std::span<const int> of(std::size_t k) const {
      return {at.data() + begin[k], at.data() + begin[k + 1]};
    }
  };
  // One transfer's constant facts.
  struct Flow {
    double bytes = 0, latency_s = 0;
    int waits = 0;       // what it waits for: its data's item or transfer, its engine's previous
    bool moves = false;  // between two GPUs (else it lands the moment it starts)
  };

  std::vector<std::vector<Item>> items;
  std::vector<Send> sends;
  // Set by prepare().
  std::vector<Flow> flows;
  std::vector<double> cap;               // of every link direction
  hardware::sharing::FlatPaths paths;    // of every transfer
  std::vector<std::size_t> item_base;    // rank v's items are v's base .. the next rank's
  Lists flow_waiters;  // per transfer: the transfers waiting for it to land
  Lists item_waiters;  // per transfer: the ranks whose items wait for it
  Lists send_waiters;  // per item (item_base + index): the transfers waiting for it to end
  double work_s = 0;   // GEMM and add work of the busiest rank
};

namespace {

using Item = TreeProgram::Item;
using Send = TreeProgram::Send;

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
TreeProgram program_of(const workload::OperatorSpec& op, const schedule::TreePlan& tp,
                   const schedule::CommPlan& plan, const std::vector<schedule::TreeShape>& sh,
                   const std::vector<std::vector<schedule::TreePiece>>& pieces, double row_bytes,
                   const Gemm& gemm, const Add& add) {
  const int p = op.tp;
  std::size_t max_pieces = 1;
  for (const auto& pc : pieces) max_pieces = std::max(max_pieces, pc.size());
  TreeProgram pr;
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

// Follows a program in one pass over its events, as the simulator runs the schedule: each
// rank's compute stream runs its items in order (a fused kernel: one launch, then a flag wait
// before every further GEMM piece and every add; an item waits for the transfer it needs), a
// transfer leaves one copy issue after its data is complete (the item or the transfer it waits
// for) and its copy engine's previous transfer has landed, and the moving transfers share the
// links max-min, re-shared whenever one joins or leaves (hardware::sharing::IncrementalMaxmin);
// a transfer lands its route latency after its last byte. Interference as in the simulator: a
// GEMM advances at 1/fg while its rank has a transfer under way (from its start until it
// lands), and a transfer that starts while a GEMM runs at either end counts its bytes fc times.
struct Followed {
  double end_s = 0;   // the last item or transfer; NaN when the program cannot finish
  double work_s = 0;  // GEMM and add work of the busiest rank
};

// Fills in what following `pr` needs: its transfers' sizes, routes and latencies, the link
// capacities, and who waits for what.
void prepare(TreeProgram& pr, const hardware::Profile& prof, const schedule::CommPlan& plan,
             double row_bytes) {
  const int p = static_cast<int>(pr.items.size());
  const std::size_t nf = pr.sends.size();
  pr.cap = hardware::sharing::dir_capacities(prof);
  pr.flows.assign(nf, TreeProgram::Flow{});
  pr.paths = hardware::sharing::FlatPaths{};
  // Routes once per (sender, receiver) pair.
  std::vector<int> pair_flow(static_cast<std::size_t>(p) * p, -1);
  for (std::size_t f = 0; f < nf; ++f) {
    const Send& sd = pr.sends[f];
    TreeProgram::Flow& fl = pr.flows[f];
    fl.bytes = static_cast<double>(sd.rows) * row_bytes;
    fl.moves = sd.from != sd.to && plan.gpus[sd.from] != plan.gpus[sd.to];
    fl.waits = (sd.ready_item >= 0) + (sd.dep_flow >= 0) + (sd.after >= 0);
    int& same = pair_flow[static_cast<std::size_t>(sd.from) * p + sd.to];
    if (same >= 0) {
      const auto from = static_cast<std::size_t>(pr.paths.offset[same]);
      const auto to = static_cast<std::size_t>(pr.paths.offset[same + 1]);
      for (std::size_t d = from; d < to; ++d) pr.paths.dirs.push_back(pr.paths.dirs[d]);
      fl.latency_s = pr.flows[same].latency_s;
    } else if (fl.moves) {
      const int src = plan.gpus[sd.from], dst = plan.gpus[sd.to];
      for (int d : hardware::sharing::route_dirs(prof, src, dst)) pr.paths.dirs.push_back(d);
      fl.latency_s = prof.route_latency_s(src, dst);
      same = static_cast<int>(f);
    }
    pr.paths.offset.push_back(static_cast<int>(pr.paths.dirs.size()));
  }
  pr.item_base.assign(static_cast<std::size_t>(p) + 1, 0);
  pr.work_s = 0;
  for (int v = 0; v < p; ++v) {
    pr.item_base[v + 1] = pr.item_base[v] + pr.items[v].size();
    double work = 0;
    for (const Item& it : pr.items[v]) work += it.work;
    pr.work_s = std::max(pr.work_s, work);
  }
  std::vector<std::pair<int, int>> flow_waits, item_on_flow, flow_on_item;
  for (std::size_t f = 0; f < nf; ++f) {
    const Send& sd = pr.sends[f];
    for (int g : {sd.after, sd.dep_flow})
      if (g >= 0) flow_waits.emplace_back(g, static_cast<int>(f));
    if (sd.ready_item >= 0)
      flow_on_item.emplace_back(static_cast<int>(pr.item_base[sd.from] + sd.ready_item),
                                static_cast<int>(f));
  }
  for (int v = 0; v < p; ++v)
    for (const Item& it : pr.items[v])
      if (it.flow_in >= 0) item_on_flow.emplace_back(it.flow_in, v);
  pr.flow_waiters = TreeProgram::Lists(nf, flow_waits);
  pr.item_waiters = TreeProgram::Lists(nf, item_on_flow);
  pr.send_waiters = TreeProgram::Lists(pr.item_base.back(), flow_on_item);
}

// Follows a prepared program in one pass over its events, as the simulator runs the schedule:
// each rank's compute stream runs its items in order (a fused kernel: one launch, then a flag
// wait before every further GEMM piece and every add; an item waits for the transfer it needs),
// a transfer leaves one copy issue after its data is complete (the item or the transfer it
// waits for) and its copy engine's previous transfer has landed, and the moving transfers share
// the links max-min, re-shared whenever one joins or leaves (hardware::sharing::
// IncrementalMaxmin); a transfer lands its route latency after its last byte. Interference as
// in the simulator: a GEMM advances at 1/fg while its rank has a transfer under way (from its
// start until it lands), and a transfer that starts while a GEMM runs at either end counts its
// bytes fc times. With `work` false every item costs nothing (the communication alone).
class Follower {
 public:
  Follower(const TreeProgram& pr, const TreeCosts& c, bool work,
           hardware::sharing::IncrementalMaxmin& sharing)
      : pr_(pr), c_(c), work_(work), sharing_(sharing),
        flows_(pr.sends.size()), ranks_(pr.items.size()) {
    for (std::size_t f = 0; f < flows_.size(); ++f) flows_[f].pending = pr.flows[f].waits;
  }

  Followed run() {
    Followed out;
    out.work_s = work_ ? pr_.work_s : 0.0;
    sharing_.reset(pr_.cap, pr_.paths);
    for (std::size_t f = 0; f < flows_.size(); ++f)
      if (flows_[f].pending == 0) release(static_cast<int>(f));
    for (std::size_t v = 0; v < ranks_.size(); ++v) next_item(static_cast<int>(v));
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double now = 0;
    const std::size_t limit = 16 * (flows_.size() + pr_.item_base.back()) + 16;
    for (std::size_t step = 0; step < limit && !broken_; ++step) {
      const double t = std::min({top(releases_), top(landings_), top(compute_), next_end_});
      if (t == kInf) break;
      now = std::max(now, t);
      // At one instant: last bytes, then landings, then compute (a GEMM ending now is no
      // longer running, one beginning now is), then the transfers that start.
      if (next_end_ <= now) {
        advance(now);
        ended_.clear();
        for (int f : sharing_.active())
          if (flows_[f].remaining <= 1e-9 * flows_[f].sized) ended_.push_back(f);
        for (int f : ended_) {
          sharing_.remove(f);
          push(landings_, now + pr_.flows[f].latency_s, f);
        }
        reshare_ = true;
      }
      while (top(landings_) <= now) land(pop(landings_).second, now);
      while (top(compute_) <= now) {
        const auto [at, ev] = pop(compute_);
        const int v = ev / kVersions;
        if (ev % kVersions == static_cast<int>(ranks_[v].version % kVersions)) on_compute(v, at);
      }
      while (top(releases_) <= now + 1e-15) start(pop(releases_).second, now);
      if (reshare_) {
        reshare_ = false;
        next_end_ = kInf;
        const std::vector<double>& rate = sharing_.rates();
        for (int f : sharing_.active()) {
          flows_[f].rate = rate[f];
          if (rate[f] > 0) next_end_ = std::min(next_end_, now + flows_[f].remaining / rate[f]);
        }
      }
    }
    bool finished = !broken_;
    for (const Flow& fl : flows_) {
      finished = finished && fl.landed;
      out.end_s = std::max(out.end_s, fl.landed_s);
    }
    for (const Rank& r : ranks_) {
      finished = finished && r.phase == Phase::done;
      out.end_s = std::max(out.end_s, r.prev_end);
    }
    if (!finished) out.end_s = std::numeric_limits<double>::quiet_NaN();
    return out;
  }

 private:
  enum class Phase { waiting, overhead, gemm, add, done };
  // One transfer's state.
  struct Flow {
    double sized = 0, remaining = 0, rate = 0;  // its bytes (fc included), left, current rate
    double ready_s = 0;   // the latest of what it waits for, once known
    double landed_s = 0;
    int pending = 0;      // what it waits for and has not happened yet
    bool landed = false;
  };
  // One compute stream's state.
  struct Rank {
    std::size_t item = 0;
    Phase phase = Phase::waiting;
    bool launched = false;  // its first GEMM piece has paid the launch
    double prev_end = 0;    // the end of its previous item
    double left = 0, since = 0;  // the running GEMM's work left at `since`
    int sending = 0;        // its transfers under way (started, not landed)
    unsigned version = 0;   // its compute event in the queue
  };
  using Queue = std::vector<std::pair<double, int>>;  // a min-heap of (time, id)
  static constexpr int kVersions = 1 << 20;  // compute events: rank * kVersions + version

  struct Later {  // orders the min-heaps
    bool operator()(const std::pair<double, int>& a, const std::pair<double, int>& b) const {
      return a > b;
    }
  };
  static double top(const Queue& q) {
    return q.empty() ? std::numeric_limits<double>::infinity() : q.front().first;
  }
  static std::pair<double, int> pop(Queue& q) {
    std::pop_heap(q.begin(), q.end(), Later{});
    const std::pair<double, int> e = q.back();
    q.pop_back();
    return e;
  }
  void push(Queue& q, double at, int id) {
    if (std::isnan(at)) {  // a cost that is not a number: the program never finishes
      broken_ = true;
      return;
    }
    q.emplace_back(at, id);
    std::push_heap(q.begin(), q.end(), Later{});
  }
  double work_of(const Item& it) const { return work_ ? it.work : 0.0; }
  bool gemm_running(int v) const { return ranks_[v].phase == Phase::gemm; }
  int compute_id(int v) const {
    return v * kVersions + static_cast<int>(ranks_[v].version % kVersions);
  }
  // Brings the moving transfers' remaining bytes to `now` (their rates held since the last
  // change of the sharing).
  void advance(double now) {
    const double dt = now - clock_;
    if (dt > 0)
      for (int f : sharing_.active()) flows_[f].remaining -= flows_[f].rate * dt;
    clock_ = now;
  }
  // A rank's transfers under way change: its running GEMM's speed may change with them.
  void sending(int v, int delta, double now) {
    Rank& r = ranks_[v];
    const bool was = r.sending > 0;
    r.sending += delta;
    if (was == (r.sending > 0) || r.phase != Phase::gemm || c_.fg == 1.0) return;
    r.left = std::max(0.0, r.left - (was ? (now - r.since) / c_.fg : now - r.since));
    r.since = now;
    ++r.version;
    push(compute_, now + (r.sending > 0 ? r.left * c_.fg : r.left), compute_id(v));
  }
  // Everything a transfer waits for has happened: it leaves one copy issue later.
  void release(int f) { push(releases_, flows_[f].ready_s + c_.copy_issue, f); }
  void resolved(int f, double at) {
    Flow& fl = flows_[f];
    fl.ready_s = std::max(fl.ready_s, at);
    if (--fl.pending == 0) release(f);
  }
  void start(int f, double now) {
    Flow& fl = flows_[f];
    const Send& sd = pr_.sends[f];
    fl.sized = pr_.flows[f].bytes * (gemm_running(sd.from) || gemm_running(sd.to) ? c_.fc : 1.0);
    if (!pr_.flows[f].moves || !(fl.sized > 0)) {
      land(f, now);  // moves nothing: lands the moment it starts
      return;
    }
    advance(now);
    fl.remaining = fl.sized;
    sharing_.add(f);
    reshare_ = true;
    sending(sd.from, +1, now);
  }
  void land(int f, double now) {
    Flow& fl = flows_[f];
    fl.landed = true;
    fl.landed_s = now;
    if (pr_.flows[f].moves && fl.sized > 0) sending(pr_.sends[f].from, -1, now);
    for (int w : pr_.flow_waiters.of(static_cast<std::size_t>(f))) resolved(w, now);
    for (int v : pr_.item_waiters.of(static_cast<std::size_t>(f))) {
      Rank& r = ranks_[v];
      if (r.phase == Phase::waiting && r.item < pr_.items[v].size() &&
          pr_.items[v][r.item].flow_in == f)
        begin_item(v, std::max(r.prev_end, now));
    }
  }
  // The rank's next item, if what it waits for has landed.
  void next_item(int v) {
    Rank& r = ranks_[v];
    if (r.item >= pr_.items[v].size()) {
      r.phase = Phase::done;
      return;
    }
    const Item& it = pr_.items[v][r.item];
    if (it.flow_in >= 0 && !flows_[it.flow_in].landed) {
      r.phase = Phase::waiting;
      return;
    }
    begin_item(v, it.flow_in >= 0 ? std::max(r.prev_end, flows_[it.flow_in].landed_s) : r.prev_end);
  }
  void begin_item(int v, double ready) {
    Rank& r = ranks_[v];
    const Item& it = pr_.items[v][r.item];
    ++r.version;
    if (it.add) {
      r.phase = Phase::add;
      push(compute_, ready + c_.flag_wait + work_of(it), compute_id(v));
    } else {
      r.phase = Phase::overhead;
      push(compute_, ready + (r.launched ? c_.flag_wait : c_.launch), compute_id(v));
      r.launched = true;
    }
  }
  void on_compute(int v, double now) {
    Rank& r = ranks_[v];
    if (r.phase == Phase::overhead) {
      const double work = work_of(pr_.items[v][r.item]);
      r.phase = Phase::gemm;
      r.left = work;
      r.since = now;
      ++r.version;
      push(compute_, r.sending > 0 && c_.fg != 1.0 ? now + work * c_.fg : now + work,
           compute_id(v));
      return;
    }
    // A GEMM piece or an add ends.
    r.prev_end = now;
    for (int f : pr_.send_waiters.of(pr_.item_base[v] + r.item)) resolved(f, now);
    ++r.item;
    next_item(v);
  }

  const TreeProgram& pr_;
  const TreeCosts& c_;
  bool work_;
  hardware::sharing::IncrementalMaxmin& sharing_;
  std::vector<Flow> flows_;
  std::vector<Rank> ranks_;
  Queue releases_, landings_, compute_;
  std::vector<int> ended_;
  double clock_ = 0, next_end_ = std::numeric_limits<double>::infinity();
  bool reshare_ = false, broken_ = false;
};

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
  // The program, built and prepared once per operator and pattern (the last few are kept).
  std::vector<std::uint64_t> program_key = {0, static_cast<std::uint64_t>(op.kind),
                                            static_cast<std::uint64_t>(op.dtype),
                                            static_cast<std::uint64_t>(op.m),
                                            static_cast<std::uint64_t>(op.n),
                                            static_cast<std::uint64_t>(op.k)};
  append_pattern(tp, plan, program_key);
  seal_key(program_key);
  std::shared_ptr<const TreeProgram> program;
  for (const auto& [k, pr] : memo.programs)
    if (k == program_key) program = pr;
  if (!program) {
    // A fused kernel's chunks share one GEMM's waves (hardware::fused_chunk_compute_s); every
    // rank computes all M rows of its local GEMM.
    std::map<std::int64_t, double> gemm_cache;
    auto gemm = [&](std::int64_t rows) {
      auto it = gemm_cache.find(rows);
      if (it != gemm_cache.end()) return it->second;
      const double t =
          hardware::fused_chunk_compute_s(prof, rows, local.m, local.n, local.k, op.dtype, gpu);
      gemm_cache.emplace(rows, t);
      return t;
    };
    const std::int64_t rows_per_root =
        ag ? workload::shard_rows(op) : workload::max_row_share(op);
    const int chunks = schedule::tree_chunks(tp, static_cast<double>(rows_per_root) * row_bytes);
    const std::vector<schedule::TreeShape> sh = schedule::tree_shapes(tp, p);
    std::vector<std::vector<schedule::TreePiece>> pieces(p);
    for (int j = 0; j < p; ++j)
      pieces[j] = schedule::tree_pieces(
          tp, j, ag ? workload::shard_rows(op) : workload::row_share(op, j).len, chunks);
    auto add = [&](std::int64_t rows) {
      return hardware::add_s(prof, gpu, static_cast<double>(rows) * row_bytes);
    };
    auto built = std::make_shared<TreeProgram>(
        program_of(op, tp, plan, sh, pieces, row_bytes, gemm, add));
    prepare(*built, prof, plan, row_bytes);
    program = built;
    constexpr std::size_t kPrograms = 4;
    if (memo.programs.size() >= kPrograms) memo.programs.erase(memo.programs.begin());
    memo.programs.emplace_back(program_key, program);
  }
  if (!known) {
    const Followed f = Follower(*program, c, true, memo.sharing).run();
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
    known_comm = Follower(*program, TreeCosts{}, false, memo.sharing).run().end_s;
    remember(memo, memo.comm, comm_key, *known_comm);
  }
  return answer();
}

}  // namespace compass::model::detail
