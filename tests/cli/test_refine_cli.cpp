// compass plan --refine sim: the JSON names what was simulated, the table says what it cost,
// and bad refine options are one-line errors.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "subprocess.hpp"

namespace compass::testing {
namespace {

ProcessResult compass(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {compass_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  TempDir dir;
  return run_process(argv, dir.path(), 600);
}

TEST(PlanRefine, JsonListsTheSimulatedCandidates) {
  const ProcessResult r =
      compass({"plan", "--profile", "h100x8", "--refine", "sim", "--refine-margin", "0.5",
               "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("refine"));
  const nlohmann::json& f = j["refine"];
  EXPECT_EQ(f["method"], "sim");
  EXPECT_DOUBLE_EQ(f["margin"].get<double>(), 0.5);
  ASSERT_EQ(f["operators"].size(), j["ops"].size());
  int simulated = 0;
  for (std::size_t i = 0; i < f["operators"].size(); ++i) {
    const nlohmann::json& op = f["operators"][i];
    EXPECT_LE(op["simulated"].size(), 3u);
    if (op["simulated"].empty()) {
      EXPECT_EQ(op["choice"], op["model_choice"]);
      continue;
    }
    ++simulated;
    EXPECT_EQ(op["simulated"][0]["strategy"], op["model_choice"]);
    double best = 1e300;
    std::string fastest;
    for (const nlohmann::json& s : op["simulated"]) {
      EXPECT_GT(s["simulated_s"].get<double>(), 0);
      if (s["simulated_s"].get<double>() < best) {
        best = s["simulated_s"].get<double>();
        fastest = s["strategy"].get<std::string>();
      }
    }
    EXPECT_EQ(op["choice"], fastest);
  }
  EXPECT_GT(simulated, 0) << "a 50% margin leaves some operator with close candidates";
  EXPECT_GT(f["planning_s"].get<double>(), f["model_planning_s"].get<double>());
}

TEST(PlanRefine, TableSaysWhatItCost) {
  const ProcessResult r = compass({"plan", "--refine", "sim"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("refined by simulation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("for the model alone"), std::string::npos) << r.out;
}

TEST(PlanRefine, BadOptionsAreOneLineErrors) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"plan", "--refine", "exhaustive"},
        std::vector<std::string>{"plan", "--refine", "sim", "--refine-margin", "nan"},
        std::vector<std::string>{"plan", "--refine", "sim", "--refine-margin", "-1"},
        std::vector<std::string>{"plan", "--refine", "sim", "--refine-candidates", "0"}}) {
    const ProcessResult r = compass(args);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_EQ(r.err.rfind("compass: error: --refine", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

}  // namespace
}  // namespace compass::testing
