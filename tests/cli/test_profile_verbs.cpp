// compass profile dump/diff/check and discover as a user runs them: every preset dumped and
// loaded back predicts exactly what the preset predicts.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "subprocess.hpp"

namespace compass::testing {
namespace {

TEST(ProfileVerbs, EveryPresetDumpsToAFileThatPredictsTheSame) {
  TempDir dir;
  const ProcessResult list = compass_in(dir.path(), {"list", "presets", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto presets = nlohmann::json::parse(list.out);
  ASSERT_GE(presets.size(), 5u);
  for (const auto& entry : presets) {
    const std::string name = entry["name"].get<std::string>();
    const int gpus = entry["gpus"].get<int>();
    SCOPED_TRACE(name);
    const std::string file = name + ".json";
    const ProcessResult dump = compass_in(dir.path(), {"profile", "dump", name, "--out", file});
    ASSERT_EQ(dump.exit_code, 0) << dump.err;
    // Refuses to overwrite without --force.
    const ProcessResult again = compass_in(dir.path(), {"profile", "dump", name, "--out", file});
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_NE(again.err.find("refusing to overwrite"), std::string::npos) << again.err;
    EXPECT_EQ(compass_in(dir.path(), {"profile", "check", file}).exit_code, 0);
    const ProcessResult diff = compass_in(dir.path(), {"profile", "diff", name, file});
    EXPECT_EQ(diff.exit_code, 0) << diff.out;
    EXPECT_NE(diff.out.find("0 differences"), std::string::npos);

    std::vector<std::vector<std::string>> commands = {{"topo", "--json"}};
    if (gpus >= 2)
      commands.push_back({"op", "--op", "gemm_rs", "--m", "8192", "--n", "5120", "--k", "4096",
                          "--tp", "2", "--json"});
    for (auto cmd : commands) {
      auto with = [&](const std::string& profile) {
        std::vector<std::string> args = cmd;
        args.insert(args.begin() + 1, {"--profile", profile});
        return compass_in(dir.path(), args);
      };
      const ProcessResult a = with(name), b = with(file);
      ASSERT_EQ(a.exit_code, 0) << a.err;
      ASSERT_EQ(b.exit_code, 0) << b.err;
      EXPECT_EQ(a.out, b.out) << cmd[0];
    }
  }
}

TEST(ProfileVerbs, DiffNamesTheChangedField) {
  TempDir dir;
  ASSERT_EQ(compass_in(dir.path(), {"profile", "dump", "a6000x4", "--out", "a.json"}).exit_code, 0);
  const ProcessResult d = compass_in(dir.path(), {"profile", "diff", "a6000x4", "a6000x8"});
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_NE(d.out.find("nodes[gpu7]\n  a: (absent)\n"), std::string::npos) << d.out;
}

}  // namespace
}  // namespace compass::testing
