// The launch `compass search` prints runs as printed: the `compass export te` command through a
// shell, with a profile file, a model file and a configuration name that need quoting, and the
// Megatron-LM arguments expanded after sourcing the launch script it writes.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.hpp"

namespace compass::testing {
namespace {

namespace fs = std::filesystem;

// The line after `header` in `text` without its two-space indent ("" when absent).
std::string line_after(const std::string& text, const std::string& header) {
  const std::size_t at = text.find(header);
  if (at == std::string::npos) return "";
  const std::size_t begin = text.find('\n', at);
  if (begin == std::string::npos) return "";
  const std::size_t end = text.find('\n', begin + 1);
  std::string line = text.substr(begin + 1, end == std::string::npos ? end : end - begin - 1);
  return line.rfind("  ", 0) == 0 ? line.substr(2) : line;
}

std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(SearchLaunch, TheExportCommandAndTheArgumentsRunAsPrinted) {
  TempDir dir;
  const ProcessResult dump = compass_in(dir.path(), {"profile", "dump", "h100x8"}, 60);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  const std::string profile = "my box's.json", model = "my model.json", cfg = "ub cfg.yaml";
  std::ofstream(fs::path(dir.path()) / profile) << dump.out;
  std::ofstream(fs::path(dir.path()) / model)
      << R"({"name": "small-7b", "hidden": 4096, "ffn": 11008, "heads": 32, "kv_heads": 32,
            "layers": 32, "vocab": 32000, "swiglu": true})";
  const std::vector<std::string> search = {
      "search", "--cluster", profile, "--model",     model, "--gpus",
      "8",      "--tp",      "4",     "--sp",        "on",  "--global-batch",
      "16",     "--seq",     "2048",  "--te-config", cfg};
  const ProcessResult r = compass_in(dir.path(), search, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // The export command, run by a shell as printed (the binary's path for "compass").
  std::string command = line_after(r.out, "TP overlap settings:");
  ASSERT_EQ(command.rfind("compass export te ", 0), 0u) << r.out;
  command = single_quoted(compass_binary()) + command.substr(std::string("compass").size());
  const ProcessResult exported = run_process({"/bin/sh", "-c", command}, dir.path(), 120);
  ASSERT_EQ(exported.exit_code, 0) << command << "\n" << exported.err;
  const fs::path config = fs::path(dir.path()) / cfg;
  const fs::path launch = fs::path(dir.path()) / "ub cfg.launch.sh";
  ASSERT_TRUE(fs::exists(config)) << exported.out;
  ASSERT_TRUE(fs::exists(launch)) << exported.out;
  EXPECT_NE(exported.out.find("small-7b on h100x8, tp 4, seq 2048, micro-batch"), std::string::npos)
      << exported.out;

  // The Megatron-LM arguments, expanded by bash after sourcing the launch script: the layout's
  // words, then the export's, which name the configuration by its absolute path.
  const std::string args = line_after(r.out, "megatron-lm arguments (the best launch)");
  ASSERT_NE(args.find("\"${MEGATRON_TP_ARGS[@]}\""), std::string::npos) << r.out;
  const ProcessResult expanded =
      run_process({"/bin/bash", "-c",
                   "source " + single_quoted(launch.string()) + " && printf '%s\\n' " + args +
                       " && echo \"CUDA_DEVICE_MAX_CONNECTIONS=$CUDA_DEVICE_MAX_CONNECTIONS\""},
                  dir.path(), 60);
  ASSERT_EQ(expanded.exit_code, 0) << expanded.err;
  const std::vector<std::string> argv = lines_of(expanded.out);
  auto value_of = [&](const std::string& flag) -> std::string {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == flag) return argv[i + 1];
    return "(absent)";
  };
  EXPECT_EQ(value_of("--tensor-model-parallel-size"), "4") << expanded.out;
  EXPECT_EQ(value_of("--seq-length"), "2048") << expanded.out;
  EXPECT_EQ(value_of("--global-batch-size"), "16") << expanded.out;
  const fs::path named = value_of("--tp-comm-overlap-cfg");
  std::error_code ec;
  EXPECT_TRUE(named.is_absolute()) << expanded.out;
  EXPECT_TRUE(fs::equivalent(named, config, ec)) << expanded.out;
  EXPECT_NE(std::find(argv.begin(), argv.end(), "--tp-comm-overlap"), argv.end());
  EXPECT_EQ(argv.back(), "CUDA_DEVICE_MAX_CONNECTIONS=1");

  // The JSON carries the same: the layout's words and the export command's.
  std::vector<std::string> json_search = search;
  json_search.push_back("--json");
  const ProcessResult j = compass_in(dir.path(), json_search, 120);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  const std::vector<std::string> cmd = doc.at("te_export_command");
  EXPECT_EQ(std::vector<std::string>(cmd.begin(), cmd.begin() + 3),
            (std::vector<std::string>{"compass", "export", "te"}));
  EXPECT_EQ(cmd.at(4), profile);
  EXPECT_EQ(cmd.at(6), model);
  EXPECT_EQ(cmd.back(), cfg);
  // And what the launch is expected to take: the exported settings' step.
  EXPECT_EQ(doc.at("launch_overlap"), "te-export");
  EXPECT_GT(doc.at("launch_step").at("iteration_s").get<double>(), 0);
  EXPECT_NE(r.out.find("expected with this launch (TE running the exported settings): iteration "),
            std::string::npos)
      << r.out;
  const std::vector<std::string> words = doc.at("megatron_args");
  EXPECT_EQ(words.at(0), "--tensor-model-parallel-size");
  EXPECT_EQ(words.at(1), "4");
}

TEST(SearchLaunch, WithoutTeOverlapTheLaunchIsMegatronsAndSaysWhy) {
  // GPUs without peer access: TE's userbuffers cannot start, so the launch carries no TP
  // overlap, says why, and is expected to take Megatron-LM's time for the layout.
  TempDir dir;
  const std::vector<std::string> search = {
      "search", "--cluster", "rtx4090x8", "--model",        "llama2-7b", "--gpus", "8",   "--tp",
      "2",      "--sp",      "on",        "--global-batch", "16",        "--seq",  "2048"};
  const ProcessResult r = compass_in(dir.path(), search, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("MEGATRON_TP_ARGS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("compass export te"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no TP overlap in this launch: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peer-to-peer"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expected with this launch (Megatron-LM's sequential TP)"),
            std::string::npos)
      << r.out;
  std::vector<std::string> json_search = search;
  json_search.push_back("--json");
  const ProcessResult j = compass_in(dir.path(), json_search, 120);
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  EXPECT_FALSE(doc.contains("te_export_command"));
  EXPECT_NE(doc.at("te_export_error").get<std::string>().find("peer-to-peer"), std::string::npos);
  EXPECT_EQ(doc.at("launch_overlap"), "megatron");
  EXPECT_EQ(doc.at("launch_step").at("iteration_s"),
            doc.at("best").at("launch").at("megatron").at("iteration_s"));
  EXPECT_EQ(doc.at("best").at("launch").at("launch_overlap"), "megatron");
  EXPECT_GT(doc.at("best").at("launch").at("megatron").at("iteration_s").get<double>(),
            doc.at("best").at("launch").at("compass").at("iteration_s").get<double>());
}

TEST(SearchLaunch, ExportTakesTheClusterTheSearchWasGiven) {
  TempDir dir;
  // A built-in cluster plans on its node: the same report as the node's preset.
  const ProcessResult by_cluster =
      compass_in(dir.path(), {"export", "te", "--cluster", "dgx-h100", "--tp", "4"}, 120);
  const ProcessResult by_profile =
      compass_in(dir.path(), {"export", "te", "--profile", "h100x8", "--tp", "4"}, 120);
  ASSERT_EQ(by_cluster.exit_code, 0) << by_cluster.err;
  ASSERT_EQ(by_profile.exit_code, 0) << by_profile.err;
  EXPECT_EQ(by_cluster.out, by_profile.out);
  // Both at once, or a cluster that does not exist: one-line errors.
  const ProcessResult both =
      compass_in(dir.path(), {"export", "te", "--cluster", "dgx-h100", "--profile", "h100x8"}, 60);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  const ProcessResult unknown = compass_in(dir.path(), {"export", "te", "--cluster", "nosuch"}, 60);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("unknown cluster 'nosuch'"), std::string::npos) << unknown.err;
  EXPECT_EQ(std::count(unknown.err.begin(), unknown.err.end(), '\n'), 1) << unknown.err;
}

}  // namespace
}  // namespace compass::testing
