// Writing a profile: canonical JSON (docs/profile-format.md).
#include <nlohmann/json.hpp>

#include "compass/core/file_io.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {

namespace {

using ojson = nlohmann::ordered_json;

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

std::string profile_to_json(const Profile& p) {
  return to_ordered_json(p).dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

Status save_profile_file(const Profile& p, const std::string& path, bool overwrite) {
  if (Status s = validate(p); !s.ok()) return make_error("{}: {}", path, s.error().message);
  return write_file_atomic(path, profile_to_json(p), overwrite);
}

}  // namespace compass::hardware
