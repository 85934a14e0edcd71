#include "compass/hardware/profile_io.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "compass/core/file_io.hpp"
#include "compass/hardware/presets.hpp"

namespace compass::hardware {

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Bounds that keep absurd inputs (and the fuzzer) fast; generous for real machines.
constexpr std::size_t kMaxNodes = 4096;
constexpr std::size_t kMaxLinks = 65536;
constexpr std::size_t kMaxDevices = 256;
constexpr std::size_t kMaxJsonDepth = 64;
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{1} << 30;

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string type_name(const json& j) {
  if (j.is_number_integer()) return "integer";
  if (j.is_number_float()) return "number";
  return j.type_name();
}

/// Reads the fields of one JSON object, naming the field in every error; finish() rejects
/// fields nobody asked for (typos should not be silently ignored).
class ObjectReader {
 public:
  static Result<ObjectReader> open(const json& j, std::string path) {
    if (!j.is_object())
      return make_error("{}: wrong type: expected an object, got {}",
                        path.empty() ? "<top level>" : path, type_name(j));
    return ObjectReader(j, std::move(path));
  }

  const std::string& path() const { return path_; }

  /// The member `key`, or nullptr when absent (then an error if `required`).
  Result<const json*> member(const char* key, bool required) {
    used_.insert(key);
    auto it = j_->find(key);
    if (it == j_->end()) {
      if (required) return make_error("{}: missing field", join(path_, key));
      return static_cast<const json*>(nullptr);
    }
    return &*it;
  }

  Status str(const char* key, std::string& out, bool required) {
    COMPASS_ASSIGN(const json* v, member(key, required));
    if (!v) return Status::success();
    if (!v->is_string()) return wrong_type(key, "a string", *v);
    out = v->get<std::string>();
    return Status::success();
  }

  Status number(const char* key, double& out, bool required) {
    COMPASS_ASSIGN(const json* v, member(key, required));
    if (!v) return Status::success();
    if (!v->is_number()) return wrong_type(key, "a number", *v);
    double d = v->get<double>();
    if (!std::isfinite(d)) return make_error("{}: must be finite, got {}", join(path_, key), d);
    out = d;
    return Status::success();
  }

  Status integer(const char* key, std::int64_t& out, bool required) {
    COMPASS_ASSIGN(const json* v, member(key, required));
    if (!v) return Status::success();
    if (!v->is_number_integer()) return wrong_type(key, "an integer", *v);
    if (v->is_number_unsigned() &&
        v->get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return make_error("{}: integer too large", join(path_, key));
    out = v->get<std::int64_t>();
    return Status::success();
  }

  Status int32(const char* key, int& out, bool required) {
    std::int64_t v = out;
    COMPASS_TRY(integer(key, v, required));
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      return make_error("{}: integer out of range, got {}", join(path_, key), v);
    out = static_cast<int>(v);
    return Status::success();
  }

  Status boolean(const char* key, bool& out, bool required) {
    COMPASS_ASSIGN(const json* v, member(key, required));
    if (!v) return Status::success();
    if (!v->is_boolean()) return wrong_type(key, "true or false", *v);
    out = v->get<bool>();
    return Status::success();
  }

  /// The array member `key` (nullptr when absent and optional).
  Result<const json*> array(const char* key, bool required) {
    COMPASS_ASSIGN(const json* v, member(key, required));
    if (v && !v->is_array()) return wrong_type(key, "an array", *v);
    return v;
  }

  Status finish() const {
    for (auto it = j_->begin(); it != j_->end(); ++it)
      if (!used_.count(it.key())) return make_error("{}: unknown field", join(path_, it.key()));
    return Status::success();
  }

  /// One error per field nobody asked for.
  std::vector<Status> unknown_fields() const {
    std::vector<Status> out;
    for (auto it = j_->begin(); it != j_->end(); ++it)
      if (!used_.count(it.key()))
        out.push_back(make_error("{}: unknown field", join(path_, it.key())));
    return out;
  }

 private:
  ObjectReader(const json& j, std::string path) : j_(&j), path_(std::move(path)) {}

  Error wrong_type(const char* key, const char* expected, const json& v) const {
    return make_error("{}: wrong type: expected {}, got {}", join(path_, key), expected,
                      type_name(v));
  }

  const json* j_;
  std::string path_;
  std::set<std::string, std::less<>> used_;
};

std::string indexed(std::string_view array, std::size_t i) {
  return fmt::format("{}[{}]", array, i);
}

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

/// Where checking goes: without a list the first error ends the check (load, validate); with
/// one every error is kept and checking goes on (`compass profile check`).
class ErrorSink {
 public:
  explicit ErrorSink(std::vector<Error>* all = nullptr) : all_(all) {}
  /// Records a failed status; true when the caller must stop (first-error mode).
  bool failed(const Status& s) {
    if (s.ok()) return false;
    if (!first_) first_ = s.error();
    if (all_) {
      all_->push_back(s.error());
      return false;
    }
    return true;
  }
  bool any() const { return first_.has_value(); }
  bool collecting() const { return all_ != nullptr; }
  Status status() const { return first_ ? Status(*first_) : Status::success(); }

 private:
  std::vector<Error>* all_;
  std::optional<Error> first_;
};

/// File positions of the elements kept in memory (an element that failed to parse is absent,
/// so in-memory index i is file index map[i]); empty means identity.
struct FilePositions {
  std::vector<std::size_t> devices, nodes, links, routes;
  static std::size_t at(const std::vector<std::size_t>& map, std::size_t i) {
    return i < map.size() ? map[i] : i;
  }
};

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

/// Everything but the routes (which need a sound graph first).
Status validate_graph(const Profile& p, ErrorSink& sink, const FilePositions& at = {}) {
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

/// The routes as a file gives them (before the missing ones are computed): each checked on its
/// own and for duplicates, errors naming the route's index in the file.
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

// ---------------------------------------------------------------------------------------------
// JSON -> Profile

/// Deepest nesting of [ and { outside strings; nlohmann's parser recurses, so bound it first.
std::size_t nesting_depth(std::string_view text) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

/// nlohmann's what() starts with "[json.exception.<kind>.<id>] "; users need the rest.
std::string without_json_prefix(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0) {
    auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

Status parse_device(const json& j, const std::string& path, DeviceSpec& d) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, path));
  COMPASS_TRY(r.str("name", d.name, true));
  COMPASS_TRY(r.str("arch", d.arch, false));
  COMPASS_TRY(r.int32("sm_count", d.sm_count, true));
  COMPASS_ASSIGN(const json* flops, r.member("peak_flops", true));
  const std::string fpath = join(path, "peak_flops");
  if (!flops->is_object())
    return make_error("{}: wrong type: expected an object, got {}", fpath, type_name(*flops));
  for (auto it = flops->begin(); it != flops->end(); ++it) {
    auto t = parse_dtype(it.key());
    if (!t) return make_error("{}.{}: unknown dtype (fp32, fp16, bf16, fp8)", fpath, it.key());
    if (!it.value().is_number())
      return make_error("{}.{}: wrong type: expected a number, got {}", fpath, it.key(),
                        type_name(it.value()));
    d.peak_flops[*t] = it.value().get<double>();
  }
  COMPASS_TRY(r.number("memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s, true));
  COMPASS_TRY(r.number("memory_bytes", d.memory_bytes, true));
  COMPASS_TRY(r.int32("copy_engines", d.copy_engines, true));
  return r.finish();
}

Status parse_node(const json& j, const std::string& path, Node& n) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, path));
  COMPASS_TRY(r.str("name", n.name, true));
  std::string kind;
  COMPASS_TRY(r.str("kind", kind, true));
  auto k = parse_node_kind(kind);
  if (!k)
    return make_error(
        "{}.kind: unknown node kind '{}' (gpu, pcie_switch, root_complex, cpu_socket, "
        "host_memory, nvswitch, nic, network)",
        path, kind);
  n.kind = *k;
  COMPASS_TRY(r.str("device", n.device, n.kind == NodeKind::gpu));
  return r.finish();
}

using NameIndex = std::unordered_map<std::string, int>;

Status node_ref(ObjectReader& r, const char* key, const NameIndex& nodes, int& out) {
  std::string name;
  COMPASS_TRY(r.str(key, name, true));
  auto it = nodes.find(name);
  if (it == nodes.end()) return make_error("{}: unknown node '{}'", join(r.path(), key), name);
  out = it->second;
  return Status::success();
}

Status parse_link(const json& j, const std::string& path, const NameIndex& nodes, Link& l) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, path));
  COMPASS_TRY(r.str("name", l.name, true));
  std::string kind;
  COMPASS_TRY(r.str("kind", kind, true));
  auto k = parse_link_kind(kind);
  if (!k)
    return make_error(
        "{}.kind: unknown link kind '{}' (nvlink, pcie, inter_socket, memory, nvswitch, network)",
        path, kind);
  l.kind = *k;
  COMPASS_TRY(node_ref(r, "a", nodes, l.a));
  COMPASS_TRY(node_ref(r, "b", nodes, l.b));
  COMPASS_TRY(r.number("bandwidth_bytes_per_s", l.bandwidth_bytes_per_s, true));
  l.reverse_bandwidth_bytes_per_s = l.bandwidth_bytes_per_s;  // symmetric unless stated
  COMPASS_TRY(r.number("reverse_bandwidth_bytes_per_s", l.reverse_bandwidth_bytes_per_s, false));
  COMPASS_TRY(r.number("latency_s", l.latency_s, false));
  COMPASS_TRY(r.boolean("shared", l.shared, false));
  COMPASS_TRY(r.str("source", l.source, false));
  return r.finish();
}

Status parse_route(const json& j, const std::string& path, const NameIndex& gpus,
                   const NameIndex& links, Route& route) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, path));
  for (const char* key : {"src", "dst"}) {
    std::string name;
    COMPASS_TRY(r.str(key, name, true));
    auto it = gpus.find(name);
    if (it == gpus.end()) return make_error("{}: '{}' is not a GPU node", join(path, key), name);
    (std::string_view(key) == "src" ? route.src : route.dst) = it->second;
  }
  COMPASS_ASSIGN(const json* hops, r.array("hops", true));
  for (std::size_t h = 0; h < hops->size(); ++h) {
    const json& hop = (*hops)[h];
    const std::string hpath = fmt::format("{}.hops[{}]", path, h);
    if (!hop.is_array() || hop.size() != 2 || !hop[0].is_string() || !hop[1].is_string())
      return make_error("{}: expected [\"link-name\", \"fwd\" or \"rev\"]", hpath);
    auto it = links.find(hop[0].get<std::string>());
    if (it == links.end())
      return make_error("{}: unknown link '{}'", hpath, hop[0].get<std::string>());
    const std::string dir = hop[1].get<std::string>();
    if (dir != "fwd" && dir != "rev")
      return make_error("{}: direction must be \"fwd\" or \"rev\", got '{}'", hpath, dir);
    route.hops.push_back(Hop{it->second, dir == "fwd"});
  }
  return r.finish();
}

Status parse_overheads(const json& j, Overheads& o) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, "overheads"));
  COMPASS_TRY(r.number("kernel_launch_s", o.kernel_launch_s, false));
  COMPASS_TRY(r.number("collective_launch_s", o.collective_launch_s, false));
  COMPASS_TRY(r.number("flag_wait_s", o.flag_wait_s, false));
  COMPASS_TRY(r.number("copy_launch_s", o.copy_launch_s, false));
  return r.finish();
}

Status parse_interference(const json& j, Interference& in) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, "interference"));
  COMPASS_TRY(r.number("gemm_slowdown_copy_engine", in.gemm_slowdown_copy_engine, false));
  COMPASS_TRY(r.number("gemm_slowdown_sm_copy", in.gemm_slowdown_sm_copy, false));
  COMPASS_TRY(r.number("comm_slowdown_beside_gemm", in.comm_slowdown_beside_gemm, false));
  return r.finish();
}

Status parse_calibration(const json& j, Calibration& c) {
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(j, "calibration"));
  COMPASS_ASSIGN(const json* gemm, r.array("gemm", false));
  if (gemm) {
    for (std::size_t i = 0; i < gemm->size(); ++i) {
      const std::string path = indexed("calibration.gemm", i);
      COMPASS_ASSIGN(ObjectReader g, ObjectReader::open((*gemm)[i], path));
      GemmSample s;
      std::string dtype;
      COMPASS_TRY(g.str("dtype", dtype, true));
      auto t = parse_dtype(dtype);
      if (!t)
        return make_error("{}.dtype: unknown dtype '{}' (fp32, fp16, bf16, fp8)", path, dtype);
      s.dtype = *t;
      COMPASS_TRY(g.integer("m", s.m, true));
      COMPASS_TRY(g.integer("n", s.n, true));
      COMPASS_TRY(g.integer("k", s.k, true));
      COMPASS_TRY(g.number("time_s", s.time_s, true));
      COMPASS_TRY(g.finish());
      c.gemm.push_back(s);
    }
  }
  double v = 0;
  COMPASS_ASSIGN(const json* copy, r.member("copy_bandwidth_bytes_per_s", false));
  if (copy) {
    COMPASS_TRY(r.number("copy_bandwidth_bytes_per_s", v, true));
    c.copy_bandwidth_bytes_per_s = v;
  }
  COMPASS_ASSIGN(const json* eff, r.member("gemm_efficiency", false));
  if (eff) {
    COMPASS_TRY(r.number("gemm_efficiency", v, true));
    c.gemm_efficiency = v;
  }
  for (auto [key, field] : {std::pair{"fused_gemm_overhead", &c.fused_gemm_overhead},
                            std::pair{"fused_slowdown_copy_engine", &c.fused_slowdown_copy_engine}}) {
    COMPASS_ASSIGN(const json* member, r.member(key, false));
    if (member) {
      COMPASS_TRY(r.number(key, v, true));
      *field = v;
    }
  }
  COMPASS_TRY(r.str("source", c.source, false));
  return r.finish();
}

/// Parses and checks a profile. With a collecting sink, an element that fails is left out and
/// the check goes on (later errors may then name it as unknown); without one the first error
/// is returned. The returned profile is complete only when the sink saw no error.
Result<Profile> parse_profile(const json& root, ErrorSink& sink) {
#define COMPASS_SINK(expr)                          \
  do {                                              \
    if (sink.failed(expr)) return sink.status().error(); \
  } while (0)
  COMPASS_ASSIGN(ObjectReader r, ObjectReader::open(root, ""));
  std::int64_t version = 0;
  COMPASS_TRY(r.integer("version", version, true));
  if (version != Profile::kFormatVersion)
    return make_error(
        "version: unsupported profile format version {} (this build reads version {})", version,
        Profile::kFormatVersion);
  Profile p;
  FilePositions at;
  COMPASS_SINK(r.str("name", p.name, true));
  COMPASS_SINK(r.str("description", p.description, false));
  COMPASS_SINK(r.boolean("p2p", p.p2p, false));

  COMPASS_ASSIGN(const json* devices, r.array("devices", true));
  if (devices->size() > kMaxDevices)
    return make_error("devices: {} devices is more than the limit of {}", devices->size(),
                      kMaxDevices);
  for (std::size_t i = 0; i < devices->size(); ++i) {
    DeviceSpec d;
    const Status parsed = parse_device((*devices)[i], indexed("devices", i), d);
    if (sink.failed(parsed)) return sink.status().error();
    if (!parsed.ok()) continue;
    p.devices.push_back(std::move(d));
    at.devices.push_back(i);
  }

  COMPASS_ASSIGN(const json* nodes, r.array("nodes", true));
  if (nodes->size() > kMaxNodes)
    return make_error("nodes: {} nodes is more than the limit of {}", nodes->size(), kMaxNodes);
  NameIndex node_index, gpu_index;
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    Node n;
    const std::string path = indexed("nodes", i);
    const Status parsed = parse_node((*nodes)[i], path, n);
    if (sink.failed(parsed)) return sink.status().error();
    if (!parsed.ok()) continue;
    if (!node_index.emplace(n.name, static_cast<int>(p.nodes.size())).second) {
      COMPASS_SINK(make_error("{}.name: duplicate node name '{}'", path, n.name));
      continue;
    }
    if (n.kind == NodeKind::gpu) gpu_index.emplace(n.name, static_cast<int>(gpu_index.size()));
    p.nodes.push_back(std::move(n));
    at.nodes.push_back(i);
  }

  COMPASS_ASSIGN(const json* links, r.array("links", false));
  NameIndex link_index;
  if (links) {
    if (links->size() > kMaxLinks)
      return make_error("links: {} links is more than the limit of {}", links->size(), kMaxLinks);
    for (std::size_t i = 0; i < links->size(); ++i) {
      Link l;
      const std::string path = indexed("links", i);
      const Status parsed = parse_link((*links)[i], path, node_index, l);
      if (sink.failed(parsed)) return sink.status().error();
      if (!parsed.ok()) continue;
      if (!link_index.emplace(l.name, static_cast<int>(p.links.size())).second) {
        COMPASS_SINK(make_error("{}.name: duplicate link name '{}'", path, l.name));
        continue;
      }
      p.links.push_back(std::move(l));
      at.links.push_back(i);
    }
  }

  COMPASS_ASSIGN(const json* pairs, r.array("p2p_pairs", false));
  if (pairs) {
    if (p.p2p && !pairs->empty())
      return make_error("p2p_pairs: listed, but p2p is true (every pair has peer access already)");
    for (std::size_t i = 0; i < pairs->size(); ++i) {
      const std::string path = indexed("p2p_pairs", i);
      const json& pj = (*pairs)[i];
      if (!pj.is_array() || pj.size() != 2 || !pj[0].is_string() || !pj[1].is_string())
        return make_error("{}: expected [\"gpuA\", \"gpuB\"]", path);
      int g[2];
      for (int k = 0; k < 2; ++k) {
        const auto it = gpu_index.find(pj[k].get<std::string>());
        if (it == gpu_index.end())
          return make_error("{}[{}]: unknown GPU '{}'", path, k, pj[k].get<std::string>());
        g[k] = it->second;
      }
      if (g[0] == g[1]) return make_error("{}: a GPU paired with itself", path);
      p.p2p_pairs.emplace_back(std::min(g[0], g[1]), std::max(g[0], g[1]));
    }
    std::sort(p.p2p_pairs.begin(), p.p2p_pairs.end());
    for (std::size_t i = 1; i < p.p2p_pairs.size(); ++i)
      if (p.p2p_pairs[i] == p.p2p_pairs[i - 1])
        return make_error("p2p_pairs: GPU pair {}-{} appears twice",
                          p.nodes[p.gpu_node(p.p2p_pairs[i].first)].name,
                          p.nodes[p.gpu_node(p.p2p_pairs[i].second)].name);
  }

  COMPASS_ASSIGN(const json* routes, r.array("routes", false));
  if (routes) {
    const std::size_t n = gpu_index.size();
    if (routes->size() > n * (n - (n > 0 ? 1 : 0)))
      return make_error("routes: {} routes but {} GPUs have only {} ordered pairs", routes->size(),
                        n, n * (n - (n > 0 ? 1 : 0)));
    for (std::size_t i = 0; i < routes->size(); ++i) {
      Route route;
      const Status parsed =
          parse_route((*routes)[i], indexed("routes", i), gpu_index, link_index, route);
      if (sink.failed(parsed)) return sink.status().error();
      if (!parsed.ok()) continue;
      p.routes.push_back(std::move(route));
      at.routes.push_back(i);
    }
  }

  COMPASS_ASSIGN(const json* overheads, r.member("overheads", false));
  if (overheads) COMPASS_SINK(parse_overheads(*overheads, p.overheads));
  COMPASS_ASSIGN(const json* interference, r.member("interference", false));
  if (interference) COMPASS_SINK(parse_interference(*interference, p.interference));
  COMPASS_ASSIGN(const json* calibration, r.member("calibration", false));
  if (calibration) COMPASS_SINK(parse_calibration(*calibration, p.calibration));

  COMPASS_ASSIGN(const json* notes, r.array("notes", false));
  if (notes)
    for (std::size_t i = 0; i < notes->size(); ++i) {
      if (!(*notes)[i].is_string()) {
        COMPASS_SINK(make_error("{}: wrong type: expected a string, got {}", indexed("notes", i),
                                type_name((*notes)[i])));
        continue;
      }
      p.notes.push_back((*notes)[i].get<std::string>());
    }
  for (const Status& s : r.unknown_fields()) COMPASS_SINK(s);

  // Routes reference a sound graph only after the rest is checked.
  if (Status s = validate_graph(p, sink, at); !s.ok() && !sink.collecting()) return s.error();
  // The routes the file gives are checked as given, so errors name their index in the file;
  // only then are the missing ones computed.
  if (Status s = validate_given_routes(p, sink, at); !s.ok() && !sink.collecting())
    return s.error();
  if (sink.any()) return sink.status().error();
  COMPASS_TRY(compute_missing_routes(p));
  COMPASS_TRY(validate_routes(p));
  return p;
#undef COMPASS_SINK
}

// ---------------------------------------------------------------------------------------------
// Profile -> JSON

ojson to_ordered_json(const Profile& p) {
  ojson j;
  j["version"] = Profile::kFormatVersion;
  j["name"] = p.name;
  j["description"] = p.description;
  j["p2p"] = p.p2p;
  // Written only when present, so profiles without it save the same bytes as before.
  if (!p.p2p_pairs.empty()) {
    ojson pairs = ojson::array();
    for (const auto& [a, b] : p.p2p_pairs)
      pairs.push_back(ojson::array({p.nodes[p.gpu_node(a)].name, p.nodes[p.gpu_node(b)].name}));
    j["p2p_pairs"] = std::move(pairs);
  }
  ojson devices = ojson::array();
  for (const DeviceSpec& d : p.devices) {
    ojson dj;
    dj["name"] = d.name;
    dj["arch"] = d.arch;
    dj["sm_count"] = d.sm_count;
    ojson flops = ojson::object();
    for (const auto& [t, v] : d.peak_flops) flops[std::string(to_string(t))] = v;
    dj["peak_flops"] = std::move(flops);
    dj["memory_bandwidth_bytes_per_s"] = d.memory_bandwidth_bytes_per_s;
    dj["memory_bytes"] = d.memory_bytes;
    dj["copy_engines"] = d.copy_engines;
    devices.push_back(std::move(dj));
  }
  j["devices"] = std::move(devices);
  ojson nodes = ojson::array();
  for (const Node& n : p.nodes) {
    ojson nj;
    nj["name"] = n.name;
    nj["kind"] = std::string(to_string(n.kind));
    if (n.kind == NodeKind::gpu || !n.device.empty()) nj["device"] = n.device;
    nodes.push_back(std::move(nj));
  }
  j["nodes"] = std::move(nodes);
  auto node_name = [&](int i) -> std::string {
    return i >= 0 && i < static_cast<int>(p.nodes.size()) ? p.nodes[i].name : fmt::format("#{}", i);
  };
  ojson links = ojson::array();
  for (const Link& l : p.links) {
    ojson lj;
    lj["name"] = l.name;
    lj["kind"] = std::string(to_string(l.kind));
    lj["a"] = node_name(l.a);
    lj["b"] = node_name(l.b);
    lj["bandwidth_bytes_per_s"] = l.bandwidth_bytes_per_s;
    lj["reverse_bandwidth_bytes_per_s"] = l.reverse_bandwidth_bytes_per_s;
    lj["latency_s"] = l.latency_s;
    lj["shared"] = l.shared;
    lj["source"] = l.source;
    links.push_back(std::move(lj));
  }
  j["links"] = std::move(links);
  std::vector<int> gpu_nodes;
  for (int i = 0; i < static_cast<int>(p.nodes.size()); ++i)
    if (p.nodes[i].kind == NodeKind::gpu) gpu_nodes.push_back(i);
  auto gpu_name = [&](int g) -> std::string {
    return g >= 0 && g < static_cast<int>(gpu_nodes.size()) ? p.nodes[gpu_nodes[g]].name
                                                            : fmt::format("#{}", g);
  };
  ojson routes = ojson::array();
  for (const Route& r : p.routes) {
    ojson rj;
    rj["src"] = gpu_name(r.src);
    rj["dst"] = gpu_name(r.dst);
    ojson hops = ojson::array();
    for (const Hop& h : r.hops) {
      std::string link = h.link >= 0 && h.link < static_cast<int>(p.links.size())
                             ? p.links[h.link].name
                             : fmt::format("#{}", h.link);
      hops.push_back(ojson::array({link, h.forward ? "fwd" : "rev"}));
    }
    rj["hops"] = std::move(hops);
    routes.push_back(std::move(rj));
  }
  j["routes"] = std::move(routes);
  j["overheads"] = ojson{{"kernel_launch_s", p.overheads.kernel_launch_s},
                         {"collective_launch_s", p.overheads.collective_launch_s},
                         {"flag_wait_s", p.overheads.flag_wait_s},
                         {"copy_launch_s", p.overheads.copy_launch_s}};
  j["interference"] =
      ojson{{"gemm_slowdown_copy_engine", p.interference.gemm_slowdown_copy_engine},
            {"gemm_slowdown_sm_copy", p.interference.gemm_slowdown_sm_copy},
            {"comm_slowdown_beside_gemm", p.interference.comm_slowdown_beside_gemm}};
  ojson cal;
  ojson gemm = ojson::array();
  for (const GemmSample& g : p.calibration.gemm)
    gemm.push_back(ojson{{"dtype", std::string(to_string(g.dtype))},
                         {"m", g.m},
                         {"n", g.n},
                         {"k", g.k},
                         {"time_s", g.time_s}});
  cal["gemm"] = std::move(gemm);
  if (p.calibration.copy_bandwidth_bytes_per_s)
    cal["copy_bandwidth_bytes_per_s"] = *p.calibration.copy_bandwidth_bytes_per_s;
  if (p.calibration.gemm_efficiency) cal["gemm_efficiency"] = *p.calibration.gemm_efficiency;
  if (p.calibration.fused_gemm_overhead)
    cal["fused_gemm_overhead"] = *p.calibration.fused_gemm_overhead;
  if (p.calibration.fused_slowdown_copy_engine)
    cal["fused_slowdown_copy_engine"] = *p.calibration.fused_slowdown_copy_engine;
  cal["source"] = p.calibration.source;
  j["calibration"] = std::move(cal);
  j["notes"] = p.notes;
  return j;
}

}  // namespace

Status validate(const Profile& p) {
  ErrorSink first;
  COMPASS_TRY(validate_graph(p, first));
  return validate_routes(p);
}

namespace {

Result<Profile> parse_text(std::string_view text, std::string_view origin, ErrorSink& sink) {
  if (nesting_depth(text) > kMaxJsonDepth)
    return make_error("{}: malformed JSON: nested deeper than {} levels", origin, kMaxJsonDepth);
  try {
    json root;
    try {
      root = json::parse(text.begin(), text.end());
    } catch (const json::parse_error& e) {
      const std::size_t upto = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
      const auto line = 1 + std::count(text.begin(), text.begin() + upto, '\n');
      // what(): "[json.exception.parse_error.101] parse error at line 4, column 3: <detail>"
      std::string what = e.what();
      std::string detail = what;
      auto at = what.find("parse error");
      if (at != std::string::npos) {
        auto colon = what.find(": ", at);
        if (colon != std::string::npos) detail = what.substr(colon + 2);
      }
      return make_error("{}: line {}: malformed JSON: {}", origin, line, detail);
    } catch (const json::exception& e) {
      // e.g. "number overflow parsing '1e999'" (out_of_range.406) carries no position.
      return make_error("{}: malformed JSON: {}", origin, without_json_prefix(e.what()));
    }
    Result<Profile> p = parse_profile(root, sink);
    if (!p.ok()) return make_error("{}: {}", origin, p.error().message);
    return p;
  } catch (const std::exception& e) {
    // nlohmann reports type and range problems by exception; none may escape the library.
    return make_error("{}: invalid profile: {}", origin, without_json_prefix(e.what()));
  }
}

Result<std::string> read_profile_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return make_error("{}: no such file", path);
  if (!fs::is_regular_file(path, ec)) return make_error("{}: not a regular file", path);
  const auto size = fs::file_size(path, ec);
  if (ec) return make_error("{}: cannot read: {}", path, ec.message());
  if (size > kMaxFileBytes) return make_error("{}: file too large ({} bytes)", path, size);
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error("{}: cannot open for reading", path);
  std::ostringstream text;
  text << f.rdbuf();
  if (f.bad()) return make_error("{}: read failed", path);
  return text.str();
}

}  // namespace

Result<Profile> profile_from_json(std::string_view text, std::string_view origin) {
  ErrorSink first;
  return parse_text(text, origin, first);
}

std::vector<Error> check_profile_json(std::string_view text, std::string_view origin) {
  std::vector<Error> all;
  ErrorSink sink(&all);
  Result<Profile> p = parse_text(text, origin, sink);
  for (Error& e : all) e.message = fmt::format("{}: {}", origin, e.message);
  // An error that ended the check (malformed JSON, a missing array) is not in the list yet.
  if (!p.ok() && std::none_of(all.begin(), all.end(), [&](const Error& e) {
        return e.message == p.error().message;
      }))
    all.push_back(p.error());
  return all;
}

std::vector<Error> check_profile_file(const std::string& path) {
  Result<std::string> text = read_profile_text(path);
  if (!text.ok()) return {text.error()};
  return check_profile_json(*text, path);
}

std::string profile_to_json(const Profile& p) {
  return to_ordered_json(p).dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Result<Profile> load_profile_file(const std::string& path) {
  COMPASS_ASSIGN(std::string text, read_profile_text(path));
  return profile_from_json(text, path);
}

Status save_profile_file(const Profile& p, const std::string& path, bool overwrite) {
  if (Status s = validate(p); !s.ok()) return make_error("{}: {}", path, s.error().message);
  return write_file_atomic(path, profile_to_json(p), overwrite);
}

Result<Profile> resolve_profile(const std::string& preset_or_path) {
  const auto names = preset_names();
  if (std::find(names.begin(), names.end(), preset_or_path) != names.end())
    return make_preset(preset_or_path);
  std::error_code ec;
  if (std::filesystem::exists(preset_or_path, ec)) return load_profile_file(preset_or_path);
  return make_error("unknown profile '{}': not a preset ({}) and no such file", preset_or_path,
                    fmt::join(names, ", "));
}

}  // namespace compass::hardware
