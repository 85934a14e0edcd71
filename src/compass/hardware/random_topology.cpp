#include "compass/hardware/random_topology.hpp"

#include <fmt/format.h>

#include <random>
#include <vector>

#include "compass/core/result.hpp"
#include "compass/core/units.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {
namespace {

class Gen {
 public:
  Gen(std::uint64_t seed, int gpus, TopologyFamily family) : rng_(seed) {
    p_.name = fmt::format("random-{}-{}-{}", to_string(family), gpus, seed);
    p_.description = "seeded random machine (hardware/random_topology.hpp)";
    DeviceSpec d;
    d.name = "random-gpu";
    d.arch = "sm_80";
    d.sm_count = 100;
    d.peak_flops = {{DType::bf16, 300e12}, {DType::fp16, 300e12}, {DType::fp32, 20e12}};
    d.memory_bandwidth_bytes_per_s = 2000 * kGB;
    d.memory_bytes = 80 * kGB;
    d.copy_engines = uniform(1, 4);
    p_.devices.push_back(d);
    for (int g = 0; g < gpus; ++g) node(fmt::format("gpu{}", g), NodeKind::gpu);
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double pick(const std::vector<double>& v) {
    return v[static_cast<std::size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }
  bool coin(double p_true) { return std::bernoulli_distribution(p_true)(rng_); }

  int node(const std::string& name, NodeKind kind) {
    p_.nodes.push_back(Node{name, kind, kind == NodeKind::gpu ? "random-gpu" : ""});
    return static_cast<int>(p_.nodes.size()) - 1;
  }
  void link(const std::string& name, LinkKind kind, int a, int b, double fwd, double rev,
            bool shared, double latency_s) {
    p_.links.push_back(Link{name, kind, a, b, fwd, rev, latency_s, shared, "random"});
  }
  // A PCIe bandwidth pair; directions differ now and then.
  std::pair<double, double> pcie_bw() {
    const double f = pick({12, 16, 20, 25, 26, 32}) * kGB;
    return {f, coin(0.3) ? pick({12, 16, 20, 25, 26, 32}) * kGB : f};
  }
  void nvlink_bridges(int gpus) {
    const int bridges = uniform(0, gpus / 2);
    for (int k = 0; k < bridges; ++k) {
      const int a = uniform(0, gpus - 1);
      const int b = uniform(0, gpus - 1);
      if (a == b) continue;
      const double bw = pick({25, 50, 56.25, 100}) * kGB;
      link(fmt::format("nvlink{}-{}-{}", k, a, b), LinkKind::nvlink, a, b, bw, bw, false, 1.5e-6);
    }
  }
  Profile& profile() { return p_; }

 private:
  std::mt19937_64 rng_;
  Profile p_;
};

void pcie_tree(Gen& g, int gpus, bool staged) {
  const int sockets = gpus >= 4 ? g.uniform(1, 2) : 1;
  const int switches = std::max(1, std::min(gpus, g.uniform(1, std::max(1, gpus / 2))));
  std::vector<int> rc, sw;
  for (int k = 0; k < sockets; ++k) rc.push_back(g.node(fmt::format("rc{}", k), NodeKind::root_complex));
  for (int s = 0; s < switches; ++s) {
    sw.push_back(g.node(fmt::format("sw{}", s), NodeKind::pcie_switch));
    auto [f, r] = g.pcie_bw();
    g.link(fmt::format("sw{}-up", s), LinkKind::pcie, sw[s], rc[s * sockets / switches], f, r, true,
           1e-6);
  }
  for (int k = 0; k + 1 < sockets; ++k) {
    const double bw = g.pick({10, 16, 20, 32, 40}) * kGB;
    g.link(fmt::format("xsocket-{}-{}", k, k + 1), LinkKind::inter_socket, rc[k], rc[k + 1], bw, bw,
           true, 1e-6);
  }
  for (int i = 0; i < gpus; ++i) {
    auto [f, r] = g.pcie_bw();
    g.link(fmt::format("pcie-gpu{}", i), LinkKind::pcie, i, sw[i * switches / gpus], f, r, false,
           1e-6);
  }
  if (staged) {
    g.profile().p2p = false;
    for (int k = 0; k < sockets; ++k) {
      const int m = g.node(fmt::format("mem{}", k), NodeKind::host_memory);
      const double bw = g.pick({50, 100}) * kGB;
      g.link(fmt::format("mem{}", k), LinkKind::memory, rc[k], m, bw, bw, true, 0.5e-6);
    }
  } else {
    g.nvlink_bridges(gpus);
  }
}

}  // namespace

std::string_view to_string(TopologyFamily f) {
  switch (f) {
    case TopologyFamily::pcie_tree: return "pcie-tree";
    case TopologyFamily::one_root: return "one-root";
    case TopologyFamily::switch_chain: return "switch-chain";
    case TopologyFamily::nvswitch: return "nvswitch";
    case TopologyFamily::staged: return "staged";
  }
  return "?";
}

Profile random_topology(std::uint64_t seed, int gpus, TopologyFamily family) {
  COMPASS_CHECK(gpus >= 1 && gpus <= 64, "random_topology: {} GPUs out of 1..64", gpus);
  Gen g(seed, gpus, family);
  switch (family) {
    case TopologyFamily::pcie_tree: pcie_tree(g, gpus, false); break;
    case TopologyFamily::staged: pcie_tree(g, gpus, true); break;
    case TopologyFamily::one_root: {
      const int sw = g.node("sw0", NodeKind::pcie_switch);
      for (int i = 0; i < gpus; ++i) {
        auto [f, r] = g.pcie_bw();
        g.link(fmt::format("pcie-gpu{}", i), LinkKind::pcie, i, sw, f, r, false, 1e-6);
      }
      g.nvlink_bridges(gpus);
      break;
    }
    case TopologyFamily::switch_chain: {
      const int switches = g.uniform(1, 3);
      std::vector<int> sw;
      for (int s = 0; s < switches; ++s) sw.push_back(g.node(fmt::format("sw{}", s), NodeKind::pcie_switch));
      for (int s = 1; s < switches; ++s) {
        auto [f, r] = g.pcie_bw();
        g.link(fmt::format("up{}", s), LinkKind::pcie, sw[s - 1], sw[s], f, r, true, 1e-6);
      }
      for (int i = 0; i < gpus; ++i) {
        auto [f, r] = g.pcie_bw();
        g.link(fmt::format("pcie-gpu{}", i), LinkKind::pcie, i, sw[g.uniform(0, switches - 1)], f, r,
               false, 0.5e-6);
      }
      g.nvlink_bridges(gpus);
      break;
    }
    case TopologyFamily::nvswitch: {
      const int nvs = g.node("nvswitch", NodeKind::nvswitch);
      for (int i = 0; i < gpus; ++i) {
        const double bw = g.pick({150, 230, 300, 370}) * kGB;
        g.link(fmt::format("nvl-gpu{}", i), LinkKind::nvswitch, i, nvs, bw,
               g.coin(0.2) ? g.pick({150, 230, 300, 370}) * kGB : bw, false, 0.75e-6);
      }
      break;
    }
  }
  Profile& p = g.profile();
  Status st = compute_missing_routes(p);
  COMPASS_CHECK(st.ok(), "random_topology: {}", st.ok() ? "" : st.error().message);
  Status v = validate(p);
  COMPASS_CHECK(v.ok(), "random_topology: {}", v.ok() ? "" : v.error().message);
  return std::move(p);
}

Profile random_topology(std::uint64_t seed, int gpus) {
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  const int f = std::uniform_int_distribution<int>(0, 4)(rng);
  return random_topology(seed, gpus, static_cast<TopologyFamily>(f));
}

}  // namespace compass::hardware
