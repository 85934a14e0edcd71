// Broadcast-tree patterns from the topology: the hierarchical construction and the
// multiplicative-weights tree packing (docs/patterns.md).

#include "compass/hardware/synthesis.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "compass/core/units.hpp"
#include "compass/hardware/flows.hpp"

namespace compass::hardware {
namespace {

/// Rounds of the multiplicative-weights packing: each round adds 1/kRounds of every shard.
constexpr int kRounds = 24;
/// Growth of a resource's price with its load relative to the hierarchical pattern's busiest
/// resource: price = exp(kPriceGrowth * load / reference).
constexpr double kPriceGrowth = 8.0;
/// Trees kept per root after packing (the largest shares, renormalised).
constexpr int kMaxTreesPerRoot = 4;
/// Trees per root of the hierarchical pattern (equal shares, built one after another).
constexpr int kHierTreesPerRoot = 1;
/// Rip-up-and-reroute passes over the hierarchical trees.
constexpr int kReroutePasses = 4;

// Resources are link directions (dense direction ids) and then one copy-engine pool per GPU of
// the group. Loads are in busy seconds per byte of a whole shard.
struct Group {
  int n = 0;
  std::vector<int> gpus;
  int resources = 0;
  // [a * n + b]: (resource, busy seconds per shard byte) of moving data a -> b
  std::vector<std::vector<std::pair<int, double>>> cost;
  std::vector<int> hops;  // [a * n + b]: route hop count

  const std::vector<std::pair<int, double>>& edge(int a, int b) const { return cost[a * n + b]; }
};

Group make_group(const Profile& p, const std::vector<int>& gpus) {
  Group g;
  g.n = static_cast<int>(gpus.size());
  g.gpus = gpus;
  const std::vector<double> cap = sharing::dir_capacities(p);
  const int dirs = static_cast<int>(cap.size());
  g.resources = dirs + g.n;
  g.cost.resize(static_cast<std::size_t>(g.n * g.n));
  g.hops.assign(static_cast<std::size_t>(g.n * g.n), 0);
  for (int a = 0; a < g.n; ++a) {
    const double engines = std::max(1, p.gpu_device(gpus[a]).copy_engines);
    for (int b = 0; b < g.n; ++b) {
      if (a == b) continue;
      auto& c = g.cost[a * g.n + b];
      for (int d : sharing::route_dirs(p, gpus[a], gpus[b]))
        c.push_back({d, cap[d] > 0 ? 1.0 / cap[d] : std::numeric_limits<double>::infinity()});
      const double bw = p.route_bandwidth(gpus[a], gpus[b]);
      c.push_back({dirs + a, bw > 0 ? 1.0 / (bw * engines) : std::numeric_limits<double>::infinity()});
      g.hops[a * g.n + b] = static_cast<int>(p.route(gpus[a], gpus[b]).hops.size());
    }
  }
  return g;
}

// A tree under construction, in local indices.
struct LocalTree {
  int root = 0;
  double share = 0;
  std::vector<std::pair<int, int>> edges;
};

void add_load(const Group& g, std::vector<double>& load, int a, int b, double share) {
  for (auto [r, c] : g.edge(a, b)) load[r] += c * share;
}

// Busiest resource after adding a -> b with `share` (only the edge's own resources change).
double max_after(const Group& g, const std::vector<double>& load, int a, int b, double share) {
  double m = 0;
  for (auto [r, c] : g.edge(a, b)) m = std::max(m, load[r] + c * share);
  return m;
}

// Growth of the sum of squared loads when a -> b carries `share`.
double square_growth(const Group& g, const std::vector<double>& load, int a, int b, double share) {
  double d = 0;
  for (auto [r, c] : g.edge(a, b)) d += c * share * (2 * load[r] + c * share);
  return d;
}

void remove_load(const Group& g, std::vector<double>& load, const LocalTree& t) {
  for (auto [a, b] : t.edges)
    for (auto [r, c] : g.edge(a, b)) load[r] = std::max(0.0, load[r] - c * t.share);
}

double max_load(const std::vector<double>& load) {
  return load.empty() ? 0.0 : *std::max_element(load.begin(), load.end());
}

// ---- hierarchical --------------------------------------------------------------------------

// Cluster ids per level: level L joins GPUs whose routes (both ways) have at most levels[L]
// hops; the last level holds the whole group.
std::vector<std::vector<int>> cluster_levels(const Group& g) {
  std::vector<int> thresholds;
  for (int a = 0; a < g.n; ++a)
    for (int b = a + 1; b < g.n; ++b)
      thresholds.push_back(std::max(g.hops[a * g.n + b], g.hops[b * g.n + a]));
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  std::vector<std::vector<int>> levels;
  for (int t : thresholds) {
    std::vector<int> comp(g.n);
    std::iota(comp.begin(), comp.end(), 0);
    auto find = [&](int x) {
      while (comp[x] != x) x = comp[x] = comp[comp[x]];
      return x;
    };
    for (int a = 0; a < g.n; ++a)
      for (int b = a + 1; b < g.n; ++b)
        if (std::max(g.hops[a * g.n + b], g.hops[b * g.n + a]) <= t) comp[find(a)] = find(b);
    for (int a = 0; a < g.n; ++a) comp[a] = find(a);
    levels.push_back(comp);
  }
  return levels;
}

// Spreads the data from `h` (its only holder inside its cluster at `level`) over that cluster,
// innermost first: at level 0 the GPUs of h's smallest cluster, then at each level l every
// cluster of level l-1 inside h's level-l cluster that has no copy yet gets one (from the
// holder whose route ends up least loaded, greedily) and is filled the same way from there.
// So a shard enters every cluster exactly once (gather within, exchange across, distribute).
void spread(const Group& g, const std::vector<std::vector<int>>& levels, int h, int level,
            LocalTree& t, std::vector<int>& depth, std::vector<double>& load) {
  for (int l = 0; l <= level; ++l) {
    const int cid = levels[l][h];
    auto child_of = [&](int v) { return l == 0 ? v : levels[l - 1][v]; };
    std::vector<int> members;
    for (int v = 0; v < g.n; ++v)
      if (levels[l][v] == cid) members.push_back(v);
    for (;;) {
      std::vector<char> reached(static_cast<std::size_t>(g.n), 0);  // by child cluster id
      for (int v : members)
        if (depth[v] >= 0) reached[child_of(v)] = 1;
      int best_src = -1, best_dst = -1, best_depth = 0, best_rot = 0;
      double best = 0, best_sq = 0;
      // Edges that keep the busiest resource where it is all tie on the first key, so depth
      // decides among them (stars rather than chains where the load allows).
      const double busiest = max_load(load);
      for (int dst : members) {
        if (reached[child_of(dst)]) continue;
        for (int src : members) {
          // Innermost clusters are served by their entry GPU alone (a star: one hop from it).
          if (depth[src] < 0 || (l == 0 && src != h)) continue;
          // Busiest resource overall after the edge, then the shallower source (short
          // pipelines), then the growth of the sum of squared loads (the most even loads).
          const double m = std::max(busiest, max_after(g, load, src, dst, t.share));
          const double sq = square_growth(g, load, src, dst, t.share);
          const int rot = (dst - t.root + g.n) % g.n;
          bool take = best_src < 0 || less_tol(m, best);
          if (!take && !less_tol(best, m)) {
            if (depth[src] != best_depth) {
              take = depth[src] < best_depth;
            } else if (less_tol(sq, best_sq)) {
              take = true;
            } else if (!less_tol(best_sq, sq)) {
              take = rot < best_rot;
            }
          }
          if (take) {
            best = m;
            best_sq = sq;
            best_src = src;
            best_dst = dst;
            best_depth = depth[src];
            best_rot = rot;
          }
        }
      }
      if (best_src < 0) break;
      t.edges.push_back({best_src, best_dst});
      depth[best_dst] = depth[best_src] + 1;
      add_load(g, load, best_src, best_dst, t.share);
      spread(g, levels, best_dst, l - 1, t, depth, load);
    }
  }
}

std::vector<LocalTree> hierarchical_trees(const Group& g, std::vector<double>& load) {
  const auto levels = cluster_levels(g);
  std::vector<LocalTree> out;
  if (g.n < 2) return out;
  // Root-major rounds: tree k of every root before tree k+1, so early roots do not take all the
  // cheap links.
  for (int k = 0; k < kHierTreesPerRoot; ++k)
    for (int root = 0; root < g.n; ++root) {
      LocalTree t{root, 1.0 / kHierTreesPerRoot, {}};
      std::vector<int> depth(g.n, -1);
      depth[root] = 0;
      spread(g, levels, root, static_cast<int>(levels.size()) - 1, t, depth, load);
      out.push_back(std::move(t));
    }
  // Rip up and reroute: rebuild each tree with every other tree's load known, keeping the new
  // one only when the busiest resource does not get worse.
  for (int pass = 0; pass < kReroutePasses; ++pass)
    for (LocalTree& old : out) {
      const double before = max_load(load);
      remove_load(g, load, old);
      LocalTree t{old.root, old.share, {}};
      std::vector<int> depth(g.n, -1);
      depth[old.root] = 0;
      spread(g, levels, old.root, static_cast<int>(levels.size()) - 1, t, depth, load);
      if (less_tol(before, max_load(load))) {
        remove_load(g, load, t);
        for (auto [a, b] : old.edges) add_load(g, load, a, b, old.share);
      } else {
        old = std::move(t);
      }
    }
  return out;
}

// ---- multiplicative-weights packing ----------------------------------------------------------

// Grows a spanning tree from `root` edge by edge, always adding the edge (holder -> non-holder)
// with the smallest price increase at the current loads.
LocalTree grow_tree(const Group& g, int root, double share, std::vector<double>& load,
                    double reference) {
  LocalTree t{root, share, {}};
  std::vector<int> depth(g.n, -1);
  depth[root] = 0;
  auto price = [&](double l) { return std::exp(kPriceGrowth * l / reference); };
  // Per resource: the price at its load and after adding k times the share, worked out again
  // only when its load or k changes (the loads change only where an edge is added; a k that is
  // not a number matches none).
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  struct Priced {
    double load = kNone, now = 0, k = kNone, after = 0;
  };
  std::vector<Priced> priced(load.size());
  auto increase = [&](int r, double k) {
    Priced& pr = priced[static_cast<std::size_t>(r)];
    const double l = load[static_cast<std::size_t>(r)];
    if (!(pr.load == l)) pr = Priced{l, price(l), kNone, 0};
    if (!(pr.k == k)) {
      pr.k = k;
      pr.after = price(l + k * share);
    }
    return pr.after - pr.now;
  };
  for (int added = 1; added < g.n; ++added) {
    int bs = -1, bd = -1;
    double best = 0;
    for (int src = 0; src < g.n; ++src) {
      if (depth[src] < 0) continue;
      for (int dst = 0; dst < g.n; ++dst) {
        if (depth[dst] >= 0) continue;
        double c = 0;
        for (auto [r, k] : g.edge(src, dst)) c += increase(r, k);
        if (bs < 0 || less_tol(c, best) ||
            (!less_tol(best, c) && depth[src] < depth[bs])) {
          best = c;
          bs = src;
          bd = dst;
        }
      }
    }
    t.edges.push_back({bs, bd});
    depth[bd] = depth[bs] + 1;
    add_load(g, load, bs, bd, share);
  }
  return t;
}

std::vector<LocalTree> packed_trees(const Group& g, double reference) {
  std::vector<double> load(static_cast<std::size_t>(g.resources), 0.0);
  // Per root: distinct trees (by sorted edge list) with their accumulated share.
  std::vector<std::map<std::vector<std::pair<int, int>>, LocalTree>> acc(g.n);
  for (int round = 0; round < kRounds; ++round)
    for (int k = 0; k < g.n; ++k) {
      const int root = (k + round) % g.n;  // rotate who grows first
      LocalTree t = grow_tree(g, root, 1.0 / kRounds, load, reference);
      std::vector<std::pair<int, int>> key = t.edges;
      std::sort(key.begin(), key.end());
      auto [it, fresh] = acc[root].try_emplace(key, t);
      if (!fresh) it->second.share += t.share;
    }
  std::vector<LocalTree> out;
  for (int root = 0; root < g.n; ++root) {
    std::vector<LocalTree> trees;
    for (auto& [key, t] : acc[root]) trees.push_back(t);
    std::stable_sort(trees.begin(), trees.end(),
                     [](const LocalTree& a, const LocalTree& b) { return a.share > b.share; });
    if (static_cast<int>(trees.size()) > kMaxTreesPerRoot) trees.resize(kMaxTreesPerRoot);
    double sum = 0;
    for (const LocalTree& t : trees) sum += t.share;
    for (LocalTree& t : trees) {
      t.share /= sum;
      out.push_back(t);
    }
  }
  return out;
}

std::vector<double> loads_of(const Group& g, const std::vector<LocalTree>& trees) {
  std::vector<double> load(static_cast<std::size_t>(g.resources), 0.0);
  for (const LocalTree& t : trees)
    for (auto [a, b] : t.edges) add_load(g, load, a, b, t.share);
  return load;
}

TreePattern to_pattern(const Group& g, const std::string& name, std::vector<LocalTree> trees) {
  std::stable_sort(trees.begin(), trees.end(),
                   [](const LocalTree& a, const LocalTree& b) { return a.root < b.root; });
  TreePattern p;
  p.name = name;
  p.gpus = g.gpus;
  for (const LocalTree& t : trees) {
    BroadcastTree bt;
    bt.root = g.gpus[t.root];
    bt.share = t.share;
    for (auto [a, b] : t.edges) bt.edges.push_back({g.gpus[a], g.gpus[b]});
    p.trees.push_back(std::move(bt));
  }
  return p;
}

// Beyond kMaxTreeGpus: every root's tree is the path through the group in group order starting
// at the root (a pipelined ring broadcast); cheap for any size.
TreePattern chain_pattern(const std::vector<int>& gpus, const std::string& name) {
  TreePattern t;
  t.name = name;
  t.gpus = gpus;
  const int n = static_cast<int>(gpus.size());
  for (int r = 0; r < n; ++r) {
    BroadcastTree bt{gpus[r], 1.0, {}};
    for (int k = 1; k < n; ++k) bt.edges.push_back({gpus[(r + k - 1) % n], gpus[(r + k) % n]});
    t.trees.push_back(std::move(bt));
  }
  return t;
}

// Every root's tree is the path along `ring` (local indices) starting at the root: the ring
// all-gather as broadcast trees.
std::vector<LocalTree> ring_trees(const std::vector<int>& ring) {
  const int n = static_cast<int>(ring.size());
  std::vector<LocalTree> out;
  for (int i = 0; i < n; ++i) {
    LocalTree t{ring[i], 1.0, {}};
    for (int k = 1; k < n; ++k) t.edges.push_back({ring[(i + k - 1) % n], ring[(i + k) % n]});
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Result<TreePattern> hierarchical_pattern(const Profile& p, const std::vector<int>& gpus) {
  COMPASS_TRY(validate_group(p, gpus));
  if (static_cast<int>(gpus.size()) > kMaxTreeGpus) return chain_pattern(gpus, "hier");
  const Group g = make_group(p, gpus);
  std::vector<double> load(static_cast<std::size_t>(g.resources), 0.0);
  std::vector<LocalTree> trees = hierarchical_trees(g, load);
  if (g.n == 1) trees.push_back(LocalTree{0, 1.0, {}});
  return to_pattern(g, "hier", std::move(trees));
}

Result<TreePattern> synthesize_pattern(const Profile& p, const std::vector<int>& gpus) {
  COMPASS_TRY(validate_group(p, gpus));
  if (static_cast<int>(gpus.size()) > kMaxTreeGpus) return chain_pattern(gpus, "synth");
  COMPASS_ASSIGN(const Ring ring, find_ring(p, gpus));
  return synthesize_pattern(p, gpus, ring);
}

Result<TreePattern> synthesize_pattern(const Profile& p, const std::vector<int>& gpus,
                                       const Ring& ring) {
  COMPASS_TRY(validate_group(p, gpus));
  if (static_cast<int>(gpus.size()) > kMaxTreeGpus) return chain_pattern(gpus, "synth");
  const Group g = make_group(p, gpus);
  if (g.n == 1) return to_pattern(g, "synth", {LocalTree{0, 1.0, {}}});
  std::vector<double> hload(static_cast<std::size_t>(g.resources), 0.0);
  std::vector<LocalTree> hier = hierarchical_trees(g, hload);
  const double reference = max_load(hload);
  std::vector<LocalTree> packed = packed_trees(g, reference > 0 ? reference : 1.0);
  // Three candidates, taken by the load of their busiest resource; on a tie the earlier of:
  // the ring's paths, whose every round is a permutation (each GPU sends one shard to its ring
  // successor and receives one), so no copy engine or receive link is shared and, unchunked
  // (schedule::tree_chunks), nothing fills or drains; the hierarchy, whose fewer, shallower
  // trees pipeline better than the packing's; the packing.
  std::vector<int> local;
  for (int gpu : ring.order)
    local.push_back(static_cast<int>(std::find(gpus.begin(), gpus.end(), gpu) - gpus.begin()));
  std::vector<LocalTree> chains = ring_trees(local);
  std::vector<LocalTree>* best = &chains;
  double best_load = max_load(loads_of(g, chains));
  for (std::vector<LocalTree>* c : {&hier, &packed}) {
    const double load = c == &hier ? reference : max_load(loads_of(g, *c));
    if (less_tol(load, best_load)) {
      best = c;
      best_load = load;
    }
  }
  return to_pattern(g, "synth", std::move(*best));
}

Status validate_pattern(const TreePattern& t, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  auto index = [&](int gpu) {
    auto it = std::find(gpus.begin(), gpus.end(), gpu);
    return it == gpus.end() ? -1 : static_cast<int>(it - gpus.begin());
  };
  std::vector<double> share(n, 0.0);
  for (std::size_t i = 0; i < t.trees.size(); ++i) {
    const BroadcastTree& bt = t.trees[i];
    const int root = index(bt.root);
    if (root < 0) return make_error("pattern tree {}: root GPU {} is not in the group", i, bt.root);
    if (!(bt.share > 0) || !std::isfinite(bt.share))
      return make_error("pattern tree {}: share {} is not positive", i, bt.share);
    share[root] += bt.share;
    std::vector<char> has(n, 0);
    has[root] = 1;
    for (auto [a, b] : bt.edges) {
      const int ia = index(a), ib = index(b);
      if (ia < 0 || ib < 0)
        return make_error("pattern tree {}: edge {}->{} leaves the group", i, a, b);
      if (!has[ia])
        return make_error("pattern tree {}: GPU {} forwards before it has the data", i, a);
      if (has[ib]) return make_error("pattern tree {}: GPU {} is reached twice", i, b);
      has[ib] = 1;
    }
    for (int v = 0; v < n; ++v)
      if (!has[v]) return make_error("pattern tree {}: GPU {} is never reached", i, gpus[v]);
  }
  for (int v = 0; v < n; ++v)
    if (std::fabs(share[v] - 1.0) > 1e-6)
      return make_error("pattern: the trees of GPU {} carry {} of its shard, not all of it",
                        gpus[v], share[v]);
  return Status::success();
}

PatternTime allgather_load_pattern(const Profile& p, const TreePattern& t, double total_bytes) {
  PatternTime out;
  out.pattern = t.name;
  const int n = static_cast<int>(t.gpus.size());
  if (n < 2) return out;
  const double shard = total_bytes / n;
  const std::vector<double> cap = sharing::dir_capacities(p);
  std::vector<HopLoad> loads(cap.size());
  for (const BroadcastTree& bt : t.trees)
    for (auto [a, b] : bt.edges)
      for (int d : sharing::route_dirs(p, a, b)) {
        loads[d].bytes += bt.share * shard;
        loads[d].flows += 1;
      }
  std::vector<HopLoad> used;
  for (std::size_t d = 0; d < cap.size(); ++d) {
    if (loads[d].flows == 0) continue;
    HopLoad h = loads[d];
    h.hop = sharing::dir_hop(static_cast<int>(d));
    h.name = p.hop_name(h.hop);
    h.busy_s = cap[d] > 0 ? h.bytes / cap[d] : std::numeric_limits<double>::infinity();
    used.push_back(std::move(h));
  }
  sort_loads(used);
  if (!used.empty()) {
    out.time_s = used.front().busy_s;
    out.bottleneck = used.front().name;
  }
  out.loads = std::move(used);
  return out;
}

int pattern_depth(const TreePattern& t) {
  int deepest = 0;
  for (const BroadcastTree& bt : t.trees) {
    std::map<int, int> depth{{bt.root, 0}};
    for (auto [a, b] : bt.edges) {
      depth[b] = depth[a] + 1;
      deepest = std::max(deepest, depth[b]);
    }
  }
  return deepest;
}

}  // namespace compass::hardware
