// Ring search (exact branch-and-bound for small groups, greedy + 2-opt beyond), the double
// ring, and all-gather times of the ring / double-ring / all-to-all patterns under max-min
// sharing. The definitions are documented in docs/rings.md.

#include "compass/hardware/rings.hpp"
#include "compass/core/units.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace compass::hardware {
namespace {

/// Groups up to this size are searched exactly.
constexpr int kExactLimit = 10;
/// All-gather size used by the search's time criterion (1 GiB).
constexpr double kSearchBytes = 1024.0 * 1024.0 * 1024.0;
/// Search nodes one exact search may expand before it settles for the best found so far
/// (a safety net far above what 10 GPUs need on the presets and test topologies).
constexpr long kNodeBudget = 4'000'000;

/// The ring search objective, compared lexicographically: widest bottleneck, then fewest
/// shared-segment crossings, then shortest all-gather.
struct RingKey {
  double bw = -1;     // smallest route bandwidth between ring neighbours
  int crossings = 0;  // hops over shared links, summed over the ring's edges
  double time_s = std::numeric_limits<double>::infinity();
};

bool better(const RingKey& a, const RingKey& b) {
  if (less_tol(b.bw, a.bw)) return true;
  if (less_tol(a.bw, b.bw)) return false;
  if (a.crossings != b.crossings) return a.crossings < b.crossings;
  return less_tol(a.time_s, b.time_s);
}

/// Per ordered pair of a group: everything the search needs, precomputed once.
struct GroupInfo {
  int n = 0;
  std::vector<int> gpus;               // GPU ordinal of each local index
  std::vector<double> cap;             // bytes/s per link direction id
  std::vector<std::vector<int>> dirs;  // [a * n + b]: direction ids on the route
  std::vector<double> bw;              // [a * n + b]
  std::vector<double> lat_s;           // [a * n + b]
  std::vector<int> shared;             // [a * n + b]: hops over shared links
  std::vector<double> dir_lat_s;  // per direction: smallest latency of a group route crossing it
  std::vector<std::vector<int>> forced_out;  // directions on every route out of a GPU
  std::vector<std::vector<int>> forced_in;   // directions on every route into a GPU

  int idx(int a, int b) const { return a * n + b; }
};

GroupInfo make_info(const Profile& p, const std::vector<int>& gpus) {
  GroupInfo g;
  g.n = static_cast<int>(gpus.size());
  g.gpus = gpus;
  g.cap = sharing::dir_capacities(p);
  g.dirs.assign(g.n * g.n, {});
  g.bw.assign(g.n * g.n, 0.0);
  g.lat_s.assign(g.n * g.n, 0.0);
  g.shared.assign(g.n * g.n, 0);
  for (int a = 0; a < g.n; ++a)
    for (int b = 0; b < g.n; ++b) {
      if (a == b) continue;
      int k = g.idx(a, b);
      g.dirs[k] = sharing::route_dirs(p, gpus[a], gpus[b]);
      g.bw[k] = p.route_bandwidth(gpus[a], gpus[b]);
      g.lat_s[k] = p.route_latency_s(gpus[a], gpus[b]);
      for (int d : g.dirs[k])
        if (p.links[d / 2].shared) ++g.shared[k];
    }
  g.forced_out.assign(g.n, {});
  g.forced_in.assign(g.n, {});
  if (g.n > 1) {
    for (int v = 0; v < g.n; ++v) {
      // Route direction lists are sorted, so intersections are linear merges.
      bool first_out = true, first_in = true;
      for (int w = 0; w < g.n; ++w) {
        if (w == v) continue;
        auto narrow = [](std::vector<int>& acc, const std::vector<int>& dirs, bool& first) {
          if (first) {
            acc = dirs;
            first = false;
            return;
          }
          std::vector<int> both;
          std::set_intersection(acc.begin(), acc.end(), dirs.begin(), dirs.end(),
                                std::back_inserter(both));
          acc = std::move(both);
        };
        narrow(g.forced_out[v], g.dirs[g.idx(v, w)], first_out);
        narrow(g.forced_in[v], g.dirs[g.idx(w, v)], first_in);
      }
    }
  }
  g.dir_lat_s.assign(g.cap.size(), std::numeric_limits<double>::infinity());
  for (int a = 0; a < g.n; ++a)
    for (int b = 0; b < g.n; ++b)
      if (a != b)
        for (int d : g.dirs[g.idx(a, b)])
          g.dir_lat_s[d] = std::min(g.dir_lat_s[d], g.lat_s[g.idx(a, b)]);
  return g;
}

/// Exact step makespan of a set of concurrent transfers (local index pairs), each `bytes`.
double step_time(const GroupInfo& g, const std::vector<std::pair<int, int>>& edges, double bytes) {
  std::vector<sharing::FlowPath> paths(edges.size());
  std::vector<double> b(edges.size(), bytes), lat(edges.size(), 0.0);
  for (std::size_t i = 0; i < edges.size(); ++i) {
    auto [s, d] = edges[i];
    paths[i].active = bytes > 0 && s != d;
    if (s != d) {
      paths[i].dirs = g.dirs[g.idx(s, d)];
      lat[i] = g.lat_s[g.idx(s, d)];
    }
  }
  double makespan = 0;
  for (double t : sharing::simulate(g.cap, std::move(paths), b, lat))
    makespan = std::max(makespan, t);
  return makespan;
}

std::vector<std::pair<int, int>> ring_edges(const std::vector<int>& order) {
  std::vector<std::pair<int, int>> e;
  const int n = static_cast<int>(order.size());
  if (n < 2) return e;
  for (int i = 0; i < n; ++i) e.emplace_back(order[i], order[(i + 1) % n]);
  return e;
}

/// Exact all-gather time (local orders) of one ring: (n-1) synchronous steps.
double ring_time_local(const GroupInfo& g, const std::vector<int>& order, double total_bytes) {
  if (g.n < 2) return 0;
  return (g.n - 1) * step_time(g, ring_edges(order), total_bytes / g.n);
}

/// Exact all-gather time of a double ring: (n-1) steps of both rings' flows, half a chunk each.
double double_time_local(const GroupInfo& g, const std::vector<int>& first,
                         const std::vector<int>& second, double total_bytes) {
  if (g.n < 2) return 0;
  auto edges = ring_edges(first);
  auto e2 = ring_edges(second);
  edges.insert(edges.end(), e2.begin(), e2.end());
  return (g.n - 1) * step_time(g, edges, total_bytes / g.n / 2);
}

/// Incremental state of a ring under construction: per-direction edge counts and the running
/// bounds (bottleneck bandwidth, crossings, and a lower bound on the step time).
struct Partial {
  std::vector<int> count;  // edges crossing each direction
  double bw = std::numeric_limits<double>::infinity();
  int crossings = 0;
  double busy_s = 0;  // max over directions of count x chunk / capacity + latency
  double flow_s = 0;  // max over edges of chunk / route bandwidth + latency
};

/// Lower bound on one step: no direction moves its bytes faster than its capacity (and its
/// last flow still pays the smallest latency of the routes crossing it), no flow is faster
/// than its route bandwidth plus its latency.
double step_lower_bound(const Partial& s) {
  return std::max(s.busy_s, s.flow_s);
}

/// The busy bound of direction d carrying `crossings` flows of `chunk` bytes.
double dir_busy_s(const GroupInfo& g, int d, int crossings, double chunk) {
  if (crossings == 0) return 0;
  if (!(g.cap[d] > 0)) return std::numeric_limits<double>::infinity();
  return crossings * chunk / g.cap[d] + g.dir_lat_s[d];
}

/// Counts per direction, reset after every use (so bounds cost O(touched), not O(links)).
struct Scratch {
  std::vector<int> out, in;
};

/// Lower bound on Partial::busy_s once a partial ring (path ending at `last`, started at
/// `start`, `used` marking its GPUs) is closed: each pending edge leaves one of {last} and the
/// unvisited GPUs and enters one of the unvisited GPUs and {start}; a direction that every
/// route out of its source (or into its destination) crosses is crossed by that edge.
double pending_busy_s(const GroupInfo& g, const Partial& s, const std::vector<char>& used, int last,
                      int start, double chunk, Scratch& sc) {
  auto each_pending = [&](auto&& fn) {
    for (int d : g.forced_out[last]) fn(d, true);
    for (int d : g.forced_in[start]) fn(d, false);
    for (int v = 0; v < g.n; ++v) {
      if (used[v]) continue;
      for (int d : g.forced_out[v]) fn(d, true);
      for (int d : g.forced_in[v]) fn(d, false);
    }
  };
  if (sc.out.size() != g.cap.size()) {
    sc.out.assign(g.cap.size(), 0);
    sc.in.assign(g.cap.size(), 0);
  }
  each_pending([&](int d, bool out) { ++(out ? sc.out : sc.in)[d]; });
  double busy = s.busy_s;
  each_pending([&](int d, bool) {
    if (sc.out[d] < 0) return;  // already visited
    busy = std::max(busy, dir_busy_s(g, d, s.count[d] + std::max(sc.out[d], sc.in[d]), chunk));
    sc.out[d] = -1;
  });
  each_pending([&](int d, bool) { sc.out[d] = sc.in[d] = 0; });
  return busy;
}

/// Adds edge a->b, carrying `chunk` bytes, to `s`.
void add_edge(const GroupInfo& g, Partial& s, int a, int b, double chunk) {
  int k = g.idx(a, b);
  s.bw = std::min(s.bw, g.bw[k]);
  s.crossings += g.shared[k];
  for (int d : g.dirs[k]) {
    ++s.count[d];
    s.busy_s = std::max(s.busy_s, dir_busy_s(g, d, s.count[d], chunk));
  }
  s.flow_s =
      std::max(s.flow_s, (g.bw[k] > 0 ? chunk / g.bw[k] : std::numeric_limits<double>::infinity()) +
                             g.lat_s[k]);
}

/// The key of a complete ring with a lower-bound time (cheap; used by the heuristic).
RingKey lb_key(const GroupInfo& g, const std::vector<int>& order, double total_bytes) {
  Partial s;
  s.count.assign(g.cap.size(), 0);
  const double chunk = total_bytes / g.n;
  for (auto [a, b] : ring_edges(order)) add_edge(g, s, a, b, chunk);
  return RingKey{s.bw, s.crossings, (g.n - 1) * step_lower_bound(s)};
}

/// Depth-first branch-and-bound over rings with order[0] = 0. Children are visited in
/// increasing index, so complete rings appear in lexicographic order and a later ring
/// replaces the best only when strictly better: ties keep the lexicographically smallest.
class ExactRingSearch {
 public:
  ExactRingSearch(const GroupInfo& g, double total_bytes)
      : g_(g), total_(total_bytes), chunk_(total_bytes / g.n) {}

  std::vector<int> run() {
    order_.assign(1, 0);
    used_.assign(g_.n, 0);
    used_[0] = 1;
    Partial s;
    s.count.assign(g_.cap.size(), 0);
    dfs(s);
    return best_order_;
  }

 private:
  void dfs(Partial& s) {
    const int last = order_.back();
    if (static_cast<int>(order_.size()) == g_.n) {
      Partial closed = s;
      add_edge(g_, closed, last, 0, chunk_);
      RingKey k{closed.bw, closed.crossings, (g_.n - 1) * step_lower_bound(closed)};
      if (!best_order_.empty() && !better(k, best_)) return;
      k.time_s = ring_time_local(g_, order_, total_);
      if (best_order_.empty() || better(k, best_)) {
        best_ = k;
        best_order_ = order_;
      }
      return;
    }
    for (int next = 1; next < g_.n; ++next) {
      if (used_[next]) continue;
      Partial child = s;
      add_edge(g_, child, last, next, chunk_);
      used_[next] = 1;
      bool promising = best_order_.empty();
      if (!promising) {
        Partial bounded = child;
        bounded.busy_s = pending_busy_s(g_, child, used_, next, 0, chunk_, scratch_);
        RingKey bound{child.bw, child.crossings, (g_.n - 1) * step_lower_bound(bounded)};
        promising = better(bound, best_);
      }
      if (promising && ++nodes_ <= kNodeBudget) {
        order_.push_back(next);
        dfs(child);
        order_.pop_back();
      }
      used_[next] = 0;
    }
  }

  const GroupInfo& g_;
  double total_;
  double chunk_;
  std::vector<int> order_;
  std::vector<char> used_;
  RingKey best_;
  std::vector<int> best_order_;
  Scratch scratch_;
  long nodes_ = 0;
};

/// Widest-next-hop greedy tour from index 0 (ties: fewer shared hops, lower latency, lower
/// index), then 2-opt segment reversals while the lower-bound key improves.
std::vector<int> heuristic_ring(const GroupInfo& g, double total_bytes) {
  std::vector<int> order{0};
  std::vector<char> used(g.n, 0);
  used[0] = 1;
  while (static_cast<int>(order.size()) < g.n) {
    int last = order.back(), pick = -1;
    for (int c = 0; c < g.n; ++c) {
      if (used[c]) continue;
      if (pick < 0) {
        pick = c;
        continue;
      }
      int kc = g.idx(last, c), kp = g.idx(last, pick);
      if (less_tol(g.bw[kp], g.bw[kc]) ||
          (!less_tol(g.bw[kc], g.bw[kp]) &&
           (g.shared[kc] < g.shared[kp] ||
            (g.shared[kc] == g.shared[kp] && g.lat_s[kc] < g.lat_s[kp]))))
        pick = c;
    }
    used[pick] = 1;
    order.push_back(pick);
  }
  RingKey best = lb_key(g, order, total_bytes);
  // Each accepted move strictly improves the key, so this terminates; the cap bounds time.
  for (int pass = 0, moves = 0; pass < 4 * g.n && moves < g.n * g.n; ++pass) {
    bool improved = false;
    for (int i = 1; i < g.n - 1; ++i)
      for (int j = i + 1; j < g.n; ++j) {
        std::vector<int> cand = order;
        std::reverse(cand.begin() + i, cand.begin() + j + 1);
        RingKey k = lb_key(g, cand, total_bytes);
        if (better(k, best)) {
          best = k;
          order = std::move(cand);
          improved = true;
          ++moves;
        }
      }
    if (!improved) break;
  }
  return order;
}

/// Best second ring given the first (local indices), exhaustively with branch-and-bound.
/// The incumbent starts as the reverse of `first` so it wins every tie.
class ExactSecondRingSearch {
 public:
  ExactSecondRingSearch(const GroupInfo& g, std::vector<int> first, double total_bytes)
      : g_(g), first_(std::move(first)), total_(total_bytes), half_(total_bytes / g.n / 2) {}

  std::vector<int> run(std::vector<int> incumbent, double incumbent_s) {
    best_order_ = std::move(incumbent);
    best_s_ = incumbent_s;
    Partial s;
    s.count.assign(g_.cap.size(), 0);
    for (auto [a, b] : ring_edges(first_)) add_edge(g_, s, a, b, half_);
    order_.assign(1, first_[0]);
    used_.assign(g_.n, 0);
    used_[first_[0]] = 1;
    dfs(s);
    return best_order_;
  }

 private:
  double bound(const Partial& s) const { return (g_.n - 1) * step_lower_bound(s); }

  void dfs(Partial& s) {
    const int last = order_.back();
    if (static_cast<int>(order_.size()) == g_.n) {
      Partial closed = s;
      add_edge(g_, closed, last, order_[0], half_);
      if (!less_tol(bound(closed), best_s_)) return;
      double t = double_time_local(g_, first_, order_, total_);
      if (less_tol(t, best_s_)) {
        best_s_ = t;
        best_order_ = order_;
      }
      return;
    }
    for (int next = 0; next < g_.n; ++next) {
      if (used_[next]) continue;
      Partial child = s;
      add_edge(g_, child, last, next, half_);
      used_[next] = 1;
      Partial bounded = child;
      bounded.busy_s = pending_busy_s(g_, child, used_, next, order_[0], half_, scratch_);
      if (less_tol(bound(bounded), best_s_) && ++nodes_ <= kNodeBudget) {
        order_.push_back(next);
        dfs(child);
        order_.pop_back();
      }
      used_[next] = 0;
    }
  }

  const GroupInfo& g_;
  std::vector<int> first_;
  double total_;
  double half_;
  std::vector<int> order_;
  std::vector<char> used_;
  std::vector<int> best_order_;
  double best_s_ = 0;
  Scratch scratch_;
  long nodes_ = 0;
};

/// Lower bound of a double ring's time (cheap; used by the heuristic).
double double_lb(const GroupInfo& g, const std::vector<int>& first, const std::vector<int>& second,
                 double total_bytes) {
  Partial s;
  s.count.assign(g.cap.size(), 0);
  const double half = total_bytes / g.n / 2;
  for (auto [a, b] : ring_edges(first)) add_edge(g, s, a, b, half);
  for (auto [a, b] : ring_edges(second)) add_edge(g, s, a, b, half);
  return (g.n - 1) * step_lower_bound(s);
}

/// 2-opt from `start` on the double ring's lower-bound time, first ring fixed.
std::vector<int> heuristic_second(const GroupInfo& g, const std::vector<int>& first,
                                  std::vector<int> start, double total_bytes) {
  double best = double_lb(g, first, start, total_bytes);
  for (int pass = 0, moves = 0; pass < 4 * g.n && moves < g.n * g.n; ++pass) {
    bool improved = false;
    for (int i = 1; i < g.n - 1; ++i)
      for (int j = i + 1; j < g.n; ++j) {
        std::vector<int> cand = start;
        std::reverse(cand.begin() + i, cand.begin() + j + 1);
        double t = double_lb(g, first, cand, total_bytes);
        if (less_tol(t, best)) {
          best = t;
          start = std::move(cand);
          improved = true;
          ++moves;
        }
      }
    if (!improved) break;
  }
  return start;
}

std::vector<int> sorted_group(const std::vector<int>& gpus) {
  std::vector<int> s = gpus;
  std::sort(s.begin(), s.end());
  return s;
}

/// Local indices of a ring's GPUs within `g` (the ring must cover exactly g's GPUs).
std::vector<int> to_local(const GroupInfo& g, const Ring& r) {
  std::vector<int> local;
  for (int gpu : r.order) {
    auto it = std::lower_bound(g.gpus.begin(), g.gpus.end(), gpu);
    COMPASS_CHECK(it != g.gpus.end() && *it == gpu, "GPU {} of the ring is not in the group", gpu);
    local.push_back(static_cast<int>(it - g.gpus.begin()));
  }
  return local;
}

Ring to_ring(const GroupInfo& g, const std::vector<int>& local) {
  Ring r;
  for (int i : local) r.order.push_back(g.gpus[i]);
  return r;
}

void check_ring(const Profile& p, const Ring& r) {
  Status s = validate_group(p, r.order);
  COMPASS_CHECK(s.ok(), "invalid ring: {}", s.ok() ? "" : s.error().message);
}

/// Turns the loads of one step into the loads of `steps` identical steps.
std::vector<HopLoad> scale_loads(std::vector<HopLoad> loads, int steps) {
  for (HopLoad& l : loads) {
    l.bytes *= steps;
    l.busy_s *= steps;
    l.flows *= steps;
  }
  return loads;
}

/// A pattern's time and loads, without the comparison against the best ring.
PatternTime steps_pattern(const Profile& p, const std::string& name, const std::vector<Flow>& step,
                          int steps) {
  PatternTime t;
  t.pattern = name;
  if (steps <= 0 || step.empty()) return t;
  FlowOutcome o = run_flows(p, step);
  t.time_s = steps * o.makespan_s;
  t.loads = scale_loads(std::move(o.loads), steps);
  if (!t.loads.empty()) t.bottleneck = t.loads.front().name;
  return t;
}

std::vector<Flow> ring_flows(const Ring& r, double bytes) {
  std::vector<Flow> f;
  const int n = static_cast<int>(r.order.size());
  if (n < 2) return f;
  for (int i = 0; i < n; ++i) f.push_back(Flow{r.order[i], r.order[(i + 1) % n], bytes});
  return f;
}

PatternTime ring_pattern(const Profile& p, const Ring& r, double total_bytes) {
  const int n = static_cast<int>(r.order.size());
  return steps_pattern(p, "ring", ring_flows(r, n > 0 ? total_bytes / n : 0), n - 1);
}

/// Names the directions whose busy time under `t` exceeds the busiest direction of the best
/// single ring over the same group: links that alone make the pattern slower than that ring.
void mark_congested(const Profile& p, const std::vector<int>& gpus, double total_bytes,
                    PatternTime& t) {
  Result<Ring> best = find_ring(p, gpus);
  COMPASS_CHECK(best.ok(), "find_ring failed on a validated group");
  PatternTime ring = ring_pattern(p, *best, total_bytes);
  const double limit_s = ring.loads.empty() ? 0.0 : ring.loads.front().busy_s;
  t.congested = congested_beyond(t.loads, limit_s);
}

}  // namespace

Ring reversed(const Ring& r) {
  Ring out = r;
  if (out.order.size() > 1) std::reverse(out.order.begin() + 1, out.order.end());
  return out;
}

Status validate_group(const Profile& p, const std::vector<int>& gpus) {
  const int n = p.gpu_count();
  if (gpus.empty()) return make_error("the GPU group is empty");
  std::set<int> seen;
  for (int g : gpus) {
    if (g < 0 || g >= n) return make_error("GPU {} is not on '{}' (GPUs 0..{})", g, p.name, n - 1);
    if (!seen.insert(g).second) return make_error("GPU {} appears twice in the group", g);
  }
  return Status::success();
}

Result<Ring> find_ring(const Profile& p, const std::vector<int>& gpus) {
  COMPASS_TRY(validate_group(p, gpus));
  GroupInfo g = make_info(p, sorted_group(gpus));
  if (g.n <= 2) return to_ring(g, g.n == 1 ? std::vector<int>{0} : std::vector<int>{0, 1});
  if (g.n <= kExactLimit) return to_ring(g, ExactRingSearch(g, kSearchBytes).run());
  return to_ring(g, heuristic_ring(g, kSearchBytes));
}

Result<DoubleRing> find_double_ring(const Profile& p, const std::vector<int>& gpus) {
  COMPASS_ASSIGN(const Ring ring, find_ring(p, gpus));
  return find_double_ring(p, ring);
}

Result<DoubleRing> find_double_ring(const Profile& p, const Ring& ring) {
  COMPASS_TRY(validate_group(p, ring.order));
  GroupInfo g = make_info(p, sorted_group(ring.order));
  std::vector<int> first = to_local(g, ring);
  std::vector<int> rev = to_local(g, reversed(ring));
  if (g.n <= 2) return DoubleRing{ring, reversed(ring)};

  const double rev_s = double_time_local(g, first, rev, kSearchBytes);
  std::vector<int> second;
  if (g.n <= kExactLimit) {
    // The search space contains the reverse (the incumbent) and the ring itself, whose double
    // time equals the single ring's, so the result is never worse than the ring.
    second = ExactSecondRingSearch(g, first, kSearchBytes).run(rev, rev_s);
  } else {
    std::vector<int> local = heuristic_second(g, first, rev, kSearchBytes);
    second = rev;
    double best_s = rev_s;
    for (const auto& cand : {local, first}) {
      double t = double_time_local(g, first, cand, kSearchBytes);
      if (less_tol(t, best_s)) {
        best_s = t;
        second = cand;
      }
    }
  }
  return DoubleRing{ring, to_ring(g, second)};
}

PatternTime allgather_time_ring(const Profile& p, const Ring& ring, double total_bytes) {
  check_ring(p, ring);
  PatternTime t = ring_pattern(p, ring, total_bytes);
  mark_congested(p, ring.order, total_bytes, t);
  return t;
}

PatternTime allgather_time_double_ring(const Profile& p, const DoubleRing& rings,
                                       double total_bytes) {
  check_ring(p, rings.first);
  check_ring(p, rings.second);
  COMPASS_CHECK(sorted_group(rings.first.order) == sorted_group(rings.second.order),
                "the two rings of a double ring cover different GPUs");
  const int n = static_cast<int>(rings.first.order.size());
  std::vector<Flow> step;
  if (n >= 2) {
    const double half = total_bytes / n / 2;
    step = ring_flows(rings.first, half);
    std::vector<Flow> second = ring_flows(rings.second, half);
    step.insert(step.end(), second.begin(), second.end());
  }
  PatternTime t = steps_pattern(p, "double-ring", step, n - 1);
  mark_congested(p, rings.first.order, total_bytes, t);
  return t;
}

PatternTime allgather_time_all2all(const Profile& p, const std::vector<int>& gpus,
                                   double total_bytes) {
  Status s = validate_group(p, gpus);
  COMPASS_CHECK(s.ok(), "invalid group: {}", s.ok() ? "" : s.error().message);
  const int n = static_cast<int>(gpus.size());
  std::vector<Flow> flows;
  for (int a : gpus)
    for (int b : gpus)
      if (a != b) flows.push_back(Flow{a, b, total_bytes / n});
  PatternTime t = steps_pattern(p, "all2all", flows, 1);
  mark_congested(p, gpus, total_bytes, t);
  return t;
}

}  // namespace compass::hardware
