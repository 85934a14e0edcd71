// compass profile check / diff at the library level: every error listed with its JSON path,
// routes named by their index in the file, and differences named by path.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_diff.hpp"
#include "compass/hardware/profile_io.hpp"

namespace compass::hardware {
namespace {

using json = nlohmann::json;

json two_gpus() {
  return json::parse(R"({
    "version": 1, "name": "two",
    "devices": [{"name": "dev", "sm_count": 4, "peak_flops": {"bf16": 1e12},
                 "memory_bandwidth_bytes_per_s": 1e11, "memory_bytes": 1e9, "copy_engines": 1}],
    "nodes": [{"name": "gpu0", "kind": "gpu", "device": "dev"},
              {"name": "gpu1", "kind": "gpu", "device": "dev"},
              {"name": "sw0", "kind": "pcie_switch"}],
    "links": [{"name": "l0", "kind": "pcie", "a": "gpu0", "b": "sw0", "bandwidth_bytes_per_s": 2e10},
              {"name": "l1", "kind": "pcie", "a": "gpu1", "b": "sw0", "bandwidth_bytes_per_s": 2e10}]
  })");
}

std::vector<std::string> messages(const json& j) {
  std::vector<std::string> out;
  for (const Error& e : check_profile_json(j.dump(), "f.json")) out.push_back(e.message);
  return out;
}

TEST(ProfileCheck, ValidFileHasNoErrors) {
  EXPECT_TRUE(messages(two_gpus()).empty());
  for (const std::string& name : preset_names()) {
    auto p = make_preset(name);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(check_profile_json(profile_to_json(*p), name).empty()) << name;
  }
}

TEST(ProfileCheck, ListsEveryErrorWithItsPath) {
  json j = two_gpus();
  j["devices"][0]["sm_count"] = -1;
  j["links"][0]["bandwidth_bytes_per_s"] = -5;
  j["links"][1]["latency_s"] = "slow";
  j["nodes"][2]["kind"] = "hub";
  j["colour"] = "red";
  j["overheads"] = json{{"kernel_launch_s", -1}};
  const auto m = messages(j);
  // nodes[2] fails to parse, so l0 and l1 (which name it) are reported as referring to an
  // unknown node; the device and overheads errors come from the validation pass.
  EXPECT_EQ(m, (std::vector<std::string>{
                   "f.json: nodes[2].kind: unknown node kind 'hub' (gpu, pcie_switch, "
                   "root_complex, cpu_socket, host_memory, nvswitch, nic, network)",
                   "f.json: links[0].b: unknown node 'sw0'",
                   "f.json: links[1].b: unknown node 'sw0'",
                   "f.json: colour: unknown field",
                   "f.json: devices[0].sm_count: must be positive, got -1",
                   "f.json: overheads.kernel_launch_s: must be >= 0, got -1",
               }));
}

TEST(ProfileCheck, IndependentElementErrorsAreAllListed) {
  json j = two_gpus();
  j["links"][0]["bandwidth_bytes_per_s"] = -5;
  j["links"][1]["latency_s"] = -1;
  j["interference"] = json{{"gemm_slowdown_sm_copy", 0.5}, {"comm_slowdown_beside_gemm", 0.9}};
  EXPECT_EQ(messages(j), (std::vector<std::string>{
                             "f.json: links[0].bandwidth_bytes_per_s: must be positive, got -5",
                             "f.json: links[1].latency_s: must be >= 0, got -1",
                             "f.json: interference.gemm_slowdown_sm_copy: must be >= 1, got 0.5",
                             "f.json: interference.comm_slowdown_beside_gemm: must be >= 1, got 0.9",
                         }));
}

TEST(ProfileCheck, RouteErrorsNameTheIndexInTheFile) {
  json j = two_gpus();
  // Given out of (src, dst) order: gpu1->gpu0 first, then a broken gpu0->gpu1.
  auto hop = [](const char* link, const char* dir) { return json::array({link, dir}); };
  j["routes"] = json::array(
      {json{{"src", "gpu1"}, {"dst", "gpu0"}, {"hops", json::array({hop("l1", "fwd"), hop("l0", "rev")})}},
       json{{"src", "gpu0"}, {"dst", "gpu1"}, {"hops", json::array({hop("l1", "fwd")})}}});
  EXPECT_EQ(messages(j),
            (std::vector<std::string>{"f.json: routes[1] (gpu0->gpu1): hops[0]: link 'l1' leaves "
                                      "from 'gpu1' but the path is at 'gpu0'"}));
  // Loading reports the same, first, error.
  auto r = profile_from_json(j.dump(), "f.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, messages(j)[0]);
}

TEST(ProfileCheck, MalformedJsonIsOneError) {
  const auto e = check_profile_json("{\"version\": 1,,}", "f.json");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].message.rfind("f.json: line 1: malformed JSON", 0), 0u) << e[0].message;
}

TEST(ProfileDiff, IdenticalProfilesHaveNoDifference) {
  for (const std::string& name : preset_names()) {
    auto p = make_preset(name);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(diff_profiles(*p, *p).empty()) << name;
  }
}

TEST(ProfileDiff, NamesDifferencesByPath) {
  auto a = make_preset("a6000x4");
  ASSERT_TRUE(a.ok());
  Profile b = *a;
  b.links[2].bandwidth_bytes_per_s = 1e9;
  b.notes.push_back("extra");
  b.overheads.kernel_launch_s = 7e-6;
  const auto d = diff_profiles(*a, b);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].path, "links[" + a->links[2].name + "].bandwidth_bytes_per_s");
  EXPECT_EQ(d[0].b, "1000000000.0");
  EXPECT_EQ(d[1].path, "overheads.kernel_launch_s");
  EXPECT_EQ(d[2].path, "notes[" + std::to_string(a->notes.size()) + "]");
  EXPECT_EQ(d[2].a, "(absent)");
  EXPECT_EQ(d[2].b, "\"extra\"");
}

TEST(ProfileDiff, DifferentMachinesListNodesPresentOnOneSide) {
  auto a = make_preset("a6000x4");
  auto b = make_preset("a6000x8");
  ASSERT_TRUE(a.ok() && b.ok());
  const auto d = diff_profiles(*a, *b);
  bool gpu7 = false;
  for (const auto& x : d)
    if (x.path == "nodes[gpu7]" && x.a == "(absent)") gpu7 = true;
  EXPECT_TRUE(gpu7);
}

}  // namespace
}  // namespace compass::hardware
