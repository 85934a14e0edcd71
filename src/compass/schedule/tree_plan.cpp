// Tree plans (docs/patterns.md): the trees of a pattern on a TP group, their shapes, copy
// engines and pipeline chunks, and the pieces a root's rows are cut into.

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

using detail::split_rows;

namespace {
// Largest shard bytes per pipeline chunk of the automatic chunk count, and its limit.
constexpr double kTreeChunkBytes = 1.0 * 1024 * 1024;
constexpr int kTreeMaxChunks = 32;
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
  TreeShape s{std::vector<int>(n, -1), std::vector<int>(n, -1), {}, 0};
  s.depth[t.root] = 0;
  for (auto [a, b] : t.edges) {
    s.depth[b] = s.depth[a] + 1;
    s.parent[b] = a;
    s.height = std::max(s.height, s.depth[b]);
  }
  s.children = IndexLists(n, t.edges);
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

}  // namespace compass::schedule
