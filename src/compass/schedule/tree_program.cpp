// The tree patterns' programs (docs/patterns.md): the all-gather's steps round by round and the
// reduce-scatter's list schedule, the one description of each pattern that the generator lowers
// into a Schedule and the model follows.

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "compass/core/index_lists.hpp"
#include "compass/core/tournament.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/schedule/comm_order.hpp"
#include "compass/schedule/patterns.hpp"
#include "compass/schedule/tree_graph.hpp"

namespace compass::schedule {

using workload::OpKind;

namespace {
// The reduce-scatter's list schedule (rs_list_order) expects a partial sum at its parent this
// many times its estimated transfer time after the send starts. The estimate lets a link
// direction carry one send at a time, so of k equal sends started together the first is
// expected after 1/k of the time that max-min sharing (the simulator, the model) gives them
// all; expecting partials later makes a compute stream take a GEMM piece rather than block on
// an add whose partial is still on its way. 1.5 is the mean of the two sends' ratios for k = 2;
// measured against 1, 1.1, 1.25 and 2 in docs/journal/2026-12-02-tree-reduce-scatter.md,
// "Reduce-scatter by list schedule".
constexpr double kArrivalSlack = 1.5;

// When estimated sends end (tree_allgather_program): a send ends its route's fixed cost after
// its bytes have crossed every link direction of its route, each direction carrying one send
// at a time in the order the sends start; without routes, its bytes at one byte per second.
class SendClock {
 public:
  explicit SendClock(const TreePlan& plan) : plan_(plan) {
    int directions = 0;
    for (const RouteCost& rc : plan.routes)
      for (auto [dir, bw] : rc.links) directions = std::max(directions, dir + 1);
    link_free_.assign(static_cast<std::size_t>(directions), 0.0);
  }
  double end(int p, int from, int to, double start, double bytes) {
    if (plan_.routes.empty()) return start + bytes;
    const RouteCost& rc = plan_.routes[static_cast<std::size_t>(from) * p + to];
    double moved = start;
    for (auto [dir, bw] : rc.links) {
      double& lf = link_free_[static_cast<std::size_t>(dir)];
      lf = std::max(lf, start) + bytes / bw;
      moved = std::max(moved, lf);
    }
    return moved + rc.fixed_s;
  }

 private:
  const TreePlan& plan_;
  std::vector<double> link_free_;  // link direction -> when it finishes its last send
};

}  // namespace

std::vector<TreeAgStep> tree_allgather_program(const TreePlan& plan,
                                               const std::vector<TreeShape>& shapes,
                                               const std::vector<std::vector<TreePiece>>& pieces,
                                               double row_bytes, int engines) {
  const int p = static_cast<int>(pieces.size());
  const int ne = std::max(1, engines);
  const std::vector<int> eng = tree_engine_table(plan, p, ne, false);  // from * p + to
  // Every send, with the send that brings its piece to its sender (-1: the root's own).
  struct Send {
    TreeAgStep step;
    std::tuple<int, int, int> key;  // round, then tree_step_order: priority when ready
    double bytes = 0;
    int dep = -1;
    double ready = 0, start = 0, end = 0;
  };
  std::vector<Send> sends;
  std::size_t max_pieces = 1;
  for (const std::vector<TreePiece>& pc : pieces) max_pieces = std::max(max_pieces, pc.size());
  // (rank, owner, piece) -> the send that brings the piece to the rank
  std::vector<int> into(static_cast<std::size_t>(p) * p * max_pieces, -1);
  auto into_at = [&](int rank, int owner, int piece) -> int& {
    return into[(static_cast<std::size_t>(rank) * p + owner) * max_pieces + piece];
  };
  for (int j = 0; j < p; ++j)
    for (std::size_t i = 0; i < pieces[j].size(); ++i) {
      const TreePiece& pc = pieces[j][i];
      for (auto [a, b] : plan.trees[pc.tree].edges) {
        const int round = pc.chunk + shapes[pc.tree].depth[b] - 1;
        const auto [o1, o2] = tree_step_order(p, a, b, j);
        Send sd;
        sd.step = TreeAgStep{false, a, b, j, static_cast<int>(i), eng[static_cast<std::size_t>(a) * p + b], round};
        sd.key = {round, o1, o2};
        sd.bytes = static_cast<double>(pc.len) * row_bytes;
        into_at(b, j, static_cast<int>(i)) = static_cast<int>(sends.size());
        sends.push_back(sd);
      }
    }
  // Dependents of each send: the sends that forward what it brings.
  std::vector<std::pair<int, int>> forwards;
  forwards.reserve(sends.size());
  for (std::size_t f = 0; f < sends.size(); ++f) {
    const TreeAgStep& st = sends[f].step;
    if (st.from == st.owner) continue;
    sends[f].dep = into_at(st.from, st.owner, st.piece);
    forwards.emplace_back(sends[f].dep, static_cast<int>(f));
  }
  const IndexLists next(sends.size(), forwards);
  // Per copy engine: the sends whose piece's arrival time is known, earliest first, and those
  // that have arrived by the time the engine is free, by priority.
  const std::size_t engines_total = static_cast<std::size_t>(p) * ne;
  auto by_ready = [&](int x, int y) {
    return std::tie(sends[x].ready, sends[x].key, x) > std::tie(sends[y].ready, sends[y].key, y);
  };
  auto by_key = [&](int x, int y) { return std::tie(sends[x].key, x) > std::tie(sends[y].key, y); };
  using ReadyHeap = std::priority_queue<int, std::vector<int>, decltype(by_ready)>;
  using KeyHeap = std::priority_queue<int, std::vector<int>, decltype(by_key)>;
  std::vector<ReadyHeap> known(engines_total, ReadyHeap(by_ready));
  std::vector<KeyHeap> ready(engines_total, KeyHeap(by_key));
  std::vector<double> free_at(engines_total, 0.0);
  auto engine_of = [&](int f) {
    return static_cast<std::size_t>(sends[f].step.from) * ne + sends[f].step.engine;
  };
  for (std::size_t f = 0; f < sends.size(); ++f)
    if (sends[f].dep < 0) known[engine_of(static_cast<int>(f))].push(static_cast<int>(f));
  SendClock clock(plan);
  // The engine's next send and its start: when it comes free, the ready send of the highest
  // priority; when none is ready then, the first to arrive. (A send moves to `ready` once it
  // has arrived by the engine's free time, which no later event moves earlier.)
  auto candidate = [&](std::size_t e) -> std::pair<double, int> {
    while (!known[e].empty() && sends[known[e].top()].ready <= free_at[e]) {
      ready[e].push(known[e].top());
      known[e].pop();
    }
    if (!ready[e].empty()) return {free_at[e], ready[e].top()};
    if (!known[e].empty()) return {sends[known[e].top()].ready, known[e].top()};
    return {0.0, -1};
  };
  // Each engine's candidate, worked out again only once its queues or its free time change.
  std::vector<std::pair<double, int>> candidates(engines_total);
  std::vector<char> changed(engines_total, 1);
  std::vector<int> order;  // sends in the order they start
  order.reserve(sends.size());
  while (order.size() < sends.size()) {
    std::size_t best_e = engines_total;
    std::pair<double, int> best{0.0, -1};
    for (std::size_t e = 0; e < engines_total; ++e) {
      if (changed[e]) {
        candidates[e] = candidate(e);
        changed[e] = 0;
      }
      const std::pair<double, int> c = candidates[e];
      if (c.second < 0) continue;
      if (best.second < 0 || c.first < best.first ||
          (c.first == best.first &&
           std::tie(sends[c.second].key, c.second) < std::tie(sends[best.second].key, best.second))) {
        best = c;
        best_e = e;
      }
    }
    const int f = best.second;
    if (!ready[best_e].empty() && ready[best_e].top() == f)
      ready[best_e].pop();
    else
      known[best_e].pop();
    Send& sd = sends[static_cast<std::size_t>(f)];
    sd.start = best.first;
    sd.end = clock.end(p, sd.step.from, sd.step.to, sd.start, sd.bytes);
    free_at[best_e] = sd.end;
    changed[best_e] = 1;
    order.push_back(f);
    for (int g : next.of(static_cast<std::size_t>(f))) {
      sends[static_cast<std::size_t>(g)].ready = sd.end;
      known[engine_of(g)].push(g);
      changed[engine_of(g)] = 1;
    }
  }
  // Sends in the order they start, each arrival (after its send) before the first send that
  // starts at or after it.
  std::vector<int> arrivals = order;
  std::stable_sort(arrivals.begin(), arrivals.end(),
                   [&](int x, int y) { return sends[x].end < sends[y].end; });
  std::vector<TreeAgStep> out;
  out.reserve(2 * sends.size());
  std::vector<char> sent(sends.size(), 0);
  std::size_t a = 0;
  for (int f : order) {
    while (a < arrivals.size() && sends[arrivals[a]].end <= sends[f].start &&
           sent[static_cast<std::size_t>(arrivals[a])]) {
      TreeAgStep st = sends[arrivals[a++]].step;
      st.arrival = true;
      out.push_back(st);
    }
    out.push_back(sends[f].step);
    sent[static_cast<std::size_t>(f)] = 1;
  }
  for (; a < arrivals.size(); ++a) {
    TreeAgStep st = sends[arrivals[a]].step;
    st.arrival = true;
    out.push_back(st);
  }
  return out;
}

TreeRsCosts tree_rs_costs(const hardware::Profile& prof, const CommPlan& plan,
                          const workload::OperatorSpec& op) {
  TreeRsCosts c;
  if (plan.gpus.empty() || plan.gpus.front() < 0 || plan.gpus.front() >= prof.gpu_count())
    return c;
  const int gpu = plan.gpus.front();
  const workload::GemmShape local = workload::local_gemm(op);
  if (hardware::check_peak_flops(prof, op.dtype).ok() && local.m > 0)
    c.gemm_row_s = hardware::fused_chunk_compute_s(prof, local.m, local.m, local.n, local.k,
                                                   op.dtype, gpu) /
                   static_cast<double>(local.m) * hardware::gemm_slowdown(prof, true, op.tp);
  c.add_row_s = hardware::add_s(prof, gpu, static_cast<double>(op.n) * dtype_bytes(op.dtype));
  c.item_s = prof.overheads.flag_wait_s;
  return c;
}

namespace {

// Round by round: the GEMMs whose sums complete in the round, then, in tree_step_order, each
// rank's adds and its send.
std::vector<TreeRsStep> rs_round_order(const std::vector<TreeShape>& shapes,
                                       const std::vector<std::vector<TreePiece>>& pieces) {
  const int p = static_cast<int>(pieces.size());
  auto round_of = [&](const TreePiece& pc, int v) {
    return pc.chunk + shapes[pc.tree].height - shapes[pc.tree].depth[v];
  };
  int rounds = 0;
  for (int j = 0; j < p; ++j)
    for (const TreePiece& pc : pieces[j]) rounds = std::max(rounds, round_of(pc, j) + 1);
  // Every (rank, owner, piece) step, bucketed by its round in (owner, piece, rank) order.
  struct Step {
    int v, to, owner, piece;
    std::pair<int, int> order;  // tree_step_order(p, v, to, owner)
  };
  std::vector<std::vector<Step>> by_round(static_cast<std::size_t>(rounds));
  for (int j = 0; j < p; ++j)
    for (std::size_t i = 0; i < pieces[j].size(); ++i) {
      const TreePiece& pc = pieces[j][i];
      for (int v = 0; v < p; ++v)
        if (const int rho = round_of(pc, v); rho >= 0 && rho < rounds)
          by_round[static_cast<std::size_t>(rho)].push_back(
              Step{v, v == j ? j : shapes[pc.tree].parent[v], j, static_cast<int>(i), {}});
    }
  std::vector<TreeRsStep> out;
  using Kind = TreeRsStep::Kind;
  for (int rho = 0; rho < rounds; ++rho) {
    // The GEMMs whose sums complete in this round, then its adds and sends, so a partial sum
    // leaves as soon as its own part and its children's are in. (Issuing the next round's GEMMs
    // first, or more rounds ahead, simulates slower on the paper grid:
    // docs/journal/2026-12-02-tree-reduce-scatter.md, "Reduce-scatter program order".)
    std::vector<Step>& steps = by_round[static_cast<std::size_t>(rho)];
    for (const Step& st : steps)
      out.push_back(TreeRsStep{Kind::gemm, st.v, st.owner, st.piece, rho, -1});
    for (Step& st : steps) st.order = tree_step_order(p, st.v, st.to, st.owner);
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Step& a, const Step& b) { return a.order < b.order; });
    for (const Step& st : steps) {
      const TreePiece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
      for (int u : shapes[pc.tree].children.of(static_cast<std::size_t>(st.v)))
        out.push_back(TreeRsStep{Kind::add, st.v, st.owner, st.piece, rho, u});
      if (st.v != st.owner)
        out.push_back(TreeRsStep{Kind::send, st.v, st.owner, st.piece, rho, st.to});
    }
  }
  return out;
}

// A std::priority_queue ordered by `later` with room for n entries from the start.
template <class Heap, class Later>
Heap heap_with_room(Later later, std::size_t n) {
  typename Heap::container_type c;
  c.reserve(n);
  return Heap(later, std::move(c));
}

// A list schedule: each compute stream and copy engine, when it comes free, takes its step of
// the highest priority that is ready by the estimate (patterns.hpp).
std::vector<TreeRsStep> rs_list_order(const TreePlan& plan, const std::vector<TreeShape>& shapes,
                                      const std::vector<std::vector<TreePiece>>& pieces,
                                      double row_bytes, const TreeRsCosts& costs, int engines) {
  using Kind = TreeRsStep::Kind;
  const int p = static_cast<int>(pieces.size());
  const int ne = std::max(1, engines);
  const std::vector<int> eng = tree_engine_table(plan, p, ne, true);  // child * p + parent
  // Every (owner, piece, rank): its sum's state; ids are (base[owner] + piece) * p + rank.
  std::vector<int> base(static_cast<std::size_t>(p) + 1, 0);
  for (int j = 0; j < p; ++j) base[j + 1] = base[j] + static_cast<int>(pieces[j].size());
  struct Sum {
    int owner = 0, piece = 0, rank = 0, round = 0, parent = -1;
    int left = 0;           // its GEMM and adds not yet scheduled
    double complete = 0;    // when the last of them ends
    bool gemm_done = false; // its GEMM is scheduled
    double arrival = -1;    // when its send lands at the parent (-1: not scheduled)
    double bytes = 0;
    std::uint64_t item_key = 0;  // its GEMM's and adds' priority, less the kind and the child
    std::uint64_t send_key = 0;  // its send's priority
  };
  // Priorities, smaller first, packed into one word each: a compute item by its round, adds
  // before GEMMs, owner (rotated after the rank), piece and child; a send by its round,
  // tree_step_order and piece.
  std::size_t most_pieces = 0;
  for (const std::vector<TreePiece>& pc : pieces) most_pieces = std::max(most_pieces, pc.size());
  COMPASS_CHECK(p < 4096 && most_pieces < 65536, "tree reduce-scatter: too many ranks or pieces");
  auto pack = [](std::uint64_t round, std::uint64_t mid, std::uint64_t piece) {
    return round << 41 | mid << 28 | piece << 12;
  };
  std::vector<Sum> sums(static_cast<std::size_t>(base[p]) * p);
  for (int j = 0; j < p; ++j)
    for (std::size_t i = 0; i < pieces[j].size(); ++i) {
      const TreePiece& pc = pieces[j][i];
      const TreeShape& sh = shapes[pc.tree];
      for (int v = 0; v < p; ++v) {
        Sum& s = sums[(static_cast<std::size_t>(base[j]) + i) * p + v];
        const auto children = static_cast<int>(sh.children.of(static_cast<std::size_t>(v)).size());
        s = Sum{.owner = j,
                .piece = static_cast<int>(i),
                .rank = v,
                .round = pc.chunk + sh.height - sh.depth[v],
                .parent = v == j ? -1 : sh.parent[v],
                .left = 1 + children,
                .bytes = static_cast<double>(pc.len) * row_bytes};
        const auto round = static_cast<std::uint64_t>(s.round);
        s.item_key = pack(round, static_cast<std::uint64_t>((j - v + p) % p), i);
        if (s.parent >= 0) {
          const auto [first, second] = tree_step_order(p, v, s.parent, j);
          s.send_key = round << 41 | static_cast<std::uint64_t>(first) << 28 |
                       static_cast<std::uint64_t>(second) << 16 | i;
        }
      }
    }
  auto child_sum = [&](const Sum& s, int u) {
    return (static_cast<std::size_t>(base[s.owner]) + s.piece) * p + u;
  };
  // A compute item: a GEMM piece (child -1) or the add of child `child`'s partial.
  struct Item {
    int sum = 0, child = -1;
    double at = 0;          // an add's: when the child's partial lands
    std::uint64_t key = 0;  // its priority (item_key)
  };
  auto rows = [&](const Sum& s) {
    return static_cast<double>(pieces[s.owner][static_cast<std::size_t>(s.piece)].len);
  };
  auto item_key = [&](int sum, int child) {
    return sums[static_cast<std::size_t>(sum)].item_key |
           static_cast<std::uint64_t>(child < 0) << 40 | static_cast<std::uint64_t>(child + 1);
  };
  // The heaps' orders (std::priority_queue keeps the "latest" last, so the top is the first):
  // by priority, then sum; or by a time (`at`), then priority and sum. For items and sends.
  auto later_item = [](const auto& a, const auto& b) {
    return a.key != b.key ? a.key > b.key : a.sum > b.sum;
  };
  auto later_at = [later_item](const auto& a, const auto& b) {
    if (b.at < a.at) return true;
    if (a.at < b.at) return false;
    return later_item(a, b);
  };
  // Per rank: its GEMM pieces not scheduled (by priority), its adds whose partial's arrival is
  // known (by arrival) and those that have arrived by the time the stream is free (by priority).
  // Each heap has room from the start for every entry it can hold.
  const std::size_t engines_total = static_cast<std::size_t>(p) * ne;
  auto engine_of = [&](const Sum& s) {
    return static_cast<std::size_t>(s.rank) * ne +
           eng[static_cast<std::size_t>(s.rank) * p + s.parent];
  };
  std::vector<std::size_t> adds_at(p, 0), sends_at(engines_total, 0);
  for (const Sum& s : sums) {
    adds_at[s.rank] += static_cast<std::size_t>(s.left - 1);
    if (s.parent >= 0) ++sends_at[engine_of(s)];
  }
  using ItemHeap = std::priority_queue<Item, std::vector<Item>, decltype(later_item)>;
  using ArrivalHeap = std::priority_queue<Item, std::vector<Item>, decltype(later_at)>;
  std::vector<ItemHeap> ready_adds;
  std::vector<ArrivalHeap> known_adds;
  for (int v = 0; v < p; ++v) {
    ready_adds.push_back(heap_with_room<ItemHeap>(later_item, adds_at[v]));
    known_adds.push_back(heap_with_room<ArrivalHeap>(later_at, adds_at[v]));
  }
  std::vector<double> stream_free(p, 0.0);
  // Per rank, its GEMM pieces in priority order and the next one not scheduled.
  std::vector<std::vector<Item>> gemms(p);
  for (std::vector<Item>& g : gemms) g.reserve(static_cast<std::size_t>(base[p]));
  std::vector<std::size_t> next_gemm(p, 0);
  for (std::size_t id = 0; id < sums.size(); ++id)
    gemms[sums[id].rank].push_back(
        Item{static_cast<int>(id), -1, 0, item_key(static_cast<int>(id), -1)});
  for (std::vector<Item>& g : gemms)
    std::sort(g.begin(), g.end(), [&](const Item& a, const Item& b) { return later_item(b, a); });
  // A sum whose partial is complete, with its completion and its send's priority (a sum is
  // complete once its last item is scheduled: neither changes after).
  struct SendEntry {
    int sum = 0;
    double at = 0;
    std::uint64_t key = 0;
  };
  auto send_entry = [&](int id) {
    const Sum& s = sums[static_cast<std::size_t>(id)];
    return SendEntry{id, s.complete, s.send_key};
  };
  // Per copy engine: sums complete at a known time (by that time) and those complete by the
  // time the engine is free (by priority).
  using SendHeap = std::priority_queue<SendEntry, std::vector<SendEntry>, decltype(later_item)>;
  using CompleteHeap = std::priority_queue<SendEntry, std::vector<SendEntry>, decltype(later_at)>;
  std::vector<SendHeap> ready_sends;
  std::vector<CompleteHeap> known_sends;
  for (std::size_t e = 0; e < engines_total; ++e) {
    ready_sends.push_back(heap_with_room<SendHeap>(later_item, sends_at[e]));
    known_sends.push_back(heap_with_room<CompleteHeap>(later_at, sends_at[e]));
  }
  std::vector<double> engine_free(engines_total, 0.0);
  // An add can be scheduled once its rank's GEMM of the piece is and the partial's arrival is.
  auto add_known = [&](int id, int child) {
    const Sum& s = sums[static_cast<std::size_t>(id)];
    known_adds[s.rank].push(
        Item{id, child, sums[child_sum(s, child)].arrival, item_key(id, child)});
  };
  SendClock clock(plan);
  std::vector<TreeRsStep> out;
  std::size_t steps = 0;
  for (const Sum& s : sums) steps += static_cast<std::size_t>(s.left) + (s.parent >= 0);
  out.reserve(steps);
  // Each stream's and each engine's next step and its start (kept up to date whenever what the
  // resource can take changes); the earliest is scheduled (ties: streams before engines, lower
  // ranks first), so nothing scheduled later starts earlier.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Next {
    double t = kInf;
    Item item;  // a stream's
  };
  const int resources = p + static_cast<int>(engines_total);  // streams, then engines
  std::vector<Next> next(static_cast<std::size_t>(resources));
  // The earliest next step, the lowest resource on ties (a time that is not a number never
  // wins).
  EarliestTime earliest(static_cast<std::size_t>(resources));
  auto refresh = [&](int r) {
    Next n;
    if (r < p) {
      const int v = r;
      while (!known_adds[v].empty() && known_adds[v].top().at <= stream_free[v]) {
        ready_adds[v].push(known_adds[v].top());
        known_adds[v].pop();
      }
      const bool gemm_left = next_gemm[v] < gemms[v].size();
      if (!ready_adds[v].empty() &&
          (!gemm_left || later_item(gemms[v][next_gemm[v]], ready_adds[v].top()))) {
        n = Next{stream_free[v], ready_adds[v].top()};
      } else if (gemm_left) {
        n = Next{stream_free[v], gemms[v][next_gemm[v]]};
      } else if (!known_adds[v].empty()) {
        n = Next{known_adds[v].top().at, known_adds[v].top()};
      }
    } else {
      const std::size_t e = static_cast<std::size_t>(r - p);
      while (!known_sends[e].empty() && known_sends[e].top().at <= engine_free[e]) {
        ready_sends[e].push(known_sends[e].top());
        known_sends[e].pop();
      }
      if (!ready_sends[e].empty())
        n.t = engine_free[e];
      else if (!known_sends[e].empty())
        n.t = known_sends[e].top().at;
    }
    next[static_cast<std::size_t>(r)] = n;
    earliest.set(static_cast<std::size_t>(r), n.t);
  };
  for (int r = 0; r < resources; ++r) refresh(r);
  while (out.size() < steps) {
    const int r = static_cast<int>(earliest.index());
    const double best_t = earliest.time();
    if (best_t == kInf) break;  // nothing can run: not a tree
    const int best_rank = r < p ? r : -1;
    const std::size_t best_engine = r < p ? engines_total : static_cast<std::size_t>(r - p);
    const Item best_item = next[static_cast<std::size_t>(r)].item;
    if (best_rank >= 0) {
      const int v = best_rank;
      Sum& s = sums[static_cast<std::size_t>(best_item.sum)];
      double end = best_t;
      if (best_item.child < 0) {
        ++next_gemm[v];
        end += costs.item_s + costs.gemm_row_s * rows(s);
        s.gemm_done = true;
        out.push_back(TreeRsStep{Kind::gemm, v, s.owner, s.piece, s.round, -1});
        for (int u : shapes[pieces[s.owner][static_cast<std::size_t>(s.piece)].tree].children.of(
                 static_cast<std::size_t>(v)))
          if (sums[child_sum(s, u)].arrival >= 0) add_known(best_item.sum, u);
      } else {
        if (!ready_adds[v].empty() && ready_adds[v].top().sum == best_item.sum &&
            ready_adds[v].top().child == best_item.child)
          ready_adds[v].pop();
        else
          known_adds[v].pop();
        end += costs.item_s + costs.add_row_s * rows(s);
        out.push_back(TreeRsStep{Kind::add, v, s.owner, s.piece, s.round, best_item.child});
      }
      stream_free[v] = end;
      s.complete = std::max(s.complete, end);
      refresh(v);
      if (--s.left == 0 && s.parent >= 0) {
        known_sends[engine_of(s)].push(send_entry(best_item.sum));
        refresh(p + static_cast<int>(engine_of(s)));
      }
    } else {
      const std::size_t e = best_engine;
      int id;
      if (!ready_sends[e].empty()) {
        id = ready_sends[e].top().sum;
        ready_sends[e].pop();
      } else {
        id = known_sends[e].top().sum;
        known_sends[e].pop();
      }
      Sum& s = sums[static_cast<std::size_t>(id)];
      const double landed = clock.end(p, s.rank, s.parent, best_t, s.bytes);
      s.arrival = best_t + (landed - best_t) * kArrivalSlack;
      engine_free[e] = landed;
      out.push_back(TreeRsStep{Kind::send, s.rank, s.owner, s.piece, s.round, s.parent});
      const std::size_t at_parent =
          (static_cast<std::size_t>(base[s.owner]) + s.piece) * p + s.parent;
      refresh(r);
      if (sums[at_parent].gemm_done) {
        add_known(static_cast<int>(at_parent), s.rank);
        refresh(s.parent);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<TreeRsStep> tree_reduce_scatter_program(
    const TreePlan& plan, const std::vector<TreeShape>& shapes,
    const std::vector<std::vector<TreePiece>>& pieces, double row_bytes, const TreeRsCosts& costs,
    int engines) {
  if (costs.gemm_row_s <= 0 && costs.add_row_s <= 0 && costs.item_s <= 0)
    return rs_round_order(shapes, pieces);
  return rs_list_order(plan, shapes, pieces, row_bytes, costs, engines);
}

}  // namespace compass::schedule
