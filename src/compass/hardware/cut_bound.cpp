// Cut lower bounds: max-flow (Dinic, on link directions) between the two sides of every subset
// of the group, the bytes that must cross divided by it, maximised over subsets.

#include "compass/hardware/cut_bound.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include <fmt/format.h>

#include "compass/hardware/rings.hpp"

namespace compass::hardware {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A flow network over the profile's nodes plus a super source and a super sink.
class FlowNet {
 public:
  explicit FlowNet(int nodes) : head_(nodes, -1) {}

  int add_node() {
    head_.push_back(-1);
    return static_cast<int>(head_.size()) - 1;
  }

  // Adds u -> v with capacity `cap` (and its residual v -> u); returns the edge index.
  int add_edge(int u, int v, double cap) {
    edges_.push_back({v, head_[u], cap, cap});
    head_[u] = static_cast<int>(edges_.size()) - 1;
    edges_.push_back({u, head_[v], 0, 0});
    head_[v] = static_cast<int>(edges_.size()) - 1;
    return static_cast<int>(edges_.size()) - 2;
  }

  void set_capacity(int e, double cap) {
    edges_[e].cap = cap;
    edges_[e].orig = cap;
  }

  // Restores every residual capacity to the original ones.
  void reset() {
    for (Edge& e : edges_) e.cap = e.orig;
  }

  double max_flow(int s, int t) {
    double total = 0;
    double largest = 0;
    for (const Edge& e : edges_)
      if (std::isfinite(e.orig)) largest = std::max(largest, e.orig);
    eps_ = largest * 1e-12;
    while (bfs(s, t)) {
      it_ = head_;
      for (;;) {
        const double f = dfs(s, t, kInf);
        if (!(f > eps_)) break;
        total += f;
        if (!std::isfinite(total)) return total;
      }
    }
    return total;
  }

  // After max_flow: nodes reachable from s in the residual graph (the source side of a min cut).
  std::vector<char> source_side(int s) const {
    std::vector<char> seen(head_.size(), 0);
    std::vector<int> stack{s};
    seen[s] = 1;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (int e = head_[u]; e >= 0; e = edges_[e].next)
        if (edges_[e].cap > eps_ && !seen[edges_[e].to]) {
          seen[edges_[e].to] = 1;
          stack.push_back(edges_[e].to);
        }
    }
    return seen;
  }

  int edge_to(int e) const { return edges_[e].to; }
  int edge_from(int e) const { return edges_[e ^ 1].to; }

 private:
  struct Edge {
    int to;
    int next;
    double cap;
    double orig;
  };

  bool bfs(int s, int t) {
    level_.assign(head_.size(), -1);
    std::queue<int> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      const int u = q.front();
      q.pop();
      for (int e = head_[u]; e >= 0; e = edges_[e].next)
        if (edges_[e].cap > eps_ && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[u] + 1;
          q.push(edges_[e].to);
        }
    }
    return level_[t] >= 0;
  }

  double dfs(int u, int t, double pushed) {
    if (u == t) return pushed;
    for (int& e = it_[u]; e >= 0; e = edges_[e].next) {
      Edge& ed = edges_[e];
      if (!(ed.cap > eps_) || level_[ed.to] != level_[u] + 1) continue;
      const double f = dfs(ed.to, t, std::min(pushed, ed.cap));
      if (f > eps_) {
        ed.cap -= f;
        edges_[e ^ 1].cap += f;
        return f;
      }
    }
    return 0;
  }

  std::vector<int> head_;
  std::vector<Edge> edges_;
  std::vector<int> level_;
  std::vector<int> it_;
  double eps_ = 0;
};

// The profile's link directions as a network, with a source and a sink joined to nothing yet.
struct Network {
  FlowNet net;
  int source = 0;
  int sink = 0;
  std::vector<int> link_edge;         // per link direction id: its edge in `net`
  std::vector<int> source_edge;       // per node: source -> node (capacity 0 when unused)
  std::vector<int> sink_edge;         // per node: node -> sink
};

Network build_network(const Profile& p, bool reversed) {
  const int nodes = static_cast<int>(p.nodes.size());
  Network w{FlowNet(nodes), 0, 0, {}, {}, {}};
  w.source = w.net.add_node();
  w.sink = w.net.add_node();
  w.link_edge.assign(p.links.size() * 2, -1);
  for (std::size_t l = 0; l < p.links.size(); ++l) {
    const Link& k = p.links[l];
    const double fwd = reversed ? k.reverse_bandwidth_bytes_per_s : k.bandwidth_bytes_per_s;
    const double rev = reversed ? k.bandwidth_bytes_per_s : k.reverse_bandwidth_bytes_per_s;
    w.link_edge[2 * l] = w.net.add_edge(k.a, k.b, std::max(0.0, fwd));
    w.link_edge[2 * l + 1] = w.net.add_edge(k.b, k.a, std::max(0.0, rev));
  }
  for (int v = 0; v < nodes; ++v) {
    w.source_edge.push_back(w.net.add_edge(w.source, v, 0));
    w.sink_edge.push_back(w.net.add_edge(v, w.sink, 0));
  }
  return w;
}

// Max-flow from the nodes `from` to the nodes `to`; fills the min-cut hops when asked.
double flow_between(const Profile& p, Network& w, const std::vector<int>& from_nodes,
                    const std::vector<int>& to_nodes, bool reversed,
                    std::vector<std::string>* cut_hops) {
  w.net.reset();
  for (int e : w.source_edge) w.net.set_capacity(e, 0);
  for (int e : w.sink_edge) w.net.set_capacity(e, 0);
  for (int v : from_nodes) w.net.set_capacity(w.source_edge[v], kInf);
  for (int v : to_nodes) w.net.set_capacity(w.sink_edge[v], kInf);
  const double f = w.net.max_flow(w.source, w.sink);
  if (cut_hops) {
    cut_hops->clear();
    const std::vector<char> side = w.net.source_side(w.source);
    for (std::size_t d = 0; d < w.link_edge.size(); ++d) {
      const int e = w.link_edge[d];
      if (side[w.net.edge_from(e)] && !side[w.net.edge_to(e)]) {
        // Report the physical direction the data takes (undo the reversal).
        Hop h{static_cast<int>(d / 2), d % 2 == 0};
        if (reversed) h.forward = !h.forward;
        const Link& k = p.links[h.link];
        const double cap = h.forward ? k.bandwidth_bytes_per_s : k.reverse_bandwidth_bytes_per_s;
        if (cap > 0) cut_hops->push_back(p.hop_name(h));
      }
    }
  }
  return f;
}

// Candidate subsets (bit i = gpus[i]) beyond exact enumeration: singletons, complements, and
// the group GPUs on each side of every link whose removal disconnects the topology.
std::vector<std::vector<char>> candidate_subsets(const Profile& p, const std::vector<int>& gpus) {
  const int n = static_cast<int>(gpus.size());
  std::vector<std::vector<char>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<char> one(n, 0);
    one[i] = 1;
    out.push_back(one);
    for (char& c : one) c = !c;
    out.push_back(one);
  }
  const int nodes = static_cast<int>(p.nodes.size());
  std::vector<std::vector<std::pair<int, int>>> adj(nodes);
  for (std::size_t l = 0; l < p.links.size(); ++l) {
    adj[p.links[l].a].push_back({p.links[l].b, static_cast<int>(l)});
    adj[p.links[l].b].push_back({p.links[l].a, static_cast<int>(l)});
  }
  for (std::size_t l = 0; l < p.links.size(); ++l) {
    std::vector<char> seen(nodes, 0);
    std::vector<int> stack{p.links[l].a};
    seen[p.links[l].a] = 1;
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      for (auto [v, k] : adj[u])
        if (k != static_cast<int>(l) && !seen[v]) {
          seen[v] = 1;
          stack.push_back(v);
        }
    }
    if (seen[p.links[l].b]) continue;
    std::vector<char> side(n, 0);
    int count = 0;
    for (int i = 0; i < n; ++i) count += side[i] = seen[p.gpu_node(gpus[i])];
    if (count == 0 || count == n) continue;
    out.push_back(side);
    for (char& c : side) c = !c;
    out.push_back(side);
  }
  return out;
}

Result<CutBound> cut_bound(const Profile& p, const std::vector<int>& gpus, double total_bytes,
                           bool reversed) {
  COMPASS_TRY(validate_group(p, gpus));
  if (!(total_bytes >= 0) || !std::isfinite(total_bytes))
    return make_error("collective size must be a finite non-negative byte count, got {}",
                      total_bytes);
  CutBound best;
  const int n = static_cast<int>(gpus.size());
  if (n == 1 || total_bytes == 0) return best;
  const double shard = total_bytes / n;

  std::vector<int> host_nodes;
  for (int v = 0; v < static_cast<int>(p.nodes.size()); ++v)
    if (p.nodes[v].kind == NodeKind::host_memory) host_nodes.push_back(v);

  Network w = build_network(p, reversed);
  // One candidate: flow from `from` to `to` must carry `bytes`.
  // `how` names the crossing with {} for the subset's GPUs.
  auto consider = [&](const char* how, const std::vector<int>& from, const std::vector<int>& to,
                      double bytes, const std::vector<char>& subset) {
    const double f = flow_between(p, w, from, to, reversed, nullptr);
    const double t = f > 0 ? bytes / f : kInf;
    if (best.subset.empty() || t > best.time_s * (1 + 1e-9)) {
      best.time_s = t;
      best.bytes = bytes;
      best.capacity_bytes_per_s = f;
      best.subset.clear();
      std::string list;
      for (int i = 0; i < n; ++i)
        if (subset[i]) {
          best.subset.push_back(gpus[i]);
          list += (list.empty() ? "" : ",") + std::to_string(gpus[i]);
        }
      best.crossing = fmt::format(fmt::runtime(how), list);
      flow_between(p, w, from, to, reversed, &best.cut_hops);
    }
  };
  const bool staged_only = !p.p2p && p.p2p_pairs.empty();
  auto evaluate = [&](const std::vector<char>& subset) {
    std::vector<int> a, b;
    for (int i = 0; i < n; ++i) (subset[i] ? a : b).push_back(p.gpu_node(gpus[i]));
    const double k = static_cast<double>(a.size());
    // Some pairs with peer access: data may cross any cut directly, so only the plain cut holds.
    if (!staged_only) {
      if (a.empty() || b.empty()) return;
      consider(reversed ? "into GPUs {} from the rest" : "out of GPUs {} to the rest", a, b,
               k * shard, subset);
    } else {
      // Staged: everything A receives comes from host memory, everything A owns goes there.
      if (a.empty()) return;
      consider(reversed ? "out of GPUs {} to host memory" : "into GPUs {} from host memory",
               host_nodes, a, k * (n - 1) * shard, subset);
      consider(reversed ? "into GPUs {} from host memory" : "out of GPUs {} to host memory", a,
               host_nodes, k * shard, subset);
    }
  };

  if (n <= kCutBoundExactGpus) {
    std::vector<char> subset(n, 0);
    for (std::uint32_t mask = 1; mask < (1u << n); ++mask) {
      for (int i = 0; i < n; ++i) subset[i] = (mask >> i) & 1u;
      evaluate(subset);
    }
  } else {
    best.exact = false;
    for (const std::vector<char>& s : candidate_subsets(p, gpus)) evaluate(s);
    if (staged_only) evaluate(std::vector<char>(n, 1));
  }
  best.exact = n <= kCutBoundExactGpus;
  return best;
}

}  // namespace

double max_flow_bytes_per_s(const Profile& p, const std::vector<int>& from,
                            const std::vector<int>& to, bool reversed) {
  Network w = build_network(p, reversed);
  std::vector<int> a, b;
  for (int g : from) a.push_back(p.gpu_node(g));
  for (int g : to) b.push_back(p.gpu_node(g));
  return flow_between(p, w, a, b, reversed, nullptr);
}

Result<CutBound> allgather_cut_bound(const Profile& p, const std::vector<int>& gpus,
                                     double total_bytes) {
  return cut_bound(p, gpus, total_bytes, false);
}

Result<CutBound> reduce_scatter_cut_bound(const Profile& p, const std::vector<int>& gpus,
                                          double total_bytes) {
  return cut_bound(p, gpus, total_bytes, true);
}

}  // namespace compass::hardware
