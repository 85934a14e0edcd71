// Tree-pattern schedules: every shard (ag_gemm) or chunk (gemm_rs/gemm_ar) is cut into pieces,
// one per (tree, pipeline chunk); pieces travel down their tree (all-gather) or up it
// (reduce-scatter, partial sums added at every forwarding rank). Transfers are emitted in
// pipeline rounds: piece chunk k crosses an edge whose far end is at depth d in round k + d - 1
// (all-gather), or leaves a rank at depth d in round k + (height - d) (reduce-scatter), so every
// copy engine meets its transfers in the order their data becomes ready.

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

#include "compass/schedule/patterns.hpp"
#include "compass/hardware/task_costs.hpp"
#include "compass/schedule/comm_order.hpp"
#include "compass/schedule/tree_graph.hpp"

namespace compass::schedule {

using detail::Builder;
using detail::declare_operands;
using detail::Rows;
using detail::split_rows;
using workload::OpKind;

namespace {
// Largest shard bytes per pipeline chunk of the automatic chunk count, and its limit.
constexpr double kTreeChunkBytes = 1.0 * 1024 * 1024;
constexpr int kTreeMaxChunks = 32;
// The reduce-scatter's list schedule (rs_list_order) expects a partial sum at its parent this
// many times its estimated transfer time after the send starts. The estimate lets a link
// direction carry one send at a time, so of k equal sends started together the first is
// expected after 1/k of the time that max-min sharing (the simulator, the model) gives them
// all; expecting partials later makes a compute stream take a GEMM piece rather than block on
// an add whose partial is still on its way. 1.5 is the mean of the two sends' ratios for k = 2;
// measured against 1, 1.1, 1.25 and 2 in docs/journal/2026-12-02-tree-reduce-scatter.md,
// "Reduce-scatter by list schedule".
constexpr double kArrivalSlack = 1.5;
}  // namespace

namespace {

// Whether, with one chunk per tree, every rank sends in every round what it sends in round 0:
// the same share of a shard to each of the same receivers, in the all-gather (the edge into
// depth d in round d - 1) and in the reduce-scatter (a rank at depth d to its parent in round
// height - d). Then every sender is busy on the same links in every round and pipelining has
// nothing to fill. Trees of depth 1 (one round) and the ring's paths (every rank forwards one
// shard to its successor per round) are such plans.
bool rounds_balanced(const TreePlan& plan) {
  const int p = plan.trees.empty() ? 1 : static_cast<int>(plan.trees.front().edges.size()) + 1;
  const auto n = static_cast<std::size_t>(p);
  std::vector<TreeShape> shapes;
  int rounds = 1;
  for (const RankTree& t : plan.trees) {
    shapes.push_back(tree_shape(t, p));
    rounds = std::max(rounds, shapes.back().height);
  }
  for (const bool up : {false, true}) {
    // sent[round][from * p + to]: share of a shard sent in that round.
    std::vector<std::vector<double>> sent(static_cast<std::size_t>(rounds),
                                          std::vector<double>(n * n, 0.0));
    for (std::size_t i = 0; i < plan.trees.size(); ++i) {
      const TreeShape& sh = shapes[i];
      for (auto [a, b] : plan.trees[i].edges) {
        const int round = up ? sh.height - sh.depth[b] : sh.depth[b] - 1;
        const std::size_t from = static_cast<std::size_t>(up ? b : a);
        const std::size_t to = static_cast<std::size_t>(up ? a : b);
        sent[static_cast<std::size_t>(round)][from * n + to] += plan.trees[i].share;
      }
    }
    for (const std::vector<double>& r : sent)
      for (std::size_t k = 0; k < r.size(); ++k)
        if (std::fabs(r[k] - sent.front()[k]) > 1e-9) return false;
  }
  return true;
}

}  // namespace

int tree_chunks(const TreePlan& plan, double shard_bytes) {
  if (plan.chunks > 0) return plan.chunks;
  // Chunks pipeline forwarding behind arrival; where every round already keeps every sender
  // busy on the same links, they only add transfers.
  if (rounds_balanced(plan)) return 1;
  const double c = std::ceil(shard_bytes / kTreeChunkBytes);
  return static_cast<int>(std::clamp(c, 1.0, static_cast<double>(kTreeMaxChunks)));
}

namespace {

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

std::pair<int, int> tree_step_order(int p, int from, int to, int owner) {
  if (from == owner && to == owner) return {p, 0};
  return {(to - from + p) % p, (owner - from + p) % p};
}

TreePlan direct_tree_plan(int p) {
  TreePlan plan;
  for (int r = 0; r < p; ++r) {
    RankTree t{r, 1.0, {}};
    for (int k = 1; k < p; ++k) t.edges.push_back({r, all2all_peer(r, k, p)});
    plan.trees.push_back(std::move(t));
  }
  return plan;
}

Status validate_tree_plan(const TreePlan& plan, int p) {
  std::vector<int> gpus(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) gpus[r] = r;
  hardware::TreePattern t;
  t.gpus = gpus;
  for (const RankTree& rt : plan.trees) t.trees.push_back({rt.root, rt.share, rt.edges});
  if (plan.chunks < 0) return make_error("tree plan: chunks must not be negative");
  if (!plan.routes.empty() && plan.routes.size() != static_cast<std::size_t>(p) * p)
    return make_error("tree plan: {} route costs for {} ranks (needs none or {})",
                      plan.routes.size(), p, p * p);
  for (const RouteCost& rc : plan.routes) {
    if (!(rc.fixed_s >= 0)) return make_error("tree plan: a route's fixed cost is negative");
    for (auto [dir, bw] : rc.links)
      if (dir < 0 || !(bw > 0)) return make_error("tree plan: a route link has no bandwidth");
  }
  return hardware::validate_pattern(t, gpus);
}

std::vector<RouteCost> route_costs(const hardware::Profile& profile, const std::vector<int>& gpus) {
  const std::size_t p = gpus.size();
  std::vector<RouteCost> out(p * p);
  for (std::size_t a = 0; a < p; ++a)
    for (std::size_t b = 0; b < p; ++b) {
      if (a == b) continue;
      RouteCost& rc = out[a * p + b];
      rc.fixed_s = hardware::copy_issue_s(profile) + profile.route_latency_s(gpus[a], gpus[b]);
      for (const hardware::Hop& h : profile.route(gpus[a], gpus[b]).hops)
        rc.links.emplace_back(h.link * 2 + (h.forward ? 0 : 1), profile.hop_bandwidth(h));
    }
  return out;
}

Result<TreePlan> tree_plan_from(const hardware::Profile& profile, const hardware::TreePattern& t,
                                const std::vector<int>& gpus) {
  COMPASS_TRY(hardware::validate_pattern(t, gpus));
  auto rank_of = [&](int gpu) {
    return static_cast<int>(std::find(gpus.begin(), gpus.end(), gpu) - gpus.begin());
  };
  TreePlan plan;
  for (const hardware::BroadcastTree& bt : t.trees) {
    RankTree rt{rank_of(bt.root), bt.share, {}};
    for (auto [a, b] : bt.edges) rt.edges.push_back({rank_of(a), rank_of(b)});
    plan.trees.push_back(std::move(rt));
  }
  plan.routes = route_costs(profile, gpus);
  return plan;
}

TreeShape tree_shape(const RankTree& t, int p) {
  const auto n = static_cast<std::size_t>(p);
  TreeShape s{std::vector<int>(n, -1), std::vector<int>(n, -1), std::vector<std::vector<int>>(n),
              0};
  s.depth[t.root] = 0;
  for (auto [a, b] : t.edges) {
    s.depth[b] = s.depth[a] + 1;
    s.parent[b] = a;
    s.children[a].push_back(b);
    s.height = std::max(s.height, s.depth[b]);
  }
  return s;
}

std::vector<TreeShape> tree_shapes(const TreePlan& plan, int p) {
  std::vector<TreeShape> out;
  out.reserve(plan.trees.size());
  for (const RankTree& t : plan.trees) out.push_back(tree_shape(t, p));
  return out;
}

std::map<std::pair<int, int>, int> tree_engines(const TreePlan& plan, int engines, bool up) {
  std::map<std::pair<int, int>, int> eng;
  std::map<int, int> next;
  for (const RankTree& t : plan.trees)
    for (auto [a, b] : t.edges) {
      const std::pair<int, int> e = up ? std::make_pair(b, a) : std::make_pair(a, b);
      if (!eng.count(e)) eng[e] = next[e.first]++ % std::max(1, engines);
    }
  return eng;
}

std::vector<int> tree_engine_table(const TreePlan& plan, int p, int engines, bool up) {
  std::vector<int> t(static_cast<std::size_t>(p) * p, -1);
  for (const auto& [edge, e] : tree_engines(plan, engines, up))
    t[static_cast<std::size_t>(edge.first) * p + edge.second] = e;
  return t;
}

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
  std::vector<std::vector<int>> next(sends.size());
  for (std::size_t f = 0; f < sends.size(); ++f) {
    const TreeAgStep& st = sends[f].step;
    if (st.from == st.owner) continue;
    sends[f].dep = into_at(st.from, st.owner, st.piece);
    next[static_cast<std::size_t>(sends[f].dep)].push_back(static_cast<int>(f));
  }
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
  std::vector<int> order;  // sends in the order they start
  order.reserve(sends.size());
  while (order.size() < sends.size()) {
    std::size_t best_e = engines_total;
    std::pair<double, int> best{0.0, -1};
    for (std::size_t e = 0; e < engines_total; ++e) {
      const std::pair<double, int> c = candidate(e);
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
    order.push_back(f);
    for (int g : next[static_cast<std::size_t>(f)]) {
      sends[static_cast<std::size_t>(g)].ready = sd.end;
      known[engine_of(g)].push(g);
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

TreeRsCosts tree_rs_costs(const CommPlan& plan, const workload::OperatorSpec& op) {
  TreeRsCosts c;
  if (!plan.profile || plan.gpus.empty()) return c;
  const hardware::Profile& prof = *plan.profile;
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
      for (int u : shapes[pc.tree].children[st.v])
        out.push_back(TreeRsStep{Kind::add, st.v, st.owner, st.piece, rho, u});
      if (st.v != st.owner)
        out.push_back(TreeRsStep{Kind::send, st.v, st.owner, st.piece, rho, st.to});
    }
  }
  return out;
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
        s = Sum{j, static_cast<int>(i), v, pc.chunk + sh.height - sh.depth[v],
                v == j ? -1 : sh.parent[v], 1 + static_cast<int>(sh.children[v].size()),
                0, false, -1, static_cast<double>(pc.len) * row_bytes, 0, 0};
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
    double arrival = 0;  // an add's: when the child's partial lands
  };
  auto rows = [&](const Sum& s) {
    return static_cast<double>(pieces[s.owner][static_cast<std::size_t>(s.piece)].len);
  };
  auto item_key = [&](const Item& it) {
    return sums[static_cast<std::size_t>(it.sum)].item_key |
           static_cast<std::uint64_t>(it.child < 0) << 40 | static_cast<std::uint64_t>(it.child + 1);
  };
  auto send_key = [&](int id) { return sums[static_cast<std::size_t>(id)].send_key; };
  // Per rank: its GEMM pieces not scheduled (by priority), its adds whose partial's arrival is
  // known (by arrival) and those that have arrived by the time the stream is free (by priority).
  auto later_item = [&](const Item& a, const Item& b) {
    return std::make_tuple(item_key(a), a.sum) > std::make_tuple(item_key(b), b.sum);
  };
  auto later_arrival = [&](const Item& a, const Item& b) {
    return std::make_tuple(a.arrival, item_key(a), a.sum) >
           std::make_tuple(b.arrival, item_key(b), b.sum);
  };
  using ItemHeap = std::priority_queue<Item, std::vector<Item>, decltype(later_item)>;
  using ArrivalHeap = std::priority_queue<Item, std::vector<Item>, decltype(later_arrival)>;
  std::vector<ItemHeap> ready_adds(p, ItemHeap(later_item));
  std::vector<ArrivalHeap> known_adds(p, ArrivalHeap(later_arrival));
  std::vector<double> stream_free(p, 0.0);
  // Per rank, its GEMM pieces in priority order and the next one not scheduled.
  std::vector<std::vector<Item>> gemms(p);
  std::vector<std::size_t> next_gemm(p, 0);
  for (std::size_t id = 0; id < sums.size(); ++id)
    gemms[sums[id].rank].push_back(Item{static_cast<int>(id), -1, 0});
  for (std::vector<Item>& g : gemms)
    std::sort(g.begin(), g.end(), [&](const Item& a, const Item& b) { return later_item(b, a); });
  // Per copy engine: sums complete at a known time (by that time) and those complete by the
  // time the engine is free (by priority).
  auto later_send = [&](int a, int b) {
    return std::make_tuple(send_key(a), a) > std::make_tuple(send_key(b), b);
  };
  auto later_complete = [&](int a, int b) {
    return std::make_tuple(sums[a].complete, send_key(a), a) >
           std::make_tuple(sums[b].complete, send_key(b), b);
  };
  using SendHeap = std::priority_queue<int, std::vector<int>, decltype(later_send)>;
  using CompleteHeap = std::priority_queue<int, std::vector<int>, decltype(later_complete)>;
  const std::size_t engines_total = static_cast<std::size_t>(p) * ne;
  std::vector<SendHeap> ready_sends(engines_total, SendHeap(later_send));
  std::vector<CompleteHeap> known_sends(engines_total, CompleteHeap(later_complete));
  std::vector<double> engine_free(engines_total, 0.0);
  auto engine_of = [&](const Sum& s) {
    return static_cast<std::size_t>(s.rank) * ne +
           eng[static_cast<std::size_t>(s.rank) * p + s.parent];
  };
  // An add can be scheduled once its rank's GEMM of the piece is and the partial's arrival is.
  auto add_known = [&](int id, int child) {
    const Sum& s = sums[static_cast<std::size_t>(id)];
    known_adds[s.rank].push(Item{id, child, sums[child_sum(s, child)].arrival});
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
  std::vector<unsigned> version(static_cast<std::size_t>(resources), 0);
  using Entry = std::tuple<double, int, unsigned>;  // (start, resource, version)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> starts;
  auto refresh = [&](int r) {
    Next n;
    if (r < p) {
      const int v = r;
      while (!known_adds[v].empty() && known_adds[v].top().arrival <= stream_free[v]) {
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
        n = Next{known_adds[v].top().arrival, known_adds[v].top()};
      }
    } else {
      const std::size_t e = static_cast<std::size_t>(r - p);
      while (!known_sends[e].empty() && sums[known_sends[e].top()].complete <= engine_free[e]) {
        ready_sends[e].push(known_sends[e].top());
        known_sends[e].pop();
      }
      if (!ready_sends[e].empty()) n.t = engine_free[e];
      else if (!known_sends[e].empty()) n.t = sums[known_sends[e].top()].complete;
    }
    next[static_cast<std::size_t>(r)] = n;
    ++version[static_cast<std::size_t>(r)];
    if (n.t < kInf) starts.emplace(n.t, r, version[static_cast<std::size_t>(r)]);
  };
  for (int r = 0; r < resources; ++r) refresh(r);
  while (out.size() < steps) {
    while (!starts.empty() &&
           std::get<2>(starts.top()) != version[static_cast<std::size_t>(std::get<1>(starts.top()))])
      starts.pop();
    if (starts.empty()) break;  // nothing can run: not a tree
    const int r = std::get<1>(starts.top());
    starts.pop();
    const double best_t = next[static_cast<std::size_t>(r)].t;
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
        for (int u : shapes[pieces[s.owner][static_cast<std::size_t>(s.piece)].tree].children[v])
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
        known_sends[engine_of(s)].push(best_item.sum);
        refresh(p + static_cast<int>(engine_of(s)));
      }
    } else {
      const std::size_t e = best_engine;
      int id;
      if (!ready_sends[e].empty()) {
        id = ready_sends[e].top();
        ready_sends[e].pop();
      } else {
        id = known_sends[e].top();
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

std::vector<TreePiece> tree_pieces(const TreePlan& plan, int root, std::int64_t len, int chunks) {
  std::vector<TreePiece> out;
  double cum = 0;
  std::int64_t off = 0;
  std::vector<int> trees;
  for (std::size_t i = 0; i < plan.trees.size(); ++i)
    if (plan.trees[i].root == root) trees.push_back(static_cast<int>(i));
  for (std::size_t j = 0; j < trees.size(); ++j) {
    cum += plan.trees[trees[j]].share;
    const std::int64_t end = j + 1 == trees.size()
                                 ? len
                                 : std::min(len, static_cast<std::int64_t>(std::llround(cum * len)));
    const std::int64_t tree_len = std::max<std::int64_t>(0, end - off);
    // Automatic chunks: a tree carrying a share s of the shard gets s of them, so every
    // tree's pieces have about the same size.
    const int n = plan.chunks > 0 ? chunks
                                  : static_cast<int>(std::clamp(
                                        std::round(plan.trees[trees[j]].share * chunks), 1.0,
                                        static_cast<double>(std::max(1, chunks))));
    for (int k = 0; k < n; ++k) {
      const detail::Rows r = split_rows(tree_len, n, k);
      if (r.len > 0) out.push_back(TreePiece{trees[j], k, off + r.off, r.len});
    }
    off += tree_len;
  }
  return out;
}

namespace detail {
namespace {

// One piece: rows [rows.off, +len) of the root's shard/chunk, carried by tree `tree` as
// pipeline chunk `chunk`.
struct Piece {
  int tree = 0;
  int chunk = 0;
  Rows rows;
};

std::vector<Piece> pieces_of(const TreePlan& plan, int root, std::int64_t len, int chunks) {
  std::vector<Piece> out;
  for (const TreePiece& t : tree_pieces(plan, root, len, chunks))
    out.push_back(Piece{t.tree, t.chunk, Rows{t.off, t.len}});
  return out;
}

// The same pieces as schedule::TreePiece, the form the programs take.
std::vector<std::vector<TreePiece>> as_tree_pieces(const std::vector<std::vector<Piece>>& pieces) {
  std::vector<std::vector<TreePiece>> out(pieces.size());
  for (std::size_t o = 0; o < pieces.size(); ++o)
    for (const Piece& pc : pieces[o])
      out[o].push_back(TreePiece{pc.tree, pc.chunk, pc.rows.off, pc.rows.len});
  return out;
}

struct Graph {
  Builder& b;
  const workload::OperatorSpec& op;
  const TreePlan& plan;
  int p;
  int chunks;
  std::vector<TreeShape> shapes;
  int engines;
  double row_bytes;
  std::map<std::pair<int, int>, int> eng_up;  // (child, parent): reduce-scatter sends
  TreeRsCosts rs_costs;                       // the reduce-scatter's compute order

  Rows chunk_rows(int j) const { return workload::row_share(op, j); }
};

// All-gather of each root's rows: `src(root, rows_in_shard)` on the root, `dst(rank, root,
// rows_in_shard)` everywhere; `on_arrival(rank, root, piece, round)` where the piece's arrival
// comes in tree_allgather_program's order.
template <class Src, class Dst, class Arrive>
void tree_allgather_rounds(Graph& g, const std::vector<std::vector<Piece>>& pieces, const Src& src,
                           const Dst& dst, const Arrive& on_arrival, const char* tag) {
  for (const TreeAgStep& e : tree_allgather_program(g.plan, g.shapes, as_tree_pieces(pieces),
                                                    g.row_bytes, g.engines)) {
    const Piece& pc = pieces[e.owner][static_cast<std::size_t>(e.piece)];
    if (e.arrival) {
      on_arrival(e.to, e.owner, pc, e.round);
      continue;
    }
    Region s = e.from == e.owner ? src(e.owner, pc.rows) : dst(e.from, e.owner, pc.rows);
    g.b.transfer(s, dst(e.to, e.owner, pc.rows), e.engine, pc.tree, e.round, e.owner,
                 fmt::format("r{} {} s{} c{} t{} k{} ->r{}", e.from, tag, e.round, e.owner,
                             pc.tree, pc.chunk, e.to));
  }
}

void ag_graph(Graph& g, bool gemms) {
  const int p = g.p;
  const std::int64_t shard = workload::shard_rows(g.op);
  for (int r = 0; r < p; ++r) {
    declare_operands(g.b, g.op, r, /*input_only=*/!gemms);
    if (p > 1) g.b.buffer(r, "xg", g.op.m, g.op.k, BufferRole::scratch);
  }
  if (gemms)
    for (int r = 0; r < p; ++r)
      g.b.gemm(r, g.b.whole(r, "x"), g.b.whole(r, "w"), g.b.rows(r, "y", g.chunk_rows(r)), 0, r,
               fmt::format("r{} gemm own c{}", r, r));
  if (p == 1) return;
  std::vector<std::vector<Piece>> pieces(p);
  for (int o = 0; o < p; ++o) pieces[o] = pieces_of(g.plan, o, shard, g.chunks);
  auto global = [&](int o, Rows r) { return Rows{o * shard + r.off, r.len}; };
  tree_allgather_rounds(
      g, pieces, [&](int o, Rows r) { return g.b.rows(o, "x", r); },
      [&](int rank, int o, Rows r) { return g.b.rows(rank, "xg", global(o, r)); },
      [&](int r, int o, const Piece& pc, int rho) {
        if (!gemms) return;
        g.b.gemm(r, g.b.rows(r, "xg", global(o, pc.rows)), g.b.whole(r, "w"),
                 g.b.rows(r, "y", global(o, pc.rows)), rho + 1, o,
                 fmt::format("r{} gemm s{} c{} t{} k{}", r, rho + 1, o, pc.tree, pc.chunk));
      },
      "ag");
}

void rs_graph(Graph& g) {
  const int p = g.p;
  const bool ar = g.op.kind == OpKind::gemm_ar;
  std::vector<std::vector<Piece>> pieces(p);
  for (int j = 0; j < p; ++j) pieces[j] = pieces_of(g.plan, j, g.chunk_rows(j).len, g.chunks);
  // Receive slots: one per (receiving rank, owner, piece, child), rows allocated in order.
  std::map<std::tuple<int, int, int, int, int>, Rows> slot;  // (rank, owner, tree, chunk, child)
  std::vector<std::int64_t> recv_rows(p, 0);
  for (int j = 0; j < p; ++j)
    for (const Piece& pc : pieces[j]) {
      const TreeShape& sh = g.shapes[pc.tree];
      for (int v = 0; v < p; ++v)
        for (int u : sh.children[v]) {
          slot[{v, j, pc.tree, pc.chunk, u}] = Rows{recv_rows[v], pc.rows.len};
          recv_rows[v] += pc.rows.len;
        }
    }
  for (int r = 0; r < p; ++r) {
    declare_operands(g.b, g.op, r);
    if (p > 1 && !ar) g.b.buffer(r, "part", g.op.m, g.op.n, BufferRole::scratch);
    if (p > 1 && recv_rows[r] > 0) g.b.buffer(r, "recv", recv_rows[r], g.op.n, BufferRole::scratch);
  }
  auto global = [&](int j, Rows r) { return Rows{g.chunk_rows(j).off + r.off, r.len}; };
  // Where rank v keeps its running sum of owner j's rows `r` (the owner: its output).
  auto sum_at = [&](int v, int j, Rows r) {
    if (v == j) return g.b.rows(v, "y", ar ? global(j, r) : r);
    return g.b.rows(v, ar ? "y" : "part", global(j, r));
  };
  for (const TreeRsStep& st :
       tree_reduce_scatter_program(g.plan, g.shapes, as_tree_pieces(pieces), g.row_bytes,
                                   g.rs_costs, g.engines)) {
    const Piece& pc = pieces[st.owner][static_cast<std::size_t>(st.piece)];
    const int v = st.rank, j = st.owner, rho = st.round;
    switch (st.kind) {
      case TreeRsStep::Kind::gemm:
        g.b.gemm(v, g.b.rows(v, "x", global(j, pc.rows)), g.b.whole(v, "w"), sum_at(v, j, pc.rows),
                 rho, j, fmt::format("r{} gemm s{} c{} t{} k{}", v, rho, j, pc.tree, pc.chunk));
        break;
      case TreeRsStep::Kind::add:
        g.b.add(v, g.b.rows(v, "recv", slot.at({v, j, pc.tree, pc.chunk, st.peer})),
                sum_at(v, j, pc.rows), rho, j,
                fmt::format("r{} add s{} c{} t{} k{} from r{}", v, rho, j, pc.tree, pc.chunk,
                            st.peer));
        break;
      case TreeRsStep::Kind::send:
        g.b.transfer(sum_at(v, j, pc.rows),
                     g.b.rows(st.peer, "recv", slot.at({st.peer, j, pc.tree, pc.chunk, v})),
                     g.eng_up.at({v, st.peer}), pc.tree, rho, j,
                     fmt::format("r{} rs s{} c{} t{} k{} ->r{}", v, rho, j, pc.tree, pc.chunk,
                                 st.peer));
        break;
    }
  }
  if (!ar) return;
  // gemm_ar: the reduced chunks go down the same trees.
  tree_allgather_rounds(
      g, pieces, [&](int j, Rows r) { return g.b.rows(j, "y", global(j, r)); },
      [&](int rank, int j, Rows r) { return g.b.rows(rank, "y", global(j, r)); },
      [](int, int, const Piece&, int) {}, "ag");
}

}  // namespace

void tree_pattern_graph(Builder& b, const workload::OperatorSpec& op, const TreePlan& plan,
                        int engines, const TreeRsCosts& rs_costs, bool gemms) {
  const int p = op.tp;
  const double cols = op.kind == OpKind::ag_gemm ? op.k : op.n;
  const double shard_bytes =
      static_cast<double>(workload::max_row_share(op)) * cols * dtype_bytes(op.dtype);
  Graph g{b,
          op,
          plan,
          p,
          tree_chunks(plan, shard_bytes),
          tree_shapes(plan, p),
          engines,
          cols * dtype_bytes(op.dtype),
          tree_engines(plan, engines, true),
          rs_costs};
  if (op.kind == OpKind::ag_gemm) {
    ag_graph(g, gemms);
  } else if (p == 1) {
    declare_operands(b, op, 0);
    b.gemm(0, b.whole(0, "x"), b.whole(0, "w"), b.whole(0, "y"), 0, 0, "r0 gemm");
  } else {
    rs_graph(g);
  }
}

}  // namespace detail

Result<Schedule> tree_allgather(const TreePlan& plan, const std::vector<int>& gpus,
                                int copy_engines, std::int64_t shard_rows, std::int64_t cols) {
  const int p = static_cast<int>(gpus.size());
  if (p < 2) return make_error("tree all-gather: needs at least 2 ranks, got {}", p);
  if (shard_rows < 1 || cols < 1)
    return make_error("tree all-gather: shards of {} x {} are empty", shard_rows, cols);
  if (copy_engines < 1) return make_error("tree all-gather: copy_engines must be at least 1");
  COMPASS_TRY(validate_tree_plan(plan, p));
  workload::OperatorSpec op{OpKind::ag_gemm, shard_rows * p, p, cols, p, DType::bf16, ""};
  Builder b(op, Strategy{StrategyKind::fuse_synth, 0}, gpus);
  detail::tree_pattern_graph(b, op, plan, copy_engines, TreeRsCosts{}, /*gemms=*/false);
  Schedule s = std::move(b).finish();
  COMPASS_TRY(validate(s));
  return s;
}

}  // namespace compass::schedule
