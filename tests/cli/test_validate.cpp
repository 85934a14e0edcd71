// compass calibrate --backend cpu and compass validate end to end on a tiny grid:
// structure and correctness of the results, never their timing.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../test_files.hpp"
#include "subprocess.hpp"

namespace compass::testing {
namespace {

TEST(Validate, CalibrateThenValidateSmallGrid) {
  TempDir dir;
  ProcessResult cal = compass_in(dir.path(), {"calibrate", "--backend", "cpu", "--quick", "--grid",
                                              "small", "--out", "cpu.json", "--progress", "lines"});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  // --progress lines: whole percents in order, ending at 100%.
  EXPECT_EQ(cal.err.find("compass: progress: calibrating "), 0u) << cal.err;
  EXPECT_NE(cal.err.find("compass: progress: calibrating 100%\n"), std::string::npos) << cal.err;
  EXPECT_NE(cal.out.find("wrote cpu.json"), std::string::npos) << cal.out;
  // The calibration is a Profile the other verbs load.
  ProcessResult topo = compass_in(dir.path(), {"topo", "--profile", "cpu.json"});
  EXPECT_EQ(topo.exit_code, 0) << topo.err;
  // Refuses to overwrite without --force.
  ProcessResult again = compass_in(dir.path(), {"calibrate", "--backend", "cpu", "--quick",
                                                "--grid", "small", "--out", "cpu.json"});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;

  ProcessResult val =
      compass_in(dir.path(), {"validate", "--backend", "cpu", "--calibration", "cpu.json",
                              "--links", "emulated:a6000x8", "--grid", "small", "--repeat", "1",
                              "--warmup", "0", "--csv", "v.csv", "--json", "v.json"});
  ASSERT_EQ(val.exit_code, 0) << val.err;
  EXPECT_NE(val.out.find("choice within 5% of the best"), std::string::npos) << val.out;
  const auto j = nlohmann::json::parse(read_file(dir.path() + "/v.json"));
  EXPECT_TRUE(j.at("outputs_ok").get<bool>());
  EXPECT_GT(j.at("link_scale").get<double>(), 0);
  ASSERT_EQ(j.at("configs").size(), 4u);
  for (const auto& c : j.at("configs")) {
    EXPECT_GE(c.at("regret").get<double>(), 0);
    EXPECT_GE(c.at("chosen_s").get<double>(), c.at("best_s").get<double>());
  }
  int chosen = 0, best = 0;
  for (const auto& p : j.at("points")) {
    EXPECT_GT(p.at("predicted_s").get<double>(), 0);
    EXPECT_GT(p.at("measured_s").get<double>(), 0);
    chosen += p.at("chosen").get<bool>();
    best += p.at("best").get<bool>();
  }
  EXPECT_EQ(chosen, 4);
  EXPECT_EQ(best, 4);
  const double within5 = j.at("choice_within_5pct").get<double>();
  EXPECT_GE(within5, j.at("choice_best").get<double>());
  EXPECT_LE(within5, 1.0);
  // One CSV row per point plus the header.
  const std::string csv = read_file(dir.path() + "/v.csv");
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')),
            j.at("points").size() + 1);

  // --plot reaches the plotting script as one argument, never through a shell: a name built to
  // break out of shell quoting runs nothing and is the name of the picture.
  const std::string hostile = "x';touch PWNED;'.png";
  ProcessResult plot =
      compass_in(dir.path(), {"validate", "--backend", "cpu", "--calibration", "cpu.json",
                              "--links", "emulated:a6000x8", "--grid", "small", "--repeat", "1",
                              "--warmup", "0", "--quiet", "--plot", hostile});
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/PWNED")) << plot.err;
  if (plot.exit_code == 0) EXPECT_TRUE(std::filesystem::exists(dir.path() + "/" + hostile));
  else EXPECT_NE(plot.err.find("--plot"), std::string::npos) << plot.err;
}

TEST(Validate, BadOptionsAreUsageErrors) {
  TempDir dir;
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"validate", "--calibration", "missing.json"},
           {"validate", "--calibration", "x.json", "--links", "a6000x8"},
           {"validate", "--calibration", "x.json", "--link-scale", "-1"},
           {"validate", "--calibration", "x.json", "--backend", "cuda"},
           {"run", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16", "--tp", "2", "--links",
            "nvlink"}}) {
    ProcessResult r = compass_in(dir.path(), args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << ": " << r.out;
    EXPECT_NE(r.err.find("compass: error:"), std::string::npos) << r.err;
  }
}

TEST(Validate, RunWithEmulatedLinksChecksOut) {
  TempDir dir;
  ProcessResult r = compass_in(
      dir.path(), {"run",          "--backend", "cpu",      "--op",    "gemm_rs",
                   "--m",          "128",       "--n",      "64",      "--k",
                   "64",           "--tp",      "2",        "--links", "emulated:a6000x8",
                   "--link-scale", "0.001",     "--repeat", "1",       "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("links: emulated:a6000x8"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace compass::testing
