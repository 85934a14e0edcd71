// Profile: JSON round trip, every validation error path, route computation, files.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {
namespace {

using json = nlohmann::json;

DeviceSpec test_device() {
  return DeviceSpec{"dev", "sm_00", 10, {{DType::bf16, 100e12}}, 1e12, 16e9, 2};
}

/// A small graph: GPUs named gpu0..gpu{n-1} first, then `extra` other nodes.
struct Graph {
  Profile p;
  explicit Graph(int gpus) {
    p.name = "test";
    p.devices.push_back(test_device());
    for (int g = 0; g < gpus; ++g) add("gpu" + std::to_string(g), NodeKind::gpu, "dev");
  }
  int add(const std::string& name, NodeKind kind, const std::string& device = "") {
    p.nodes.push_back(Node{name, kind, device});
    return static_cast<int>(p.nodes.size()) - 1;
  }
  int index(const std::string& name) const {
    for (int i = 0; i < static_cast<int>(p.nodes.size()); ++i)
      if (p.nodes[i].name == name) return i;
    ADD_FAILURE() << "no node " << name;
    return 0;
  }
  void link(const std::string& a, const std::string& b, double bw, LinkKind kind = LinkKind::pcie) {
    p.links.push_back(Link{a + "-" + b, kind, index(a), index(b), bw, bw, 1e-6, false, "test"});
  }
  std::vector<std::string> route_links(int s, int d) const {
    std::vector<std::string> out;
    for (const Hop& h : p.route(s, d).hops) out.push_back(p.links[h.link].name);
    return out;
  }
};

/// A minimal valid profile as JSON text (routes omitted: computed on load).
json minimal_json() {
  return json::parse(R"({
    "version": 1,
    "name": "mini",
    "devices": [{"name": "dev", "sm_count": 4, "peak_flops": {"bf16": 1e12},
                 "memory_bandwidth_bytes_per_s": 1e11, "memory_bytes": 1e9,
                 "copy_engines": 1}],
    "nodes": [{"name": "gpu0", "kind": "gpu", "device": "dev"},
              {"name": "gpu1", "kind": "gpu", "device": "dev"},
              {"name": "sw0", "kind": "pcie_switch"}],
    "links": [{"name": "l0", "kind": "pcie", "a": "gpu0", "b": "sw0",
               "bandwidth_bytes_per_s": 2e10, "latency_s": 1e-6},
              {"name": "l1", "kind": "pcie", "a": "gpu1", "b": "sw0",
               "bandwidth_bytes_per_s": 2e10, "latency_s": 1e-6}]
  })");
}

/// Loads `j` as "my.json" and returns the error message ("" when it loads).
std::string load_error(const json& j) {
  auto r = profile_from_json(j.dump(), "my.json");
  return r.ok() ? std::string() : r.error().message;
}

TEST(ProfileJson, MinimalLoadsWithDefaultsAndComputedRoutes) {
  auto r = profile_from_json(minimal_json().dump(), "my.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Profile& p = *r;
  EXPECT_EQ(p.gpu_count(), 2);
  EXPECT_TRUE(p.p2p);
  EXPECT_EQ(p.overheads, Overheads{});
  EXPECT_EQ(p.interference, Interference{});
  EXPECT_EQ(p.links[0].reverse_bandwidth_bytes_per_s, 2e10);  // symmetric by default
  ASSERT_EQ(p.routes.size(), 2u);
  EXPECT_EQ(p.route(0, 1).hops, (std::vector<Hop>{{0, true}, {1, false}}));
  EXPECT_EQ(p.route(1, 0).hops, (std::vector<Hop>{{1, true}, {0, false}}));
  EXPECT_DOUBLE_EQ(p.route_latency_s(0, 1), 2e-6);
  EXPECT_DOUBLE_EQ(p.route_bandwidth(0, 1), 2e10);
  EXPECT_EQ(p.hop_name(Hop{0, true}), "l0 gpu0->sw0");
  EXPECT_EQ(p.hop_name(Hop{0, false}), "l0 sw0->gpu0");
}

TEST(ProfileJson, EveryPresetRoundTripsExactly) {
  for (const std::string& name : preset_names()) {
    SCOPED_TRACE(name);
    auto p = make_preset(name);
    ASSERT_TRUE(p.ok()) << p.error().message;
    const std::string text = profile_to_json(*p);
    auto back = profile_from_json(text, name);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(*back, *p);
    EXPECT_EQ(profile_to_json(*back), text);  // canonical: byte-identical
  }
}

TEST(ProfileJson, DoublesSurviveTheRoundTrip) {
  auto base = make_preset("a6000x8");
  ASSERT_TRUE(base.ok());
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> exponent(3, 14);  // within the bandwidth limits
  std::uniform_real_distribution<double> mantissa(1, 10);
  for (int trial = 0; trial < 200; ++trial) {
    Profile p = *base;
    for (Link& l : p.links) {
      l.bandwidth_bytes_per_s = mantissa(rng) * std::pow(10.0, exponent(rng));
      l.reverse_bandwidth_bytes_per_s = std::nextafter(l.bandwidth_bytes_per_s, 1e300);
      l.latency_s = mantissa(rng) * 1e-7;
    }
    p.overheads.kernel_launch_s = 0.1 + 0.2;
    p.interference.gemm_slowdown_sm_copy = 1.0 + 1e-15;
    p.calibration.gemm_efficiency = 1.0 / 3.0;
    p.calibration.fused_gemm_overhead = 1.0 + 1.0 / 7.0;
    p.calibration.fused_slowdown_copy_engine = mantissa(rng);
    p.calibration.gemm.push_back(GemmSample{DType::fp16, 8192, 4096, 1024, mantissa(rng) * 1e-4});
    auto back = profile_from_json(profile_to_json(p));
    ASSERT_TRUE(back.ok()) << back.error().message;
    ASSERT_EQ(*back, p);
  }
}

TEST(ProfileJson, RoutesAreWrittenByNameAndMayBeGiven) {
  auto p = make_preset("a6000x4");
  ASSERT_TRUE(p.ok());
  json j = json::parse(profile_to_json(*p));
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["routes"][0]["src"], "gpu0");
  EXPECT_EQ(j["routes"][0]["dst"], "gpu1");
  EXPECT_EQ(j["routes"][0]["hops"][0], json::array({"nvlink-0-1", "fwd"}));
  EXPECT_EQ(j["links"][0]["a"], "gpu0");

  // A file may give some routes and omit the rest; a given route is kept even when it is not
  // the shortest (here 0->1 over PCIe instead of the NVLink).
  json partial = j;
  partial["routes"] =
      json::array({json{{"src", "gpu0"},
                        {"dst", "gpu1"},
                        {"hops", json::array({json::array({"pcie-gpu0", "fwd"}),
                                              json::array({"pcie-gpu1", "rev"})})}}});
  auto q = profile_from_json(partial.dump());
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q->route(0, 1).hops.size(), 2u);
  EXPECT_EQ(q->route(1, 0).hops.size(), 1u);
  EXPECT_EQ(q->routes.size(), 12u);
}

TEST(ProfileValidation, MalformedJsonNamesFileAndLine) {
  std::string text = "{\n  \"version\": 1,\n  \"name\": \"x\",\n  \"devices\": [,]\n}";
  auto r = profile_from_json(text, "my.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("my.json: line 4: malformed JSON: ", 0), 0u)
      << r.error().message;

  auto overflow = profile_from_json(R"({"version": 1e999})", "my.json");
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.error().message.find("my.json: malformed JSON: number overflow"),
            std::string::npos)
      << overflow.error().message;

  auto empty = profile_from_json("", "e.json");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("e.json: line 1: malformed JSON"), std::string::npos);

  std::string deep(100000, '[');
  auto nested = profile_from_json(deep, "deep.json");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message.find("nested deeper"), std::string::npos);
}

TEST(ProfileValidation, ErrorsNameTheField) {
  struct Case {
    std::function<void(json&)> mutate;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["links"][1]["bandwidth_bytes_per_s"] = -5; },
       "my.json: links[1].bandwidth_bytes_per_s: must be positive, got -5"},
      {[](json& j) { j["links"][0]["reverse_bandwidth_bytes_per_s"] = 0; },
       "my.json: links[0].reverse_bandwidth_bytes_per_s: must be positive, got 0"},
      {[](json& j) { j["links"][0]["latency_s"] = -1e-6; },
       "my.json: links[0].latency_s: must be >= 0, got -1e-06"},
      {[](json& j) { j["links"][1]["b"] = "sw9"; }, "my.json: links[1].b: unknown node 'sw9'"},
      {[](json& j) { j["links"][1]["b"] = "gpu1"; },
       "my.json: links[1].b: link connects node 'gpu1' to itself"},
      {[](json& j) { j["links"][0].erase("bandwidth_bytes_per_s"); },
       "my.json: links[0].bandwidth_bytes_per_s: missing field"},
      {[](json& j) { j["links"][0]["bandwidth_bytes_per_s"] = "fast"; },
       "my.json: links[0].bandwidth_bytes_per_s: wrong type: expected a number, got string"},
      {[](json& j) { j["links"][0]["kind"] = "ethernet"; },
       "my.json: links[0].kind: unknown link kind 'ethernet'"},
      {[](json& j) { j["links"][1]["name"] = "l0"; },
       "my.json: links[1].name: duplicate link name 'l0'"},
      {[](json& j) { j["links"][0]["shared"] = 1; },
       "my.json: links[0].shared: wrong type: expected true or false, got integer"},
      {[](json& j) { j["links"][0]["bandwith_bytes_per_s"] = 1; },
       "my.json: links[0].bandwith_bytes_per_s: unknown field"},
      {[](json& j) { j["nodes"][1]["name"] = "gpu0"; },
       "my.json: nodes[1].name: duplicate node name 'gpu0'"},
      {[](json& j) { j["nodes"][1]["name"] = 7; },
       "my.json: nodes[1].name: wrong type: expected a string, got integer"},
      {[](json& j) { j["nodes"][2]["kind"] = "router"; },
       "my.json: nodes[2].kind: unknown node kind 'router'"},
      {[](json& j) { j["nodes"][0].erase("device"); }, "my.json: nodes[0].device: missing field"},
      {[](json& j) { j["nodes"][0]["device"] = "tpu"; },
       "my.json: nodes[0].device: unknown device 'tpu'"},
      {[](json& j) { j["nodes"][2]["device"] = "dev"; },
       "my.json: nodes[2].device: only GPU nodes have a device"},
      {[](json& j) {
         j["nodes"] = json::array({json{{"name", "s"}, {"kind", "pcie_switch"}}});
         j["links"] = json::array();
       },
       "my.json: nodes: the machine has no GPU"},
      {[](json& j) { j["devices"][0]["sm_count"] = 0; },
       "my.json: devices[0].sm_count: must be positive, got 0"},
      {[](json& j) { j["devices"][0]["sm_count"] = 1.5; },
       "my.json: devices[0].sm_count: wrong type: expected an integer, got number"},
      {[](json& j) { j["devices"][0]["sm_count"] = 1e10; },
       "my.json: devices[0].sm_count: wrong type: expected an integer, got number"},
      {[](json& j) { j["devices"][0]["sm_count"] = 10000000000LL; },
       "my.json: devices[0].sm_count: integer out of range, got 10000000000"},
      {[](json& j) { j["devices"][0]["peak_flops"]["fp4"] = 1; },
       "my.json: devices[0].peak_flops.fp4: unknown dtype"},
      {[](json& j) { j["devices"][0]["peak_flops"]["bf16"] = -1; },
       "my.json: devices[0].peak_flops.bf16: must be positive, got -1"},
      {[](json& j) { j["devices"][0]["peak_flops"] = json::object(); },
       "my.json: devices[0].peak_flops: must list at least one dtype"},
      {[](json& j) { j["devices"][0]["memory_bytes"] = 0; },
       "my.json: devices[0].memory_bytes: must be positive, got 0"},
      {[](json& j) { j["devices"][0]["copy_engines"] = 0; },
       "my.json: devices[0].copy_engines: must be >= 1, got 0"},
      {[](json& j) { j["devices"].push_back(j["devices"][0]); },
       "my.json: devices[1].name: duplicate device name 'dev'"},
      {[](json& j) { j["version"] = 2; },
       "my.json: version: unsupported profile format version 2 (this build reads version 1)"},
      {[](json& j) { j.erase("version"); }, "my.json: version: missing field"},
      {[](json& j) { j.erase("name"); }, "my.json: name: missing field"},
      {[](json& j) { j["name"] = ""; }, "my.json: name: must not be empty"},
      {[](json& j) { j.erase("nodes"); }, "my.json: nodes: missing field"},
      {[](json& j) { j["nodes"] = json::object(); },
       "my.json: nodes: wrong type: expected an array, got object"},
      {[](json& j) { j["colour"] = "red"; }, "my.json: colour: unknown field"},
      {[](json& j) { j["p2p"] = "yes"; }, "my.json: p2p: wrong type: expected true or false"},
      {[](json& j) {
         j["overheads"] = json{{"kernel_launch_s", -1}};
       },
       "my.json: overheads.kernel_launch_s: must be >= 0, got -1"},
      {[](json& j) {
         j["overheads"] = json{{"launch", 1}};
       },
       "my.json: overheads.launch: unknown field"},
      {[](json& j) {
         j["interference"] = json{{"gemm_slowdown_sm_copy", 0.9}};
       },
       "my.json: interference.gemm_slowdown_sm_copy: must be >= 1, got 0.9"},
      {[](json& j) {
         j["calibration"] = json{{"gemm_efficiency", 1.5}};
       },
       "my.json: calibration.gemm_efficiency: must be in (0, 1], got 1.5"},
      {[](json& j) {
         j["calibration"] = json{{"fused_gemm_overhead", 0}};
       },
       "my.json: calibration.fused_gemm_overhead: must be positive, got 0"},
      {[](json& j) {
         j["calibration"] = json{{"fused_gemm_overhead", 1000}};
       },
       "my.json: calibration.fused_gemm_overhead: must be in [0.01, 100], got 1000"},
      {[](json& j) {
         j["calibration"] = json{{"fused_slowdown_copy_engine", 0.5}};
       },
       "my.json: calibration.fused_slowdown_copy_engine: must be >= 1, got 0.5"},
      {[](json& j) {
         j["calibration"] = json{{"fused_slowdown_copy_engine", "fast"}};
       },
       "my.json: calibration.fused_slowdown_copy_engine: wrong type: expected a number, got string"},
      {[](json& j) {
         j["calibration"] = json{{"copy_bandwidth_bytes_per_s", 0}};
       },
       "my.json: calibration.copy_bandwidth_bytes_per_s: must be positive, got 0"},
      {[](json& j) {
         j["calibration"] = json{
             {"gemm", json::array({json{
                          {"dtype", "bf16"}, {"m", 0}, {"n", 1}, {"k", 1}, {"time_s", 1e-3}}})}};
       },
       "my.json: calibration.gemm[0].m: must be positive, got 0"},
      {[](json& j) {
         j["calibration"] = json{
             {"gemm", json::array({json{
                          {"dtype", "int4"}, {"m", 1}, {"n", 1}, {"k", 1}, {"time_s", 1e-3}}})}};
       },
       "my.json: calibration.gemm[0].dtype: unknown dtype 'int4'"},
      {[](json& j) { j["notes"] = json::array({1}); },
       "my.json: notes[0]: wrong type: expected a string, got integer"},
      {[](json& j) { j["links"].erase(1); }, "my.json: route gpu0->gpu1: no path"},
      {[](json& j) { j["p2p"] = false; },
       "my.json: p2p is false (traffic staged through host memory) but the topology has no "
       "host_memory node"},
      // Routes given in the file.
      {[](json& j) {
         j["routes"] =
             json::array({json{{"src", "gpu0"}, {"dst", "sw0"}, {"hops", json::array()}}});
       },
       "my.json: routes[0].dst: 'sw0' is not a GPU node"},
      {[](json& j) {
         j["routes"] = json::array({json{{"src", "gpu0"},
                                         {"dst", "gpu1"},
                                         {"hops", json::array({json::array({"l9", "fwd"})})}}});
       },
       "my.json: routes[0].hops[0]: unknown link 'l9'"},
      {[](json& j) {
         j["routes"] = json::array({json{{"src", "gpu0"},
                                         {"dst", "gpu1"},
                                         {"hops", json::array({json::array({"l0", "up"})})}}});
       },
       "my.json: routes[0].hops[0]: direction must be \"fwd\" or \"rev\", got 'up'"},
      {[](json& j) {
         j["routes"] =
             json::array({json{{"src", "gpu0"}, {"dst", "gpu1"}, {"hops", json::array({"l0"})}}});
       },
       "my.json: routes[0].hops[0]: expected [\"link-name\", \"fwd\" or \"rev\"]"},
      {[](json& j) {
         j["routes"] = json::array({json{{"src", "gpu0"},
                                         {"dst", "gpu1"},
                                         {"hops", json::array({json::array({"l0", "fwd"})})}}});
       },
       "my.json: routes[0] (gpu0->gpu1): ends at 'sw0', not at 'gpu1'"},
      {[](json& j) {
         j["routes"] = json::array({json{{"src", "gpu0"},
                                         {"dst", "gpu1"},
                                         {"hops", json::array({json::array({"l1", "fwd"})})}}});
       },
       "my.json: routes[0] (gpu0->gpu1): hops[0]: link 'l1' leaves from 'gpu1' but the path is at "
       "'gpu0'"},
      {[](json& j) {
         j["routes"] =
             json::array({json{{"src", "gpu0"}, {"dst", "gpu1"}, {"hops", json::array()}}});
       },
       "my.json: routes[0] (gpu0->gpu1): hops: empty"},
      {[](json& j) {
         json r{{"src", "gpu0"},
                {"dst", "gpu1"},
                {"hops", json::array({json::array({"l0", "fwd"}), json::array({"l1", "rev"})})}};
         j["routes"] = json::array({r, r});
       },
       "my.json: routes[1]: route gpu0->gpu1 appears twice (first at routes[0])"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    json j = minimal_json();
    cases[i].mutate(j);
    const std::string err = load_error(j);
    EXPECT_EQ(err.rfind(cases[i].expected, 0), 0u)
        << "case " << i << "\n  expected prefix: " << cases[i].expected << "\n  got: " << err;
  }
}

TEST(ProfileValidation, RejectsAbsurdSizes) {
  json j = minimal_json();
  for (int i = 0; i < 4100; ++i)
    j["nodes"].push_back(json{{"name", "n" + std::to_string(i)}, {"kind", "nic"}});
  EXPECT_EQ(load_error(j).rfind("my.json: nodes: 4103 nodes is more than the limit of 4096", 0), 0u)
      << load_error(j);
}

TEST(ProfileValidation, RouteThroughAGpuIsRejected) {
  // gpu0 - gpu1 - gpu2 in a chain: gpu0 cannot reach gpu2 without relaying through gpu1.
  Graph g(3);
  g.link("gpu0", "gpu1", 1e10, LinkKind::nvlink);
  g.link("gpu1", "gpu2", 1e10, LinkKind::nvlink);
  Status s = compute_missing_routes(g.p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "route gpu0->gpu2: no path");

  g.p.routes.clear();
  g.p.routes.push_back(Route{0, 1, {Hop{0, true}}});
  g.p.routes.push_back(Route{0, 2, {Hop{0, true}, Hop{1, true}}});
  Status v = validate(g.p);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.error().message, "route gpu0->gpu2: hops[0]: passes through GPU 'gpu1'");
}

TEST(ProfileValidation, InMemoryRouteTableChecks) {
  auto base = make_preset("a6000x4");
  ASSERT_TRUE(base.ok());
  EXPECT_TRUE(validate(*base).ok());

  Profile missing = *base;
  missing.routes.erase(missing.routes.begin() + 3);
  ASSERT_FALSE(validate(missing).ok());
  EXPECT_EQ(validate(missing).error().message, "route gpu1->gpu0: missing");

  Profile unsorted = *base;
  std::swap(unsorted.routes[0], unsorted.routes[1]);
  ASSERT_FALSE(validate(unsorted).ok());
  EXPECT_EQ(validate(unsorted).error().message, "routes[1]: routes must be sorted by (src, dst)");

  Profile bad_index = *base;
  bad_index.routes[0].dst = 9;
  EXPECT_EQ(validate(bad_index).error().message,
            "routes[0].dst: GPU ordinal 9 out of range (0..3)");

  Profile bad_link = *base;
  bad_link.links[0].a = 99;
  EXPECT_EQ(validate(bad_link).error().message.rfind("links[0].a: node index 99 out of range", 0),
            0u);

  Profile nan = *base;
  nan.links[2].bandwidth_bytes_per_s = std::nan("");
  EXPECT_EQ(validate(nan).error().message,
            "links[2].bandwidth_bytes_per_s: must be positive, got nan");
  Profile inf = *base;
  inf.links[2].latency_s = INFINITY;
  EXPECT_EQ(validate(inf).error().message, "links[2].latency_s: must be >= 0, got inf");
}

TEST(RouteComputation, FewestHopsThenWidestBottleneck) {
  // gpu0 and gpu1 meet at a narrow switch A and a wide switch B (both 2 hops), and over a
  // 3-hop path through C-D that is wider still: the 2-hop wide path wins.
  Graph g(2);
  g.add("A", NodeKind::pcie_switch);
  g.add("B", NodeKind::pcie_switch);
  g.add("C", NodeKind::pcie_switch);
  g.add("D", NodeKind::pcie_switch);
  g.link("gpu0", "A", 10e9);
  g.link("A", "gpu1", 10e9);
  g.link("gpu0", "B", 30e9);
  g.link("B", "gpu1", 20e9);
  g.link("gpu0", "C", 90e9);
  g.link("C", "D", 90e9);
  g.link("D", "gpu1", 90e9);
  ASSERT_TRUE(compute_missing_routes(g.p).ok());
  ASSERT_TRUE(validate(g.p).ok()) << validate(g.p).error().message;
  EXPECT_EQ(g.route_links(0, 1), (std::vector<std::string>{"gpu0-B", "B-gpu1"}));
  EXPECT_EQ(g.route_links(1, 0), (std::vector<std::string>{"B-gpu1", "gpu0-B"}));
  EXPECT_DOUBLE_EQ(g.p.route_bandwidth(0, 1), 20e9);
  EXPECT_FALSE(g.p.route(1, 0).hops[0].forward);
}

TEST(RouteComputation, TiesGoToTheLowestNodeIndex) {
  Graph g(2);
  g.add("A", NodeKind::pcie_switch);
  g.add("B", NodeKind::pcie_switch);
  g.link("gpu0", "B", 10e9);
  g.link("B", "gpu1", 10e9);
  g.link("gpu0", "A", 10e9);
  g.link("A", "gpu1", 10e9);
  Profile copy = g.p;
  ASSERT_TRUE(compute_missing_routes(g.p).ok());
  ASSERT_TRUE(compute_missing_routes(copy).ok());
  EXPECT_EQ(g.p.routes, copy.routes);  // deterministic
  // A has the lower node index, though its links come later.
  EXPECT_EQ(g.route_links(0, 1), (std::vector<std::string>{"gpu0-A", "A-gpu1"}));
}

TEST(RouteComputation, AsymmetricLinksUseTheDirection) {
  Graph g(2);
  g.add("A", NodeKind::pcie_switch);
  g.add("B", NodeKind::pcie_switch);
  g.link("gpu0", "A", 10e9);
  g.link("A", "gpu1", 10e9);
  g.link("gpu0", "B", 10e9);
  g.link("B", "gpu1", 10e9);
  // Via A is fast 0->1 only, via B fast 1->0 only.
  g.p.links[0].bandwidth_bytes_per_s = 50e9;
  g.p.links[1].bandwidth_bytes_per_s = 50e9;
  g.p.links[2].reverse_bandwidth_bytes_per_s = 50e9;
  g.p.links[3].reverse_bandwidth_bytes_per_s = 50e9;
  ASSERT_TRUE(compute_missing_routes(g.p).ok());
  EXPECT_EQ(g.route_links(0, 1), (std::vector<std::string>{"gpu0-A", "A-gpu1"}));
  EXPECT_EQ(g.route_links(1, 0), (std::vector<std::string>{"B-gpu1", "gpu0-B"}));
  EXPECT_DOUBLE_EQ(g.p.route_bandwidth(1, 0), 50e9);
}

TEST(RouteComputation, NoP2pGoesThroughHostMemory) {
  // gpu0, gpu1 on switch sw, sw under root complex rc, host memory behind rc.
  Graph g(2);
  g.add("sw", NodeKind::pcie_switch);
  g.add("rc", NodeKind::root_complex);
  g.add("mem", NodeKind::host_memory);
  g.link("gpu0", "sw", 20e9);
  g.link("gpu1", "sw", 20e9);
  g.link("sw", "rc", 20e9);
  g.link("rc", "mem", 100e9, LinkKind::memory);
  g.p.p2p = false;
  ASSERT_TRUE(compute_missing_routes(g.p).ok());
  ASSERT_TRUE(validate(g.p).ok()) << validate(g.p).error().message;
  EXPECT_EQ(g.route_links(0, 1),
            (std::vector<std::string>{"gpu0-sw", "sw-rc", "rc-mem", "rc-mem", "sw-rc", "gpu1-sw"}));
  const Route& r = g.p.route(0, 1);
  EXPECT_TRUE(r.hops[2].forward);
  EXPECT_FALSE(r.hops[3].forward);

  // With p2p the same graph routes through the switch directly.
  g.p.p2p = true;
  g.p.routes.clear();
  ASSERT_TRUE(compute_missing_routes(g.p).ok());
  EXPECT_EQ(g.route_links(0, 1), (std::vector<std::string>{"gpu0-sw", "gpu1-sw"}));

  // A route that skips host memory is invalid when p2p is off.
  g.p.p2p = false;
  EXPECT_EQ(validate(g.p).error().message,
            "route gpu0->gpu1: p2p is false but the route does not pass through host memory");
}

// NVLink-bridged pairs on a machine with PCIe peer-to-peer off: the bridged pairs route over the
// bridge, every other pair through host memory.
TEST(RouteComputation, P2pPairsRouteDirectlyAndTheRestThroughHostMemory) {
  const std::string text = R"({
    "version": 1, "name": "pairs", "p2p": false, "p2p_pairs": [["gpu2", "gpu3"], ["gpu0", "gpu1"]],
    "devices": [{"name": "d", "sm_count": 4, "peak_flops": {"bf16": 1e12},
                 "memory_bandwidth_bytes_per_s": 1e11, "memory_bytes": 1e9, "copy_engines": 1}],
    "nodes": [{"name": "gpu0", "kind": "gpu", "device": "d"}, {"name": "gpu1", "kind": "gpu", "device": "d"},
              {"name": "gpu2", "kind": "gpu", "device": "d"}, {"name": "gpu3", "kind": "gpu", "device": "d"},
              {"name": "rc", "kind": "root_complex"}, {"name": "mem", "kind": "host_memory"}],
    "links": [{"name": "p0", "kind": "pcie", "a": "gpu0", "b": "rc", "bandwidth_bytes_per_s": 2e10},
              {"name": "p1", "kind": "pcie", "a": "gpu1", "b": "rc", "bandwidth_bytes_per_s": 2e10},
              {"name": "p2", "kind": "pcie", "a": "gpu2", "b": "rc", "bandwidth_bytes_per_s": 2e10},
              {"name": "p3", "kind": "pcie", "a": "gpu3", "b": "rc", "bandwidth_bytes_per_s": 2e10},
              {"name": "mem", "kind": "memory", "a": "rc", "b": "mem", "bandwidth_bytes_per_s": 1e11},
              {"name": "nv01", "kind": "nvlink", "a": "gpu0", "b": "gpu1", "bandwidth_bytes_per_s": 5e10},
              {"name": "nv23", "kind": "nvlink", "a": "gpu2", "b": "gpu3", "bandwidth_bytes_per_s": 5e10}]
  })";
  const Result<Profile> p = profile_from_json(text, "pairs.json");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->p2p_pairs, (std::vector<std::pair<int, int>>{{0, 1}, {2, 3}}));
  EXPECT_TRUE(p->peer_access(1, 0));
  EXPECT_FALSE(p->peer_access(0, 2));
  auto links = [&](int s, int d) {
    std::vector<std::string> out;
    for (const Hop& h : p->route(s, d).hops) out.push_back(p->links[h.link].name);
    return out;
  };
  EXPECT_EQ(links(0, 1), (std::vector<std::string>{"nv01"}));
  EXPECT_EQ(links(3, 2), (std::vector<std::string>{"nv23"}));
  EXPECT_EQ(links(0, 2), (std::vector<std::string>{"p0", "mem", "mem", "p2"}));
  // Saved with the pairs and loaded back identical.
  const Result<Profile> again = profile_from_json(profile_to_json(*p), "saved.json");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, *p);
  // Errors name the field.
  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    const Result<Profile> r = profile_from_json(t, "pairs.json");
    return r.ok() ? std::string("loaded") : r.error().message;
  };
  EXPECT_EQ(error_of(R"(["gpu2", "gpu3"])", R"(["gpu2", "gpu9"])"),
            "pairs.json: p2p_pairs[0][1]: unknown GPU 'gpu9'");
  EXPECT_EQ(error_of(R"(["gpu2", "gpu3"])", R"(["gpu1", "gpu0"])"),
            "pairs.json: p2p_pairs: GPU pair gpu0-gpu1 appears twice");
  EXPECT_EQ(error_of(R"("p2p": false)", R"("p2p": true)"),
            "pairs.json: p2p_pairs: listed, but p2p is true (every pair has peer access already)");
  // Profiles without the field load as before and save without it.
  EXPECT_EQ(profile_to_json(*hardware::make_preset("rtx4090x8")).find("p2p_pairs"), std::string::npos);
}

TEST(RouteComputation, ExistingRoutesAreKeptAndSorted) {
  Graph g(3);
  g.add("sw", NodeKind::pcie_switch);
  g.link("gpu0", "sw", 1e9);
  g.link("gpu1", "sw", 1e9);
  g.link("gpu2", "sw", 1e9);
  g.p.routes.push_back(Route{2, 0, {Hop{2, true}, Hop{0, false}}});
  ASSERT_TRUE(compute_missing_routes(g.p).ok());
  ASSERT_EQ(g.p.routes.size(), 6u);
  EXPECT_TRUE(validate(g.p).ok());
  for (int s = 0; s < 3; ++s)
    for (int d = 0; d < 3; ++d)
      if (s != d) {
        EXPECT_EQ(g.p.route(s, d).src, s);
      }
}

TEST(ProfileAccessors, RouteIsIndexedBySrcAndDst) {
  auto p = make_preset("a6000x8");
  ASSERT_TRUE(p.ok());
  for (int s = 0; s < 8; ++s)
    for (int d = 0; d < 8; ++d) {
      if (s == d) continue;
      EXPECT_EQ(p->route(s, d).src, s);
      EXPECT_EQ(p->route(s, d).dst, d);
    }
  EXPECT_THROW((void)p->route(3, 3), InternalError);
  EXPECT_THROW((void)p->route(0, 8), InternalError);
  EXPECT_EQ(p->gpu_node(5), 5);
  EXPECT_EQ(p->gpu_device(7).name, "RTX A6000");
}

TEST(ProfileAccessors, GpuNodeFindsGpusAfterOtherNodes) {
  Graph g(0);
  g.add("sw", NodeKind::pcie_switch);
  g.add("a", NodeKind::gpu, "dev");
  g.add("b", NodeKind::gpu, "dev");
  EXPECT_EQ(g.p.gpu_count(), 2);
  EXPECT_EQ(g.p.gpu_node(0), 1);
  EXPECT_EQ(g.p.gpu_node(1), 2);
  EXPECT_THROW((void)g.p.gpu_node(2), InternalError);
}

TEST(EnumNames, RoundTrip) {
  for (NodeKind k :
       {NodeKind::gpu, NodeKind::pcie_switch, NodeKind::root_complex, NodeKind::cpu_socket,
        NodeKind::host_memory, NodeKind::nvswitch, NodeKind::nic, NodeKind::network})
    EXPECT_EQ(parse_node_kind(to_string(k)), k);
  for (LinkKind k : {LinkKind::nvlink, LinkKind::pcie, LinkKind::inter_socket, LinkKind::memory,
                     LinkKind::nvswitch, LinkKind::network})
    EXPECT_EQ(parse_link_kind(to_string(k)), k);
  EXPECT_FALSE(parse_node_kind("GPU"));
  EXPECT_FALSE(parse_link_kind(""));
}

class ProfileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("compass-test-profile-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ProfileFiles, SaveLoadAndRefuseOverwrite) {
  auto p = make_preset("a6000x8");
  ASSERT_TRUE(p.ok());
  const std::string path = (dir_ / "m.json").string();
  ASSERT_TRUE(save_profile_file(*p, path, false).ok());
  auto back = load_profile_file(path);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, *p);

  Status again = save_profile_file(*p, path, false);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().message.rfind(path + ": file exists", 0), 0u);
  EXPECT_TRUE(save_profile_file(*p, path, true).ok());

  Profile invalid = *p;
  invalid.links[0].bandwidth_bytes_per_s = -1;
  Status bad = save_profile_file(invalid, (dir_ / "bad.json").string(), false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("links[0].bandwidth_bytes_per_s"), std::string::npos);
}

TEST_F(ProfileFiles, LoadErrorsNameTheFile) {
  auto missing = load_profile_file((dir_ / "nope.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message, (dir_ / "nope.json").string() + ": no such file");

  auto dir = load_profile_file(dir_.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().message, dir_.string() + ": not a regular file");

  const std::string path = (dir_ / "bad.json").string();
  std::ofstream(path) << "{\n\"version\": 1,\n}\n";
  auto bad = load_profile_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind(path + ": line 3: malformed JSON", 0), 0u)
      << bad.error().message;
}

TEST_F(ProfileFiles, ResolvePresetFileOrUnknown) {
  auto preset = resolve_profile("a6000x4");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->name, "a6000x4");

  auto p = make_preset("h100x8");
  ASSERT_TRUE(p.ok());
  p->name = "mine";
  const std::string path = (dir_ / "mine.json").string();
  ASSERT_TRUE(save_profile_file(*p, path, false).ok());
  auto file = resolve_profile(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(file->name, "mine");

  auto unknown = resolve_profile("a9000x8");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message,
            "unknown profile 'a9000x8': not a preset (a6000x8, a6000x4, rtx4090x8, a100x8, "
            "h100x8, h200x1) and no such file");
}

}  // namespace
}  // namespace compass::hardware
