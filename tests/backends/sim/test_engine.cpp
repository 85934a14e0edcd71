// The engine's execution rules (each resource serial, tasks in Schedule order, dependencies
// honoured) on generated schedules, and its simulated times against a golden file recorded with
// the previous engine (one SimGrid actor per resource), which the current one (no actors) must
// reproduce to 1e-12 relative.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "compass/backends/sim/simulator.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/schedule/generate.hpp"
#include "sim_fixtures.hpp"

namespace compass::backends::sim {
namespace {

using nlohmann::json;
using testing::ScheduleBuilder;

struct Case {
  std::string name;
  const hardware::Profile* profile = nullptr;
  schedule::Schedule schedule;
};

// Every strategy of three operator kinds at TP 2, 4, 8 on a6000x8 (GEMMs beside copies, so both
// interference rules act), every strategy of an all-gather GEMM over two 8-GPU NVSwitch nodes,
// and ring all-gathers over 2 and 8 such nodes.
const std::vector<Case>& cases() {
  static const hardware::Profile a6000 = *hardware::make_preset("a6000x8");
  static const hardware::Profile two_nodes = hardware::make_multinode_nvswitch(2, 8);
  static const hardware::Profile eight_nodes = hardware::make_multinode_nvswitch(8, 8);
  static const std::vector<Case> all = [] {
    std::vector<Case> out;
    auto add_all_strategies = [&out](const hardware::Profile& prof, workload::OpKind kind, int tp) {
      std::vector<int> gpus(tp);
      for (int g = 0; g < tp; ++g) gpus[g] = g;
      const auto plan = schedule::comm_plan_for(prof, gpus);
      EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
      if (!plan.ok()) return;
      const workload::OperatorSpec op{kind, 4096, 5120, 2560, tp, DType::bf16, ""};
      for (const schedule::Strategy& st : schedule::all_strategies(4)) {
        auto s = schedule::generate_for(prof, op, st, *plan);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
        if (!s.ok()) continue;
        out.push_back(Case{fmt::format("{} {} tp{} {}", prof.name, workload::to_string(kind), tp,
                                       schedule::to_string(st)),
                           &prof, std::move(*s)});
      }
    };
    for (workload::OpKind kind :
         {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
      for (int tp : {2, 4, 8}) add_all_strategies(a6000, kind, tp);
    add_all_strategies(two_nodes, workload::OpKind::ag_gemm, 16);
    out.push_back(Case{"ring all-gather 16 GPUs", &two_nodes, schedule::ring_allgather(16, 256, 2048)});
    out.push_back(Case{"ring all-gather 64 GPUs", &eight_nodes, schedule::ring_allgather(64, 256, 2048)});
    return out;
  }();
  return all;
}

// What the golden file keeps of one simulation: the totals and checksums of every task time.
json summary(const SimResult& r) {
  double sum_start = 0;
  double sum_end = 0;
  for (const TaskTime& t : r.tasks) {
    sum_start += t.start_s;
    sum_end += t.end_s;
  }
  json links = json::array();
  for (const LinkUse& l : r.busiest_links)
    links.push_back({{"name", l.name}, {"bytes", l.bytes}, {"busy_s", l.busy_s}});
  return {{"total_s", r.total_s},     {"exposed_comm_s", r.exposed_comm_s},
          {"sum_start_s", sum_start}, {"sum_end_s", sum_end},
          {"tasks", r.tasks.size()},  {"busiest_links", links}};
}

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)) + 1e-18;
}

// Golden: tests/backends/sim/golden/engine_times.json. It was recorded with the actor engine;
// COMPASS_UPDATE_GOLDEN=1 ./test_sim --gtest_filter=Engine.* rewrites it from the current one.
TEST(Engine, ReproducesTheActorEngineTimes) {
  const std::string path =
      std::string(COMPASS_SOURCE_DIR) + "/tests/backends/sim/golden/engine_times.json";
  json got = json::object();
  for (const Case& c : cases()) {
    auto r = simulate(*c.profile, c.schedule);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().message;
    got[c.name] = summary(*r);
  }
  const char* update = std::getenv("COMPASS_UPDATE_GOLDEN");
  if (update != nullptr && *update == '1') {
    std::ofstream(path) << got.dump(1) << "\n";
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "missing golden " << path;
  const json want = json::parse(f);
  ASSERT_EQ(want.size(), got.size())
      << "the case list changed (COMPASS_UPDATE_GOLDEN=1 rewrites it)";
  for (const auto& [name, w] : want.items()) {
    ASSERT_TRUE(got.contains(name)) << name;
    const json& g = got[name];
    for (const char* key : {"total_s", "exposed_comm_s", "sum_start_s", "sum_end_s"})
      EXPECT_TRUE(close(w[key].get<double>(), g[key].get<double>()))
          << name << " " << key << ": golden " << w[key].get<double>() << ", now "
          << g[key].get<double>();
    EXPECT_EQ(w["tasks"], g["tasks"]) << name;
    ASSERT_EQ(w["busiest_links"].size(), g["busiest_links"].size()) << name;
    for (std::size_t i = 0; i < w["busiest_links"].size(); ++i) {
      const json& wl = w["busiest_links"][i];
      const json& gl = g["busiest_links"][i];
      EXPECT_EQ(wl["name"], gl["name"]) << name;
      EXPECT_EQ(wl["bytes"], gl["bytes"]) << name;
      EXPECT_TRUE(close(wl["busy_s"].get<double>(), gl["busy_s"].get<double>()))
          << name << " " << wl["name"] << " busy_s: golden " << wl["busy_s"] << ", now "
          << gl["busy_s"];
    }
  }
}

// Each task starts after all its dependencies end; a resource runs its tasks one at a time in
// the order of Schedule::tasks.
void expect_execution_rules(const std::string& name, const schedule::Schedule& s,
                            const SimResult& r) {
  ASSERT_EQ(r.tasks.size(), s.tasks.size()) << name;
  std::map<std::tuple<int, int, int>, int> last_on_resource;
  for (const schedule::Task& t : s.tasks) {
    const TaskTime& tt = r.tasks[t.id];
    EXPECT_LE(tt.start_s, tt.end_s) << name << " task " << t.id;
    for (int d : t.deps)
      EXPECT_GE(tt.start_s, r.tasks[d].end_s)
          << name << ": task " << t.id << " started before dependency " << d << " ended";
    const auto key =
        std::make_tuple(t.resource.rank, static_cast<int>(t.resource.kind), t.resource.index);
    if (auto it = last_on_resource.find(key); it != last_on_resource.end()) {
      EXPECT_GE(tt.start_s, r.tasks[it->second].end_s)
          << name << ": task " << t.id << " overlaps task " << it->second << " on its resource";
    }
    last_on_resource[key] = t.id;
  }
}

TEST(Engine, GeneratedSchedulesFollowTheExecutionRules) {
  for (const Case& c : cases()) {
    auto r = simulate(*c.profile, c.schedule);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().message;
    expect_execution_rules(c.name, c.schedule, *r);
  }
}

// No link direction ever carries more than its bandwidth (SimGrid 3.32's lazy max-min update
// did, without the per-route first links engine.cpp adds: 1.25-1.375 x on NIC links of h100-2x8).
TEST(Engine, NoLinkCarriesMoreThanItsBandwidth) {
  SimOptions o;
  o.busiest_links = 1 << 20;  // every link direction a transfer uses
  for (const Case& c : cases()) {
    auto r = simulate(*c.profile, c.schedule, o);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.error().message;
    ASSERT_FALSE(r->busiest_links.empty()) << c.name;
    for (const LinkUse& l : r->busiest_links)
      for (const LinkSample& x : l.samples)
        ASSERT_LE(x.utilisation, 1.0 + 1e-9) << c.name << ": " << l.name << " at " << x.t_s << " s";
  }
}

// The second task of an engine is ready at once but waits for the first, which waits for a
// long transfer of the other rank.
TEST(Engine, AResourceRunsItsTasksInScheduleOrder) {
  hardware::Profile p = testing::star_profile(2, 10e9, 2e-6);
  ScheduleBuilder b(2, 512, 1024);
  const int long_transfer = b.transfer(1, 0, 512, 0, {}, 0);
  const int first = b.transfer(0, 1, 16, 0, {long_transfer}, 0);
  const int second = b.transfer(0, 1, 16, 1, {}, 0);
  auto r = simulate(p, b.s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_GE(r->tasks[first].start_s, r->tasks[long_transfer].end_s);
  EXPECT_GE(r->tasks[second].start_s, r->tasks[first].end_s);
  EXPECT_GT(r->tasks[second].start_s, 0.0);
  expect_execution_rules("order", b.s, *r);
}

// A simulation in this process (SimOptions::isolate = false) gives the same result as one in a
// forked child. Only the first in-process run of a process is clean (docs/simulator.md), so it
// runs inside a child of the test (a gtest death-test fork) and reports through its exit code.
TEST(Engine, InProcessRunMatchesForkedRun) {
  const Case& c = cases().front();
  auto forked = simulate(*c.profile, c.schedule);
  ASSERT_TRUE(forked.ok()) << forked.error().message;
  const SimResult want = *forked;
  EXPECT_EXIT(
      {
        SimOptions o;
        o.isolate = false;
        auto r = simulate(*c.profile, c.schedule, o);
        std::_Exit(r.ok() && *r == want ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace compass::backends::sim
