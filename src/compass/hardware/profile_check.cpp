// Checking a profile: every field's range and every cross-reference (docs/profile-format.md).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "compass/hardware/profile_check.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {
namespace detail {
namespace {

// Plausible ranges, far wider than any real machine, so that every time computed from a
// profile stays finite (1e-300 B/s or a latency of 1e308 s would give inf and NaN later).
constexpr double kMinFlops = 1e6;            // per device and dtype
constexpr double kMaxFlops = 1e18;
constexpr double kMinBandwidth = 1e3;        // bytes/s
constexpr double kMaxBandwidth = 1e15;       // bytes/s
constexpr double kMaxMemoryBytes = 1e16;
constexpr double kMaxLatency = 1.0;          // s, per link
constexpr double kMaxOverhead = 1.0;         // s, per launch
constexpr double kMaxSlowdown = 100.0;       // interference factors
constexpr double kMinFusedOverhead = 0.01;   // fused kernel / cuBLASLt time
constexpr double kMaxSampleTime = 1e6;       // s, a calibration GEMM
constexpr std::int64_t kMaxSampleDim = std::int64_t{1} << 24;
constexpr int kMaxSms = 1 << 16;

Status positive(const std::string& field, double v, double max) {
  if (!(v > 0) || !std::isfinite(v)) return make_error("{}: must be positive, got {}", field, v);
  if (v > max) return make_error("{}: {} is more than the limit of {}", field, v, max);
  return Status::success();
}

Status in_range(const std::string& field, double v, double min, double max) {
  if (!(v > 0) || !std::isfinite(v)) return make_error("{}: must be positive, got {}", field, v);
  if (v < min || v > max) return make_error("{}: must be in [{}, {}], got {}", field, min, max, v);
  return Status::success();
}

// An integer count in 1..max.
Status count(const std::string& field, std::int64_t v, std::int64_t max) {
  if (v <= 0) return make_error("{}: must be positive, got {}", field, v);
  if (v > max) return make_error("{}: {} is more than the limit of {}", field, v, max);
  return Status::success();
}

Status non_negative(const std::string& field, double v, double max) {
  if (!(v >= 0) || !std::isfinite(v)) return make_error("{}: must be >= 0, got {}", field, v);
  if (v > max) return make_error("{}: {} is more than the limit of {}", field, v, max);
  return Status::success();
}

Status slowdown(const std::string& field, double v) {
  if (!(v >= 1) || !std::isfinite(v)) return make_error("{}: must be >= 1, got {}", field, v);
  if (v > kMaxSlowdown)
    return make_error("{}: {} is more than the limit of {}", field, v, kMaxSlowdown);
  return Status::success();
}

// Names are echoed to terminals: no control characters.
Status printable(const std::string& field, const std::string& name) {
  for (unsigned char ch : name)
    if (ch < 0x20 || ch == 0x7f)
      return make_error("{}: contains a control character (0x{:02x})", field, ch);
  return Status::success();
}


Status check_device(const DeviceSpec& d, const std::string& f,
                    std::set<std::string, std::less<>>& names) {
  if (d.name.empty()) return make_error("{}.name: must not be empty", f);
  if (!names.insert(d.name).second)
    return make_error("{}.name: duplicate device name '{}'", f, d.name);
  COMPASS_TRY(printable(f + ".name", d.name));
  COMPASS_TRY(count(f + ".sm_count", d.sm_count, kMaxSms));
  if (d.peak_flops.empty()) return make_error("{}.peak_flops: must list at least one dtype", f);
  for (const auto& [t, v] : d.peak_flops)
    COMPASS_TRY(
        in_range(fmt::format("{}.peak_flops.{}", f, to_string(t)), v, kMinFlops, kMaxFlops));
  COMPASS_TRY(in_range(f + ".memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s,
                       kMinBandwidth, kMaxBandwidth));
  COMPASS_TRY(positive(f + ".memory_bytes", d.memory_bytes, kMaxMemoryBytes));
  if (d.copy_engines < 1)
    return make_error("{}.copy_engines: must be >= 1, got {}", f, d.copy_engines);
  if (d.copy_engines > kMaxCopyEngines)
    return make_error("{}.copy_engines: {} is more than the limit of {}", f, d.copy_engines,
                      kMaxCopyEngines);
  return Status::success();
}

Status check_node(const Node& n, const std::string& f,
                  std::set<std::string, std::less<>>& names,
                  const std::set<std::string, std::less<>>& device_names) {
  if (n.name.empty()) return make_error("{}.name: must not be empty", f);
  COMPASS_TRY(printable(f + ".name", n.name));
  if (!names.insert(n.name).second)
    return make_error("{}.name: duplicate node name '{}'", f, n.name);
  if (to_string(n.kind) == "?") return make_error("{}.kind: invalid node kind", f);
  if (n.kind == NodeKind::gpu) {
    if (!device_names.count(n.device))
      return make_error("{}.device: unknown device '{}' (not in devices)", f, n.device);
  } else if (!n.device.empty()) {
    return make_error("{}.device: only GPU nodes have a device, '{}' is a {}", f, n.name,
                      to_string(n.kind));
  }
  return Status::success();
}

Status check_link(const Profile& p, const Link& l, const std::string& f,
                  std::set<std::string, std::less<>>& names) {
  const int node_count = static_cast<int>(p.nodes.size());
  if (l.name.empty()) return make_error("{}.name: must not be empty", f);
  COMPASS_TRY(printable(f + ".name", l.name));
  if (!names.insert(l.name).second)
    return make_error("{}.name: duplicate link name '{}'", f, l.name);
  if (to_string(l.kind) == "?") return make_error("{}.kind: invalid link kind", f);
  if (l.a < 0 || l.a >= node_count)
    return make_error("{}.a: node index {} out of range (0..{})", f, l.a, node_count - 1);
  if (l.b < 0 || l.b >= node_count)
    return make_error("{}.b: node index {} out of range (0..{})", f, l.b, node_count - 1);
  if (l.a == l.b)
    return make_error("{}.b: link connects node '{}' to itself", f, p.nodes[l.a].name);
  COMPASS_TRY(in_range(f + ".bandwidth_bytes_per_s", l.bandwidth_bytes_per_s, kMinBandwidth,
                       kMaxBandwidth));
  COMPASS_TRY(in_range(f + ".reverse_bandwidth_bytes_per_s", l.reverse_bandwidth_bytes_per_s,
                       kMinBandwidth, kMaxBandwidth));
  return non_negative(f + ".latency_s", l.latency_s, kMaxLatency);
}

Status check_gemm_sample(const GemmSample& g, const std::string& f) {
  if (to_string(g.dtype) == "?") return make_error("{}.dtype: invalid dtype", f);
  for (const auto& [key, v] : {std::pair{".m", g.m}, {".n", g.n}, {".k", g.k}})
    COMPASS_TRY(count(f + key, v, kMaxSampleDim));
  return positive(f + ".time_s", g.time_s, kMaxSampleTime);
}


std::vector<int> gpu_node_indices(const Profile& p) {
  std::vector<int> gpu_nodes;
  for (int i = 0; i < static_cast<int>(p.nodes.size()); ++i)
    if (p.nodes[i].kind == NodeKind::gpu) gpu_nodes.push_back(i);
  return gpu_nodes;
}

/// One route's own checks. `label` names it in errors: "route gpu2->gpu5" in memory, or
/// "routes[7] (gpu2->gpu5)" for the 8th route of a file.
Status check_route(const Profile& p, const Route& r, const std::vector<int>& gpu_nodes,
                   const std::string& index_path, bool file_label) {
  const int n = static_cast<int>(gpu_nodes.size());
  const int link_count = static_cast<int>(p.links.size());
  if (r.src < 0 || r.src >= n)
    return make_error("{}.src: GPU ordinal {} out of range (0..{})", index_path, r.src, n - 1);
  if (r.dst < 0 || r.dst >= n)
    return make_error("{}.dst: GPU ordinal {} out of range (0..{})", index_path, r.dst, n - 1);
  if (r.src == r.dst) return make_error("{}: route from GPU {} to itself", index_path, r.src);
  const std::string pair =
      fmt::format("{}->{}", p.nodes[gpu_nodes[r.src]].name, p.nodes[gpu_nodes[r.dst]].name);
  const std::string name =
      file_label ? fmt::format("{} ({})", index_path, pair) : fmt::format("route {}", pair);
  if (r.hops.empty()) return make_error("{}: hops: empty", name);
  int at = gpu_nodes[r.src];
  bool via_memory = false;
  for (std::size_t h = 0; h < r.hops.size(); ++h) {
    const Hop& hop = r.hops[h];
    if (hop.link < 0 || hop.link >= link_count)
      return make_error("{}: hops[{}]: link index {} out of range", name, h, hop.link);
    const Link& l = p.links[hop.link];
    const int from = hop.forward ? l.a : l.b;
    const int to = hop.forward ? l.b : l.a;
    if (from != at)
      return make_error("{}: hops[{}]: link '{}' leaves from '{}' but the path is at '{}'", name,
                        h, l.name, p.nodes[from].name, p.nodes[at].name);
    at = to;
    if (h + 1 < r.hops.size() && p.nodes[at].kind == NodeKind::gpu)
      return make_error("{}: hops[{}]: passes through GPU '{}'", name, h, p.nodes[at].name);
    if (p.nodes[at].kind == NodeKind::host_memory) via_memory = true;
  }
  if (at != gpu_nodes[r.dst])
    return make_error("{}: ends at '{}', not at '{}'", name, p.nodes[at].name,
                      p.nodes[gpu_nodes[r.dst]].name);
  if (!p.peer_access(r.src, r.dst) && !via_memory)
    return make_error("{}: p2p is false but the route does not pass through host memory", name);
  return Status::success();
}

}  // namespace

std::string indexed(std::string_view array, std::size_t i) {
  return fmt::format("{}[{}]", array, i);
}

Status validate_graph(const Profile& p, ErrorSink& sink, const FilePositions& at) {
  if (p.name.empty() && sink.failed(make_error("name: must not be empty"))) return sink.status();
  if (sink.failed(printable("name", p.name))) return sink.status();
  if (p.devices.size() > kMaxDevices)
    return make_error("devices: {} devices is more than the limit of {}", p.devices.size(),
                      kMaxDevices);
  if (p.nodes.size() > kMaxNodes)
    return make_error("nodes: {} nodes is more than the limit of {}", p.nodes.size(), kMaxNodes);
  if (p.links.size() > kMaxLinks)
    return make_error("links: {} links is more than the limit of {}", p.links.size(), kMaxLinks);

  std::set<std::string, std::less<>> device_names;
  for (std::size_t i = 0; i < p.devices.size(); ++i)
    if (sink.failed(check_device(p.devices[i],
                                 indexed("devices", FilePositions::at(at.devices, i)),
                                 device_names)))
      return sink.status();

  std::set<std::string, std::less<>> node_names;
  int gpus = 0;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    if (p.nodes[i].kind == NodeKind::gpu) ++gpus;
    if (sink.failed(check_node(p.nodes[i], indexed("nodes", FilePositions::at(at.nodes, i)),
                               node_names, device_names)))
      return sink.status();
  }
  if (gpus == 0 && sink.failed(make_error("nodes: the machine has no GPU (no node of kind gpu)")))
    return sink.status();

  std::set<std::string, std::less<>> link_names;
  for (std::size_t i = 0; i < p.links.size(); ++i)
    if (sink.failed(check_link(p, p.links[i], indexed("links", FilePositions::at(at.links, i)),
                               link_names)))
      return sink.status();

  const Overheads& o = p.overheads;
  const Interference& in = p.interference;
  const Calibration& c = p.calibration;
  std::vector<Status> scalar = {
      non_negative("overheads.kernel_launch_s", o.kernel_launch_s, kMaxOverhead),
      non_negative("overheads.collective_launch_s", o.collective_launch_s, kMaxOverhead),
      non_negative("overheads.flag_wait_s", o.flag_wait_s, kMaxOverhead),
      non_negative("overheads.copy_launch_s", o.copy_launch_s, kMaxOverhead),
      slowdown("interference.gemm_slowdown_copy_engine", in.gemm_slowdown_copy_engine),
      slowdown("interference.gemm_slowdown_sm_copy", in.gemm_slowdown_sm_copy),
      slowdown("interference.comm_slowdown_beside_gemm", in.comm_slowdown_beside_gemm)};
  for (const Status& s : scalar)
    if (sink.failed(s)) return sink.status();

  for (std::size_t i = 0; i < c.gemm.size(); ++i)
    if (sink.failed(check_gemm_sample(c.gemm[i], indexed("calibration.gemm", i))))
      return sink.status();
  if (c.copy_bandwidth_bytes_per_s &&
      sink.failed(in_range("calibration.copy_bandwidth_bytes_per_s", *c.copy_bandwidth_bytes_per_s,
                           kMinBandwidth, kMaxBandwidth)))
    return sink.status();
  if (c.gemm_efficiency) {
    const double e = *c.gemm_efficiency;
    if (!(e > 0 && e <= 1) &&
        sink.failed(make_error("calibration.gemm_efficiency: must be in (0, 1], got {}", e)))
      return sink.status();
  }
  if (c.fused_gemm_overhead &&
      sink.failed(in_range("calibration.fused_gemm_overhead", *c.fused_gemm_overhead,
                           kMinFusedOverhead, kMaxSlowdown)))
    return sink.status();
  if (c.fused_slowdown_copy_engine &&
      sink.failed(slowdown("calibration.fused_slowdown_copy_engine", *c.fused_slowdown_copy_engine)))
    return sink.status();
  return sink.status();
}

Status validate_given_routes(const Profile& p, ErrorSink& sink, const FilePositions& at) {
  const std::vector<int> gpu_nodes = gpu_node_indices(p);
  const int n = static_cast<int>(gpu_nodes.size());
  std::map<std::pair<int, int>, std::size_t> first_at;
  for (std::size_t i = 0; i < p.routes.size(); ++i) {
    const Route& r = p.routes[i];
    const std::string f = indexed("routes", FilePositions::at(at.routes, i));
    if (sink.failed(check_route(p, r, gpu_nodes, f, true))) return sink.status();
    if (r.src < 0 || r.dst < 0 || r.src >= n || r.dst >= n) continue;
    auto [it, fresh] = first_at.emplace(std::pair(r.src, r.dst), i);
    if (!fresh &&
        sink.failed(make_error("{}: route {}->{} appears twice (first at routes[{}])", f,
                               p.nodes[gpu_nodes[r.src]].name, p.nodes[gpu_nodes[r.dst]].name,
                               FilePositions::at(at.routes, it->second))))
      return sink.status();
  }
  return sink.status();
}

Status validate_routes(const Profile& p) {
  const std::vector<int> gpu_nodes = gpu_node_indices(p);
  const int n = static_cast<int>(gpu_nodes.size());
  auto route_name = [&](int s, int d) {
    return fmt::format("route {}->{}", p.nodes[gpu_nodes[s]].name, p.nodes[gpu_nodes[d]].name);
  };

  std::vector<char> seen(static_cast<std::size_t>(n) * n, 0);
  for (std::size_t i = 0; i < p.routes.size(); ++i) {
    const Route& r = p.routes[i];
    COMPASS_TRY(check_route(p, r, gpu_nodes, indexed("routes", i), false));
    char& s = seen[static_cast<std::size_t>(r.src) * n + r.dst];
    if (s) return make_error("{}: appears twice", route_name(r.src, r.dst));
    s = 1;
  }
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d && !seen[static_cast<std::size_t>(s) * n + d])
        return make_error("{}: missing", route_name(s, d));
  for (std::size_t i = 1; i < p.routes.size(); ++i)
    if (std::pair(p.routes[i - 1].src, p.routes[i - 1].dst) >
        std::pair(p.routes[i].src, p.routes[i].dst))
      return make_error("routes[{}]: routes must be sorted by (src, dst)", i);
  return Status::success();
}

}  // namespace detail

Status validate(const Profile& p) {
  detail::ErrorSink first;
  COMPASS_TRY(detail::validate_graph(p, first));
  return detail::validate_routes(p);
}

}  // namespace compass::hardware
