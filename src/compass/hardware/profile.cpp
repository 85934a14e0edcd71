#include "compass/hardware/profile.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace compass::hardware {

int Profile::gpu_count() const {
  int n = 0;
  for (const Node& node : nodes)
    if (node.kind == NodeKind::gpu) ++n;
  return n;
}

int Profile::gpu_node(int gpu) const {
  // Presets put the GPUs first, so the common case ends at once.
  if (gpu >= 0 && gpu < static_cast<int>(nodes.size()) && nodes[gpu].kind == NodeKind::gpu) {
    bool all_gpus_before = true;
    for (int i = 0; i < gpu; ++i)
      if (nodes[i].kind != NodeKind::gpu) {
        all_gpus_before = false;
        break;
      }
    if (all_gpus_before) return gpu;
  }
  int seen = 0;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    if (nodes[i].kind != NodeKind::gpu) continue;
    if (seen == gpu) return i;
    ++seen;
  }
  COMPASS_CHECK(false, "GPU ordinal {} out of range (profile '{}' has {} GPUs)", gpu, name, seen);
  return -1;
}

const DeviceSpec& Profile::gpu_device(int gpu) const {
  const Node& node = nodes[gpu_node(gpu)];
  for (const DeviceSpec& d : devices)
    if (d.name == node.device) return d;
  COMPASS_CHECK(false, "GPU node '{}' names unknown device '{}'", node.name, node.device);
  return devices.front();
}

const Route& Profile::route(int src, int dst) const {
  // Routes are sorted by (src, dst) with every ordered pair once (validate() enforces it), so
  // the last route starts at the last GPU; a malformed list fails the check below.
  const int n = routes.empty() ? 0 : routes.back().src + 1;
  COMPASS_CHECK(src != dst && src >= 0 && dst >= 0 && src < n && dst < n,
                "no route {}->{} in profile '{}' ({} routes)", src, dst, name, routes.size());
  const std::size_t idx =
      static_cast<std::size_t>(src) * (n - 1) + static_cast<std::size_t>(dst < src ? dst : dst - 1);
  COMPASS_CHECK(idx < routes.size() && routes[idx].src == src && routes[idx].dst == dst,
                "routes of profile '{}' are not sorted by (src, dst)", name);
  return routes[idx];
}

double Profile::hop_bandwidth(const Hop& h) const {
  COMPASS_CHECK(h.link >= 0 && h.link < static_cast<int>(links.size()), "hop link {} out of range",
                h.link);
  const Link& l = links[h.link];
  return h.forward ? l.bandwidth_bytes_per_s : l.reverse_bandwidth_bytes_per_s;
}

double Profile::route_latency_s(int src, int dst) const {
  double s = 0;
  for (const Hop& h : route(src, dst).hops) s += links[h.link].latency_s;
  return s;
}

double Profile::route_bandwidth(int src, int dst) const {
  double bw = std::numeric_limits<double>::infinity();
  for (const Hop& h : route(src, dst).hops) bw = std::min(bw, hop_bandwidth(h));
  return bw;
}

std::string Profile::hop_name(const Hop& h) const {
  COMPASS_CHECK(h.link >= 0 && h.link < static_cast<int>(links.size()), "hop link {} out of range",
                h.link);
  const Link& l = links[h.link];
  const std::string& a = nodes[l.a].name;
  const std::string& b = nodes[l.b].name;
  return h.forward ? fmt::format("{} {}->{}", l.name, a, b)
                   : fmt::format("{} {}->{}", l.name, b, a);
}

namespace {

constexpr std::pair<NodeKind, std::string_view> kNodeKinds[] = {
    {NodeKind::gpu, "gpu"},
    {NodeKind::pcie_switch, "pcie_switch"},
    {NodeKind::root_complex, "root_complex"},
    {NodeKind::cpu_socket, "cpu_socket"},
    {NodeKind::host_memory, "host_memory"},
    {NodeKind::nvswitch, "nvswitch"},
    {NodeKind::nic, "nic"},
    {NodeKind::network, "network"},
};

constexpr std::pair<LinkKind, std::string_view> kLinkKinds[] = {
    {LinkKind::nvlink, "nvlink"},
    {LinkKind::pcie, "pcie"},
    {LinkKind::inter_socket, "inter_socket"},
    {LinkKind::memory, "memory"},
    {LinkKind::nvswitch, "nvswitch"},
    {LinkKind::network, "network"},
};

/// Shortest paths from one node: fewest hops, then widest bottleneck; remaining ties go to the
/// predecessor with the lowest node index (then the lowest link index), so it is deterministic.
/// Only `start` and non-GPU nodes are expanded, so paths never pass through a GPU in the middle.
struct PathTree {
  std::vector<int> dist;           // hops, -1 when unreachable
  std::vector<double> bottleneck;  // widest bottleneck among the shortest paths
  std::vector<Hop> via;            // the hop that reaches the node
};

struct Adjacent {
  int node;
  Hop hop;
};

std::vector<std::vector<Adjacent>> adjacency(const Profile& p) {
  std::vector<std::vector<Adjacent>> adj(p.nodes.size());
  for (int i = 0; i < static_cast<int>(p.links.size()); ++i) {
    const Link& l = p.links[i];
    adj[l.a].push_back({l.b, Hop{i, true}});
    adj[l.b].push_back({l.a, Hop{i, false}});
  }
  return adj;
}

PathTree shortest_paths(const Profile& p, const std::vector<std::vector<Adjacent>>& adj,
                        int start) {
  const int n = static_cast<int>(p.nodes.size());
  PathTree t{std::vector<int>(n, -1), std::vector<double>(n, 0.0), std::vector<Hop>(n)};
  t.dist[start] = 0;
  t.bottleneck[start] = std::numeric_limits<double>::infinity();
  std::vector<int> layer{start};
  while (!layer.empty()) {
    std::vector<int> next;
    for (int u : layer) {
      if (u != start && p.nodes[u].kind == NodeKind::gpu) continue;
      for (const Adjacent& e : adj[u]) {
        const double bn = std::min(t.bottleneck[u], p.hop_bandwidth(e.hop));
        if (t.dist[e.node] == -1) {
          t.dist[e.node] = t.dist[u] + 1;
          t.bottleneck[e.node] = bn;
          t.via[e.node] = e.hop;
          next.push_back(e.node);
        } else if (t.dist[e.node] == t.dist[u] + 1 && bn > t.bottleneck[e.node]) {
          t.bottleneck[e.node] = bn;
          t.via[e.node] = e.hop;
        }
      }
    }
    // Nodes of a layer are discovered in a fixed order; sorting keeps later layers stable too.
    std::sort(next.begin(), next.end());
    layer = std::move(next);
  }
  return t;
}

/// The hops from the tree's start to `node` (which must be reachable).
std::vector<Hop> path_to(const Profile& p, const PathTree& t, int node) {
  std::vector<Hop> hops(t.dist[node]);
  for (int i = t.dist[node] - 1; i >= 0; --i) {
    hops[i] = t.via[node];
    const Link& l = p.links[t.via[node].link];
    node = t.via[node].forward ? l.a : l.b;
  }
  return hops;
}

}  // namespace

std::string_view to_string(NodeKind k) {
  for (const auto& [kind, text] : kNodeKinds)
    if (kind == k) return text;
  return "?";
}

std::optional<NodeKind> parse_node_kind(std::string_view s) {
  for (const auto& [kind, text] : kNodeKinds)
    if (text == s) return kind;
  return std::nullopt;
}

std::string_view to_string(LinkKind k) {
  for (const auto& [kind, text] : kLinkKinds)
    if (kind == k) return text;
  return "?";
}

std::optional<LinkKind> parse_link_kind(std::string_view s) {
  for (const auto& [kind, text] : kLinkKinds)
    if (text == s) return kind;
  return std::nullopt;
}

bool Profile::peer_access(int a, int b) const {
  if (p2p) return true;
  const std::pair<int, int> key = a < b ? std::pair(a, b) : std::pair(b, a);
  return std::binary_search(p2p_pairs.begin(), p2p_pairs.end(), key);
}

Status check_peak_flops(const Profile& p, DType dtype) {
  for (int g = 0; g < p.gpu_count(); ++g) {
    const DeviceSpec& d = p.gpu_device(g);
    if (auto it = d.peak_flops.find(dtype); it != d.peak_flops.end() && it->second > 0) continue;
    std::string listed;
    for (const auto& [t, f] : d.peak_flops)
      if (f > 0) listed += fmt::format("{}{}", listed.empty() ? "" : ", ", to_string(t));
    return make_error("dtype {}: profile '{}' has no {} peak FLOP/s for its GPU '{}' (it lists {})",
                      to_string(dtype), p.name, to_string(dtype), d.name,
                      listed.empty() ? "none" : listed);
  }
  return Status::success();
}

Status compute_missing_routes(Profile& p) {
  const int node_count = static_cast<int>(p.nodes.size());
  for (const Link& l : p.links)
    if (l.a < 0 || l.b < 0 || l.a >= node_count || l.b >= node_count)
      return make_error("link '{}': node index out of range", l.name);

  std::vector<int> gpu_nodes;
  for (int i = 0; i < node_count; ++i)
    if (p.nodes[i].kind == NodeKind::gpu) gpu_nodes.push_back(i);
  const int n = static_cast<int>(gpu_nodes.size());

  std::vector<char> have(static_cast<std::size_t>(n) * n, 0);
  for (const Route& r : p.routes)
    if (r.src >= 0 && r.dst >= 0 && r.src < n && r.dst < n)
      have[static_cast<std::size_t>(r.src) * n + r.dst] = 1;

  std::vector<int> host_memories;
  for (int i = 0; i < node_count; ++i)
    if (p.nodes[i].kind == NodeKind::host_memory) host_memories.push_back(i);
  bool all_peers = true;
  for (int s = 0; s < n && all_peers; ++s)
    for (int d = s + 1; d < n && all_peers; ++d) all_peers = p.peer_access(s, d);
  if (!all_peers && host_memories.empty())
    return make_error(
        "p2p is false (traffic staged through host memory) but the topology has no host_memory "
        "node");

  const auto adj = adjacency(p);
  std::vector<PathTree> from_memory;
  if (!all_peers)
    for (int h : host_memories) from_memory.push_back(shortest_paths(p, adj, h));

  for (int s = 0; s < n; ++s) {
    bool any_missing = false;
    for (int d = 0; d < n; ++d)
      if (d != s && !have[static_cast<std::size_t>(s) * n + d]) any_missing = true;
    if (!any_missing) continue;
    const PathTree from_src = shortest_paths(p, adj, gpu_nodes[s]);
    for (int d = 0; d < n; ++d) {
      if (d == s || have[static_cast<std::size_t>(s) * n + d]) continue;
      const int dst_node = gpu_nodes[d];
      Route r{s, d, {}};
      if (p.peer_access(s, d)) {
        if (from_src.dist[dst_node] < 0)
          return make_error("route {}->{}: no path", p.nodes[gpu_nodes[s]].name,
                            p.nodes[dst_node].name);
        r.hops = path_to(p, from_src, dst_node);
      } else {
        // Staged copy: src -> host memory -> dst; pick the memory with the fewest total hops,
        // then the widest bottleneck, then the lowest node index.
        int best = -1;
        int best_hops = 0;
        double best_bn = 0;
        for (int m = 0; m < static_cast<int>(host_memories.size()); ++m) {
          const int h = host_memories[m];
          const PathTree& back = from_memory[m];
          if (from_src.dist[h] < 0 || back.dist[dst_node] < 0) continue;
          const int hops = from_src.dist[h] + back.dist[dst_node];
          const double bn = std::min(from_src.bottleneck[h], back.bottleneck[dst_node]);
          if (best < 0 || hops < best_hops || (hops == best_hops && bn > best_bn)) {
            best = m;
            best_hops = hops;
            best_bn = bn;
          }
        }
        if (best < 0)
          return make_error("route {}->{}: no path through host memory", p.nodes[gpu_nodes[s]].name,
                            p.nodes[dst_node].name);
        r.hops = path_to(p, from_src, host_memories[best]);
        std::vector<Hop> down = path_to(p, from_memory[best], dst_node);
        r.hops.insert(r.hops.end(), down.begin(), down.end());
      }
      p.routes.push_back(std::move(r));
    }
  }
  std::stable_sort(p.routes.begin(), p.routes.end(), [](const Route& x, const Route& y) {
    return std::pair(x.src, x.dst) < std::pair(y.src, y.dst);
  });
  return Status::success();
}

}  // namespace compass::hardware
