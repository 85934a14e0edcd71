// One CLI behaviour on every verb: --json puts exactly one JSON document on stdout and nothing
// else; files are written only through options that name them and never overwritten without
// --force; --gpus is accepted wherever --tp is.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "subprocess.hpp"

namespace compass::testing {
namespace {

namespace fs = std::filesystem;

// Runs a verb with --json and checks that stdout is one JSON document and nothing else.
nlohmann::json json_of(const std::vector<std::string>& args) {
  TempDir dir;
  std::vector<std::string> a = args;
  a.push_back("--json");
  const ProcessResult r = compass_in(dir.path(), a);
  EXPECT_EQ(r.exit_code, 0) << args.front() << ": " << r.err;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.out);  // throws on anything before or after the document
  } catch (const std::exception& e) {
    ADD_FAILURE() << args.front() << ": stdout is not one JSON document: " << e.what() << "\n"
                  << r.out.substr(0, 400);
  }
  EXPECT_FALSE(j.is_null()) << args.front();
  return j;
}

TEST(CliConsistency, ListJson) { EXPECT_TRUE(json_of({"list", "presets"}).is_array()); }
TEST(CliConsistency, TopoJson) { EXPECT_TRUE(json_of({"topo", "a6000x8", "--tp", "4"}).is_object()); }
TEST(CliConsistency, ScheduleJson) {
  EXPECT_TRUE(json_of({"schedule", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16",
                       "--tp", "2"})
                  .is_object());
}
TEST(CliConsistency, OpJson) {
  EXPECT_TRUE(json_of({"op", "--op", "gemm_rs", "--m", "8192", "--n", "5120", "--k", "13824",
                       "--tp", "8"})
                  .is_object());
}
TEST(CliConsistency, PlanJson) { EXPECT_TRUE(json_of({"plan"}).contains("speedup")); }
TEST(CliConsistency, ExportJson) { EXPECT_TRUE(json_of({"export", "te"}).contains("config")); }
TEST(CliConsistency, SweepJson) {
  const nlohmann::json j = json_of({"sweep", "--limit", "3"});
  EXPECT_EQ(j["rows"].size(), 3u);
  // --summary with --json used to mix the table into the JSON.
  EXPECT_TRUE(json_of({"sweep", "--limit", "3", "--summary"}).contains("summary"));
  // A note about skipped rows goes to stderr when JSON owns stdout.
  EXPECT_TRUE(json_of({"sweep", "--profile", "a6000x4", "--limit", "40"}).contains("rows"));
}
TEST(CliConsistency, SimulateJson) {
  EXPECT_TRUE(json_of({"simulate", "--op", "ag_gemm", "--m", "1024", "--n", "512", "--k", "256",
                       "--tp", "2", "--strategy", "sequential"})
                  .is_object());
}
TEST(CliConsistency, RunJson) {
  EXPECT_TRUE(json_of({"run", "--backend", "cpu", "--op", "gemm_rs", "--m", "64", "--n", "32",
                       "--k", "16", "--tp", "2", "--repeat", "1", "--warmup", "0"})
                  .is_object());
}

// calibrate and validate measure for seconds to minutes; their --json is checked for the
// refusal paths: bad input still gives one line on stderr, exit 2 and nothing on stdout.
TEST(CliConsistency, CalibrateAndValidateJsonErrors) {
  TempDir dir;
  ProcessResult r = compass_in(dir.path(), {"calibrate", "--backend", "nope", "--out", "x.json",
                                            "--json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = compass_in(dir.path(), {"validate", "--calibration", "missing.json", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliConsistency, JsonOutFilesAndForce) {
  TempDir dir;
  // --json-out writes the file; stdout keeps the human summary.
  ProcessResult r = compass_in(dir.path(), {"sweep", "--limit", "2", "--json-out", "s.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("summary"), std::string::npos);
  std::ifstream f(fs::path(dir.path()) / "s.json");
  EXPECT_EQ(nlohmann::json::parse(f)["rows"].size(), 2u);
  // Never overwritten without --force; the older spelling --json FILE means the same.
  r = compass_in(dir.path(), {"sweep", "--limit", "2", "--json-out", "s.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos);
  r = compass_in(dir.path(), {"sweep", "--limit", "2", "--json", "s.json"});
  EXPECT_EQ(r.exit_code, 2);
  r = compass_in(dir.path(), {"sweep", "--limit", "2", "--json", "s.json", "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // export te: the configuration file is refused the same way.
  r = compass_in(dir.path(), {"export", "te", "--out", "te.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "te.launch.sh"));
  r = compass_in(dir.path(), {"export", "te", "--out", "te.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos);
  // Both JSON and CSV on stdout cannot be honoured.
  r = compass_in(dir.path(), {"sweep", "--limit", "2", "--json", "--csv", "-"});
  EXPECT_EQ(r.exit_code, 2);
}

// Every verb with a JSON result, one row each: --json, --json-out FILE, --json-out -, and
// --force behave the same everywhere. A row's setup runs first in the same directory.
struct JsonVerb {
  std::string name;
  std::vector<std::vector<std::string>> setup;
  std::vector<std::string> args;
  int exit_code = 0;          ///< the verb's normal exit code for these args
  bool deterministic = true;  ///< two runs print the same JSON (false: timings inside)
  std::string remove_before_each;  ///< another output of the verb, removed before each run
};

std::string source_file(const std::string& rel) {
  return (fs::path(COMPASS_SOURCE_DIR) / rel).string();
}

std::vector<JsonVerb> json_verbs() {
  const std::vector<std::string> small_op{"--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16",
                                          "--tp", "2"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  std::vector<JsonVerb> v = {
      {"list presets", {}, {"list", "presets"}},
      {"list models", {}, {"list", "models"}},
      {"topo", {}, {"topo", "a6000x8", "--tp", "4"}},
      {"schedule", {}, with({"schedule"}, small_op)},
      {"op", {}, {"op", "--op", "gemm_rs", "--m", "8192", "--n", "5120", "--k", "13824", "--tp", "8"}},
      {"plan", {}, {"plan"}},
      {"sweep", {}, {"sweep", "--limit", "3"}},
      {"export te", {}, {"export", "te"}},
      {"run", {}, with({"run", "--backend", "cpu", "--repeat", "1", "--warmup", "0"}, small_op), 0,
       false},
      {"profile diff", {}, {"profile", "diff", "a6000x8", "a6000x4"}, 1},
      {"profile check", {{"profile", "dump", "a6000x4", "--out", "m.json"}},
       {"profile", "check", "m.json"}},
      {"calibrate --from-nccl-tests", {},
       {"calibrate", "--from-nccl-tests", source_file("tests/data/nccl/all_reduce_8xh20.log"),
        "--profile", "h100x8"}},
      {"doctor", {}, {"doctor"}, 0, false},
      {"plot", {{"plan", "--json-out", "plan.json"}}, {"plot", "plan.json", "--out", "p.png"}, 0,
       true, "p.png"},
  };
  if (json_of({"simulate", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16", "--tp", "2",
               "--strategy", "sequential"})
          .is_object())
    v.push_back({"simulate", {}, with({"simulate", "--strategy", "sequential"}, small_op)});
  return v;
}

TEST(CliConsistency, JsonJsonOutAndForceOnEveryVerb) {
  for (const JsonVerb& verb : json_verbs()) {
    SCOPED_TRACE(verb.name);
    TempDir dir;
    const fs::path file = fs::path(dir.path()) / "out.json";
    auto run = [&](std::vector<std::string> extra) {
      std::vector<std::string> a = verb.args;
      a.insert(a.end(), extra.begin(), extra.end());
      if (!verb.remove_before_each.empty())
        fs::remove(fs::path(dir.path()) / verb.remove_before_each);
      return compass_in(dir.path(), a);
    };
    for (const auto& s : verb.setup) ASSERT_EQ(compass_in(dir.path(), s).exit_code, 0);

    // --json: one JSON document on stdout and nothing else.
    const ProcessResult js = run({"--json"});
    ASSERT_EQ(js.exit_code, verb.exit_code) << js.err;
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(js.out)) << js.out.substr(0, 300);

    // --json-out FILE: the same document in the file; stdout keeps the human output.
    const ProcessResult human = run({"--json-out", "out.json"});
    ASSERT_EQ(human.exit_code, verb.exit_code) << human.err;
    ASSERT_TRUE(fs::exists(file));
    std::ifstream in(file);
    const nlohmann::json from_file = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(from_file.is_discarded());
    if (verb.deterministic) {
      EXPECT_EQ(from_file, doc);
    } else {
      EXPECT_EQ(from_file.type(), doc.type());
      if (doc.is_object()) {
        for (const auto& [k, val] : doc.items()) {
          EXPECT_TRUE(from_file.contains(k)) << k;
        }
      }
    }
    EXPECT_FALSE(human.out.empty());
    EXPECT_TRUE(nlohmann::json::parse(human.out, nullptr, false).is_discarded())
        << "stdout should be the human output with --json-out: " << human.out.substr(0, 200);

    // Never overwritten without --force: one line, exit 2, the file untouched.
    const auto size_before = fs::file_size(file);
    const ProcessResult refused = run({"--json-out", "out.json"});
    EXPECT_EQ(refused.exit_code, 2);
    EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
    EXPECT_EQ(std::count(refused.err.begin(), refused.err.end(), '\n'), 1) << refused.err;
    EXPECT_TRUE(refused.out.empty()) << refused.out.substr(0, 200);
    EXPECT_EQ(fs::file_size(file), size_before);
    EXPECT_EQ(run({"--json-out", "out.json", "--force"}).exit_code, verb.exit_code);

    // --json-out - is --json.
    const ProcessResult dash = run({"--json-out", "-"});
    EXPECT_EQ(dash.exit_code, verb.exit_code);
    const nlohmann::json dash_doc = nlohmann::json::parse(dash.out, nullptr, false);
    EXPECT_FALSE(dash_doc.is_discarded()) << dash.out.substr(0, 200);
    if (verb.deterministic) {
      EXPECT_EQ(dash_doc, doc);
    }
  }
}

// --json is a plain flag on verbs that take positional arguments: it never swallows the
// argument after it. (sweep and validate keep the older '--json FILE' spelling.)
TEST(CliConsistency, JsonFlagBeforePositional) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list", "--json", "presets"},
        std::vector<std::string>{"topo", "--json", "a6000x4"},
        std::vector<std::string>{"profile", "diff", "--json", "a6000x8", "a6000x8"}}) {
    const ProcessResult r = compass_in(dir.path(), args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    EXPECT_FALSE(nlohmann::json::parse(r.out, nullptr, false).is_discarded()) << args[0];
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));  // no file named after the positional
}

// --tp 0 and an empty --gpus are errors on every verb that takes them, never "every GPU".
TEST(CliConsistency, TpZeroAndEmptyGpusAreErrors) {
  const std::vector<std::string> shape{"--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<std::vector<std::string>> takes_tp = {
      {"plan"}, {"export", "te"}, with({"op"}, shape), with({"run", "--backend", "cpu"}, shape),
      with({"schedule"}, shape), with({"simulate"}, shape), {"topo", "a6000x8"},
      {"calibrate", "--backend", "cpu", "--out", "c.json"},
      {"validate", "--calibration", "c.json"}};
  const std::vector<std::vector<std::string>> takes_gpus = {
      {"plan"}, {"export", "te"}, with({"op", "--tp", "2"}, shape), with({"schedule"}, shape),
      with({"simulate"}, shape), {"topo", "a6000x8"}, {"sweep", "--limit", "2"},
      with({"run", "--backend", "cpu"}, shape)};
  TempDir dir;
  auto expect_one_line_error = [&](const std::vector<std::string>& args, const std::string& flag) {
    const ProcessResult r = compass_in(dir.path(), args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << flag << ": " << r.out.substr(0, 200);
    EXPECT_TRUE(r.out.empty()) << args[0];
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
  };
  for (const auto& v : takes_tp) expect_one_line_error(with(v, {"--tp", "0"}), "--tp");
  for (const auto& v : takes_gpus) {
    expect_one_line_error(with(v, {"--gpus", ""}), "--gpus");
    expect_one_line_error(with(v, {"--gpus", " "}), "--gpus");
  }
}

// Progress goes to stderr only: nothing when it is not a terminal, one line per row with
// --progress lines, nothing with --quiet whatever --progress says.
TEST(CliConsistency, ProgressLinesOnRequestOnly) {
  TempDir dir;
  const std::vector<std::string> sweep{"sweep", "--limit", "3", "--json"};
  auto with = [&](const std::vector<std::string>& more) {
    std::vector<std::string> a = sweep;
    a.insert(a.end(), more.begin(), more.end());
    const ProcessResult r = compass_in(dir.path(), a);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out.substr(0, 200);
    return r.err;
  };
  EXPECT_EQ(with({}), "");
  EXPECT_EQ(with({"--progress", "lines"}),
            "compass: progress: planning 1/3\ncompass: progress: planning 2/3\n"
            "compass: progress: planning 3/3\n");
  EXPECT_EQ(with({"--progress", "lines", "--quiet"}), "");
  EXPECT_EQ(with({"--progress", "none"}), "");
  const ProcessResult bad = compass_in(dir.path(), {"sweep", "--progress", "bar"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--progress"), std::string::npos) << bad.err;
}

TEST(CliConsistency, GpusWhereverTp) {
  // plan: --gpus alone sets the TP degree; the ring is over the named GPUs.
  const nlohmann::json plan = json_of({"plan", "--gpus", "0,1,4,5", "--model", "llama2-7b"});
  EXPECT_EQ(plan["tp"], 4);
  EXPECT_EQ(plan["ring"].size(), 4u);
  const nlohmann::json sched = json_of({"schedule", "--op", "ag_gemm", "--m", "64", "--n", "32",
                                        "--k", "16", "--gpus", "2,3"});
  EXPECT_TRUE(sched.is_object());
  const nlohmann::json sweep = json_of({"sweep", "--limit", "3", "--gpus", "4,5,6,7,0,1,2,3"});
  EXPECT_EQ(sweep["rows"].size(), 3u);
  // run: --gpus alone sets the ranks; rank r is on the r-th GPU named, and the ring over them
  // is the one plan finds for the same GPUs.
  const nlohmann::json run = json_of({"run", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k",
                                      "16", "--gpus", "0,1,4,5", "--strategy", "fuse:ring",
                                      "--repeat", "1", "--check"});
  EXPECT_EQ(run["op"]["tp"], 4);
  EXPECT_EQ(run["gpus"], nlohmann::json({0, 1, 4, 5}));
  EXPECT_EQ(run["ring"], plan["ring"]);
  EXPECT_TRUE(run["passed"].get<bool>()) << run.dump();
  // Sizes that disagree are one-line errors.
  TempDir dir;
  ProcessResult r = compass_in(dir.path(), {"plan", "--tp", "2", "--gpus", "0,1,2,3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--gpus lists 4 GPUs but --tp is 2"), std::string::npos) << r.err;
  r = compass_in(dir.path(), {"schedule", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k",
                              "16", "--tp", "4", "--gpus", "0,1"});
  EXPECT_EQ(r.exit_code, 2);
  r = compass_in(dir.path(), {"run", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tp or --gpus is required"), std::string::npos) << r.err;
  r = compass_in(dir.path(), {"run", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16",
                              "--tp", "2", "--gpus", "0,1,2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--gpus lists 3 GPUs but --tp is 2"), std::string::npos) << r.err;
  r = compass_in(dir.path(), {"plan", "--gpus", "0,9"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("GPU 9 does not exist"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace compass::testing
