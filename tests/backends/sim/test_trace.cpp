// Trace output: valid Chrome trace-event JSON, and a golden trace of a small ring all-gather.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compass/backends/sim/simulator.hpp"
#include "sim_fixtures.hpp"

namespace compass::backends::sim {
namespace {

using nlohmann::json;
using testing::ScheduleBuilder;

schedule::Schedule small_ring(int p) {
  ScheduleBuilder b(p, 64, 256);
  std::vector<int> prev(p, -1);
  for (int s = 0; s + 1 < p; ++s) {
    std::vector<int> cur(p);
    for (int r = 0; r < p; ++r) {
      const int left = prev[(r - 1 + p) % p];
      const int chunk = ((r - s) % p + p) % p;
      cur[r] = b.transfer(r, (r + 1) % p, 64, chunk,
                          left >= 0 ? std::vector<int>{left} : std::vector<int>{}, 0, s,
                          fmt::format("r{} ag step{} chunk{} ring0", r, s, chunk));
    }
    prev = cur;
  }
  b.gemm(0, 64, 256, 256, {prev[p - 1]});
  return b.s;
}

// Checks the trace-event format: required fields and their types per phase, metadata naming
// every process and thread used, non-negative durations, ts monotone per track.
void expect_valid_trace(const std::string& text) {
  const json j = json::parse(text);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("traceEvents"));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<int, bool> process_named;
  std::map<std::pair<int, int>, bool> thread_named;
  std::map<std::pair<int, int>, double> last_ts;
  std::map<std::string, double> last_counter_ts;
  int slices = 0, counters = 0;
  for (const json& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e.dump();
    ASSERT_TRUE(e.contains("name") && e["name"].is_string()) << e.dump();
    ASSERT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e.dump();
    const std::string ph = e["ph"];
    const int pid = e["pid"];
    if (ph == "M") {
      ASSERT_TRUE(e.contains("args") && e["args"].is_object()) << e.dump();
      if (e["name"] == "process_name") {
        ASSERT_TRUE(e["args"]["name"].is_string());
        process_named[pid] = true;
      } else if (e["name"] == "thread_name") {
        ASSERT_TRUE(e["args"]["name"].is_string());
        ASSERT_TRUE(e["tid"].is_number_integer());
        thread_named[{pid, e["tid"].get<int>()}] = true;
      }
    } else if (ph == "X") {
      ++slices;
      ASSERT_TRUE(e.contains("tid") && e["tid"].is_number_integer()) << e.dump();
      ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e.dump();
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_GE(e["ts"].get<double>(), 0.0);
      const std::pair<int, int> track{pid, e["tid"].get<int>()};
      EXPECT_TRUE(process_named.count(pid)) << "process " << pid << " has no process_name";
      EXPECT_TRUE(thread_named.count(track)) << "track " << pid << "/" << track.second
                                             << " has no thread_name";
      if (last_ts.count(track)) {
        EXPECT_GE(e["ts"].get<double>(), last_ts[track]);
      }
      last_ts[track] = e["ts"].get<double>();
    } else if (ph == "C") {
      ++counters;
      ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e.dump();
      ASSERT_TRUE(e.contains("args") && e["args"].is_object() && !e["args"].empty()) << e.dump();
      for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << k;
      EXPECT_TRUE(process_named.count(pid));
      const std::string name = e["name"];
      if (last_counter_ts.count(name)) {
        EXPECT_GE(e["ts"].get<double>(), last_counter_ts[name]);
      }
      last_counter_ts[name] = e["ts"].get<double>();
    } else {
      ADD_FAILURE() << "unexpected phase " << ph;
    }
  }
  EXPECT_GT(slices, 0);
  EXPECT_GT(counters, 0);
}

TEST(Trace, IsValidTraceEventJson) {
  const hardware::Profile p = testing::ring_profile(4, 10e9, 2e-6);
  const schedule::Schedule s = small_ring(4);
  auto r = simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string text = trace_to_json(*r, s);
  expect_valid_trace(text);
  const json j = json::parse(text);
  int slices = 0;
  for (const json& e : j["traceEvents"])
    if (e["ph"] == "X") ++slices;
  EXPECT_EQ(slices, static_cast<int>(s.tasks.size()));
}

TEST(Trace, WriteRefusesToOverwrite) {
  const hardware::Profile p = testing::ring_profile(2, 10e9, 2e-6);
  const schedule::Schedule s = small_ring(2);
  auto r = simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("compass_trace_{}.json", ::getpid())).string();
  std::filesystem::remove(path);
  ASSERT_TRUE(write_trace(*r, s, path).ok());
  Status again = write_trace(*r, s, path);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("--force"), std::string::npos);
  EXPECT_TRUE(write_trace(*r, s, path, true).ok());
  std::filesystem::remove(path);
}

// Golden: the trace and summary of a 4-rank ring all-gather plus a GEMM. Regenerate with
// COMPASS_UPDATE_GOLDEN=1 ./test_sim --gtest_filter=Trace.*
TEST(Trace, MatchesGolden) {
  const hardware::Profile p = testing::ring_profile(4, 10e9, 2e-6);
  const schedule::Schedule s = small_ring(4);
  auto r = simulate(p, s);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string dir = std::string(COMPASS_SOURCE_DIR) + "/tests/backends/sim/golden/";
  const std::map<std::string, std::string> outputs = {
      {"ring4_allgather.trace.json", json::parse(trace_to_json(*r, s)).dump(1) + "\n"},
      {"ring4_allgather.summary.json", sim_result_to_json(*r, s) + "\n"}};
  const char* update = std::getenv("COMPASS_UPDATE_GOLDEN");
  for (const auto& [name, text] : outputs) {
    if (update != nullptr && *update == '1') {
      std::ofstream(dir + name) << text;
      continue;
    }
    std::ifstream f(dir + name);
    ASSERT_TRUE(f.good()) << "missing golden " << dir + name;
    std::stringstream want;
    want << f.rdbuf();
    EXPECT_EQ(text, want.str()) << name << " differs (COMPASS_UPDATE_GOLDEN=1 rewrites it)";
  }
}

}  // namespace
}  // namespace compass::backends::sim
