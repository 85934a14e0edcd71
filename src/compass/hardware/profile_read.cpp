// Reading a profile: JSON text or a file into a checked Profile, or every error of a file
// (docs/profile-format.md).
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "compass/core/json_text.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_check.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {

namespace {

using detail::ErrorSink;
using detail::FilePositions;
using detail::indexed;
using detail::kMaxDevices;
using detail::kMaxLinks;
using detail::kMaxNodes;
using detail::validate_given_routes;
using detail::validate_graph;
using detail::validate_routes;

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Bounds that keep absurd files (and the fuzzer) fast.
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

Result<Profile> parse_text(std::string_view text, std::string_view origin, ErrorSink& sink) {
  COMPASS_ASSIGN(const json root, parse_json_text(text, origin));
  try {
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

Result<Profile> load_profile_file(const std::string& path) {
  COMPASS_ASSIGN(std::string text, read_profile_text(path));
  return profile_from_json(text, path);
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
