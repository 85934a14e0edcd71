// Hostile input to the compass binary: no shell injection, no half-written or lost file, no
// hang, no non-finite answer. Every case is one command run in a fresh directory; bad input
// must give exit code 2 and one line on stderr naming what is wrong.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../test_files.hpp"
#include "subprocess.hpp"

namespace compass::testing {
namespace {

namespace fs = std::filesystem;

// Runs compass with a limit on the size of any file it writes (writes past it fail with EFBIG
// instead of killing the process): a disk that fills up half-way through a file.
ProcessResult compass_with_file_limit(const std::string& dir, const std::vector<std::string>& args,
                                      rlim_t bytes) {
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit lim = old;
  lim.rlim_cur = bytes;
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &lim);
  ProcessResult r = compass_in(dir, args);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  return r;
}

void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Exit code 2, one line on stderr starting "compass: error: " and containing `needle`.
void expect_usage_error(const ProcessResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("compass: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

// The files of a directory (names only), to check that nothing was left behind.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// ---------------------------------------------------------------------------------------------
// Helper programs run without a shell

// One quick CPU calibration shared by the validate cases.
class ValidateHardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ProcessResult cal = compass_in(dir_->path(), {"calibrate", "--backend", "cpu", "--quick",
                                                  "--grid", "small", "--out", "cpu.json"});
    ASSERT_EQ(cal.exit_code, 0) << cal.err;
    calibration_ = dir_->path() + "/cpu.json";
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::vector<std::string> validate_args() {
    return {"validate", "--backend",  "cpu", "--calibration", calibration_, "--grid",
            "small",    "--repeat",   "1",   "--warmup",      "0"};
  }
  static TempDir* dir_;
  static std::string calibration_;
};
TempDir* ValidateHardening::dir_ = nullptr;
std::string ValidateHardening::calibration_;

TEST_F(ValidateHardening, PlotPathReachesNoShell) {
  TempDir dir;
  const std::string evil = "x';touch PWNED;'.png";
  auto args = validate_args();
  args.insert(args.end(), {"--plot", evil});
  const ProcessResult r = compass_in(dir.path(), args);
  EXPECT_FALSE(fs::exists(dir.path() + "/PWNED")) << "the plot path ran a shell command";
  if (r.exit_code == 0) {
    // The plot is written under exactly the name given.
    EXPECT_TRUE(fs::exists(dir.path() + "/" + evil)) << r.err;
  } else {
    expect_usage_error(r, "matplotlib");  // machines without python3-matplotlib
  }
}

TEST_F(ValidateHardening, ProfileOutIsWrittenOnlyAfterTheRuns) {
  TempDir dir;
  auto args = validate_args();
  args.insert(args.end(), {"--csv", "/dev/full", "--profile-out", "p.json"});
  const ProcessResult r = compass_in(dir.path(), args);
  expect_usage_error(r, "/dev/full");
  EXPECT_FALSE(fs::exists(dir.path() + "/p.json"));
}

TEST_F(ValidateHardening, DashWritesOnlyTheCsvToStdout) {
  TempDir dir;
  auto args = validate_args();
  args.insert(args.end(), {"--csv", "-"});
  const ProcessResult r = compass_in(dir.path(), args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("config,op,m,n,k,tp,strategy", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("MAPE"), std::string::npos) << "the table went to stdout";
  EXPECT_NE(r.err.find("MAPE"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------------------------------------
// Output files: complete or absent, never half-written, never lost

const std::vector<std::string> kSweep = {"sweep", "--limit", "2"};

std::vector<std::string> sweep_with(std::initializer_list<std::string> extra) {
  std::vector<std::string> a = kSweep;
  a.insert(a.end(), extra);
  return a;
}

TEST(OutputFiles, FullDeviceIsAnError) {
  TempDir dir;
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", "/dev/full"})), "/dev/full");
  expect_usage_error(compass_in(dir.path(), sweep_with({"--json", "/dev/full"})), "/dev/full");
}

TEST(OutputFiles, FailedWriteLeavesNothingBehind) {
  TempDir dir;
  const ProcessResult r = compass_with_file_limit(dir.path(), sweep_with({"--json", "s.json"}), 100);
  expect_usage_error(r, "s.json");
  EXPECT_TRUE(listing(dir.path()).empty()) << listing(dir.path()).size() << " files left";
}

TEST(OutputFiles, FailedForcedWriteKeepsTheOldFile) {
  TempDir dir;
  const std::string old = "{\"old\": true}\n";
  spit(dir.path() + "/s.json", old);
  const ProcessResult r =
      compass_with_file_limit(dir.path(), sweep_with({"--json", "s.json", "--force"}), 100);
  expect_usage_error(r, "s.json");
  EXPECT_EQ(read_file(dir.path() + "/s.json"), old);
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"s.json"});
}

TEST(OutputFiles, CalibrateFailedWriteKeepsTheOldFile) {
  TempDir dir;
  const std::string old = "old profile\n";
  spit(dir.path() + "/cpu.json", old);
  const ProcessResult r = compass_with_file_limit(
      dir.path(),
      {"calibrate", "--backend", "cpu", "--quick", "--grid", "small", "--out", "cpu.json",
       "--force"},
      100);
  expect_usage_error(r, "cpu.json");
  EXPECT_EQ(read_file(dir.path() + "/cpu.json"), old);
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"cpu.json"});
}

TEST(OutputFiles, SamePathTwiceIsRejectedBeforeWork) {
  TempDir dir;
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", "x", "--json", "x"})),
                     "both write to");
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", "x", "--json", "./x"})),
                     "both write to");
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", "-", "--json", "-"})),
                     "both want stdout");
  EXPECT_TRUE(listing(dir.path()).empty());
}

TEST(OutputFiles, EmptyPathIsAnError) {
  TempDir dir;
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", ""})), "--csv");
  expect_usage_error(compass_in(dir.path(), sweep_with({"--json-out", ""})), "--json-out");
  expect_usage_error(compass_in(dir.path(), {"simulate", "--m", "64", "--n", "32", "--k", "16",
                                             "--tp", "2", "--strategy", "sequential", "--trace",
                                             ""}),
                     "--trace");
  expect_usage_error(compass_in(dir.path(), {"calibrate", "--backend", "cpu", "--out", ""}),
                     "--out");
}

TEST(OutputFiles, DirectoryIsAnError) {
  TempDir dir;
  fs::create_directory(dir.path() + "/d");
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", "d", "--force"})), "directory");
}

TEST(OutputFiles, DashIsTheMachineOutputAlone) {
  TempDir dir;
  const ProcessResult j = compass_in(dir.path(), sweep_with({"--json", "-"}));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_TRUE(nlohmann::json::accept(j.out)) << j.out;

  const ProcessResult c = compass_in(dir.path(), sweep_with({"--csv", "-"}));
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(c.out.rfind("model,", 0), 0u) << c.out;
  EXPECT_EQ(c.out.find("summary"), std::string::npos) << c.out;
  EXPECT_EQ(count_lines(c.out), 3) << c.out;  // header and two rows
}

TEST(OutputFiles, ExistingFileNeedsForce) {
  TempDir dir;
  spit(dir.path() + "/s.csv", "mine\n");
  expect_usage_error(compass_in(dir.path(), sweep_with({"--csv", "s.csv"})), "--force");
  EXPECT_EQ(read_file(dir.path() + "/s.csv"), "mine\n");
  const ProcessResult r = compass_in(dir.path(), sweep_with({"--csv", "s.csv", "--force"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(dir.path() + "/s.csv").rfind("model,", 0), 0u);
  EXPECT_EQ(listing(dir.path()), std::vector<std::string>{"s.csv"});
}

TEST(OutputFiles, LinkIsWrittenThrough) {
  TempDir dir;
  spit(dir.path() + "/real.csv", "old\n");
  fs::create_symlink("real.csv", dir.path() + "/link.csv");
  const ProcessResult r = compass_in(dir.path(), sweep_with({"--csv", "link.csv", "--force"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir.path() + "/link.csv"));
  EXPECT_EQ(read_file(dir.path() + "/real.csv").rfind("model,", 0), 0u);
}

// ---------------------------------------------------------------------------------------------
// Limits checked before work, and every number validated where it enters

// A small valid two-GPU machine; each case changes one field (a JSON pointer) and the error
// must name that field.
nlohmann::json two_gpu_profile() {
  return nlohmann::json::parse(R"({
    "version": 1, "name": "two",
    "devices": [{"name": "G", "sm_count": 80, "peak_flops": {"bf16": 1e14, "fp32": 2e13},
                 "memory_bandwidth_bytes_per_s": 1e12, "memory_bytes": 4e10,
                 "copy_engines": 2}],
    "nodes": [{"name": "g0", "kind": "gpu", "device": "G"},
              {"name": "g1", "kind": "gpu", "device": "G"}],
    "links": [{"name": "l", "kind": "nvlink", "a": "g0", "b": "g1",
               "bandwidth_bytes_per_s": 5e10, "latency_s": 1e-6}]
  })");
}

struct ProfileCase {
  const char* pointer;     // the field changed
  const char* value;       // its new value (JSON)
  const char* error;       // what the error must contain
};

TEST(Validation, ProfileNumbersAreCheckedWhereTheyEnter) {
  const ProfileCase cases[] = {
      {"/links/0/bandwidth_bytes_per_s", "1e-300", "links[0].bandwidth_bytes_per_s"},
      {"/links/0/latency_s", "1.7e308", "links[0].latency_s"},
      {"/overheads", R"({"kernel_launch_s": 1e300})", "overheads.kernel_launch_s"},
      {"/interference", R"({"gemm_slowdown_copy_engine": 1e300})",
       "interference.gemm_slowdown_copy_engine"},
      {"/devices/0/copy_engines", "2147483647", "devices[0].copy_engines"},
      {"/devices/0/copy_engines", "1.5", "devices[0].copy_engines"},
      {"/devices/0/peak_flops/bf16", "1e-300", "devices[0].peak_flops.bf16"},
      {"/devices/0/memory_bandwidth_bytes_per_s", "1e300", "devices[0].memory_bandwidth"},
      {"/calibration", R"({"gemm": [{"dtype": "bf16", "m": 1e3, "n": 8, "k": 8, "time_s": 1}]})",
       "calibration.gemm[0].m"},
      {"/calibration", R"({"gemm": [{"dtype": "bf16", "m": 8, "n": 8, "k": 8, "time_s": 1e300}]})",
       "calibration.gemm[0].time_s"},
      {"/calibration", R"({"copy_bandwidth_bytes_per_s": 1e-300})",
       "calibration.copy_bandwidth_bytes_per_s"},
      {"/name", R"("x\u001b]0;pwned\u0007")", "name: contains a control character"},
      {"/links/0/name", R"("l\u001b[2J")", "links[0].name: contains a control character"},
      {"/version", "1e999", "p.json"},
  };
  for (const ProfileCase& c : cases) {
    SCOPED_TRACE(std::string(c.pointer) + " = " + c.value);
    TempDir dir;
    std::string text;
    if (std::string(c.value) == "1e999") {
      text = two_gpu_profile().dump();
      text.replace(text.find("\"version\":1"), 11, "\"version\":1e999");
    } else {
      nlohmann::json j = two_gpu_profile();
      j[nlohmann::json::json_pointer(c.pointer)] = nlohmann::json::parse(c.value);
      text = j.dump();
    }
    spit(dir.path() + "/p.json", text);
    const ProcessResult r = compass_in(dir.path(), {"op", "--profile", "p.json", "--op", "gemm_rs",
                                                    "--m", "8192", "--n", "5120", "--k", "13824",
                                                    "--tp", "2"});
    expect_usage_error(r, c.error);
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << "a control character reached stderr";
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(Validation, TheBaseProfileIsValid) {
  // The cases above fail because of their one change.
  TempDir dir;
  spit(dir.path() + "/p.json", two_gpu_profile().dump());
  const ProcessResult r = compass_in(dir.path(), {"op", "--profile", "p.json", "--op", "gemm_rs",
                                                  "--m", "8192", "--n", "5120", "--k", "13824",
                                                  "--tp", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
}

struct FlagCase {
  std::vector<std::string> args;
  const char* error;
};

const std::vector<std::string> kRunSmall = {"run", "--op", "ag_gemm", "--m", "64", "--n", "32",
                                            "--k", "16", "--tp", "2", "--strategy", "sequential"};

// A case's arguments, each quoted, for the failure trace.
std::string quoted(const std::vector<std::string>& args) {
  std::string line;
  for (const auto& a : args) line += " '" + a + "'";
  return line;
}

std::vector<std::string> with(std::vector<std::string> base, std::initializer_list<std::string> more) {
  base.insert(base.end(), more);
  return base;
}

TEST(Validation, FlagsAreCheckedBeforeWork) {
  const std::vector<std::string> big_decompose = {"--op", "ag_gemm", "--m", "800000", "--n", "64",
                                                  "--k", "64", "--tp", "2", "--strategy",
                                                  "decompose:100000"};
  auto verb = [&](const char* v) {
    std::vector<std::string> a{v};
    a.insert(a.end(), big_decompose.begin(), big_decompose.end());
    return a;
  };
  const FlagCase cases[] = {
      {with(kRunSmall, {"--wait-timeout", "nan"}), "--wait-timeout"},
      {with(kRunSmall, {"--wait-timeout", "inf"}), "--wait-timeout"},
      {with(kRunSmall, {"--warmup", "2147483647"}), "--warmup"},
      {with(kRunSmall, {"--repeat", "2147483647"}), "--repeat"},
      {with(kRunSmall, {"--seed", "-1"}), "--seed"},
      {with(kRunSmall, {"--link-scale", "inf", "--links", "emulated:a6000x8"}), "--link-scale"},
      {{"topo", "--tp", "0"}, "--tp"},
      {{"topo", ""}, "empty profile name"},
      {{"topo", "--size", "inf"}, "--size"},
      {{"sweep", "--csv", ""}, "--csv"},
      {verb("schedule"), "at most 4096"},
      {verb("simulate"), "at most 4096"},
      {verb("run"), "at most 4096"},
      {{"schedule", "--op", "ag_gemm", "--m", "32768", "--n", "64", "--k", "64", "--tp", "8",
        "--strategy", "decompose:4096", "--profile", "a6000x8", "--json"},
       ""},  // the largest degree at tp 8 is fine (about 300k tasks)
  };
  for (const FlagCase& c : cases) {
    SCOPED_TRACE(quoted(c.args));
    TempDir dir;
    const ProcessResult r = compass_in(dir.path(), c.args, 60);
    if (std::string(c.error).empty()) {
      EXPECT_EQ(r.exit_code, 0) << r.err;
    } else {
      expect_usage_error(r, c.error);
    }
  }
}

TEST(Validation, ModelFiles) {
  TempDir dir;
  spit(dir.path() + "/huge.json",
       R"({"name": "m", "hidden": 1e999, "ffn": 8, "heads": 1, "layers": 1, "vocab": 8})");
  spit(dir.path() + "/float.json",
       R"({"name": "m", "hidden": 64.5, "ffn": 8, "heads": 1, "layers": 1, "vocab": 8})");
  spit(dir.path() + "/ctl.json",
       "{\"name\": \"m\\u001b[31m\", \"hidden\": 64, \"ffn\": 8, \"heads\": 1, \"layers\": 1, "
       "\"vocab\": 8}");
  fs::create_directory(dir.path() + "/dir.json");
  const std::pair<std::string, std::string> cases[] = {
      {"huge.json", "huge.json: malformed JSON"},
      {"float.json", "float.json: field 'hidden' must be an integer"},
      {"ctl.json", "control character"},
      {"dir.json", "dir.json: is a directory"},
      {"/dev/zero", "/dev/zero: not a regular file"},
      {"missing.json", "missing.json: model file not found"},
  };
  for (const auto& [model, error] : cases) {
    SCOPED_TRACE(model);
    expect_usage_error(compass_in(dir.path(), {"plan", "--model", model}), error);
  }
}

TEST(Validation, AJsonKeyGivenTwiceIsRefusedInEveryInput) {
  // JSON allows a key twice in one object and the parser keeps the last: the first value the
  // user wrote would be dropped without a word.
  TempDir dir;
  spit(dir.path() + "/model.json",
       R"({"name": "m", "hidden": 64, "ffn": 256, "heads": 1, "kv_heads": 1, "layers": 32, )"
       R"("vocab": 8, "layers": 2})");
  spit(dir.path() + "/cluster.json",
       R"({"name": "c", "node": "h100x8", "nodes": 4, "nic": {"count": 8, "gbps": 400, )"
       R"("gbps": 100}})");
  spit(dir.path() + "/huge-cluster.json", R"({"name": "c", "node": "h100x8", "nodes": 1e999})");
  spit(dir.path() + "/plan.json", R"({"ops": [], "iteration": {}, "ops": []})");
  const ProcessResult dumped = compass_in(dir.path(), {"profile", "dump", "a6000x8"});
  ASSERT_EQ(dumped.exit_code, 0) << dumped.err;
  std::string profile = dumped.out;
  profile.insert(profile.find("\"name\""), "\"p2p\": false,\n  ");
  spit(dir.path() + "/profile.json", profile);
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"plan", "--model", "model.json"}, "model.json: duplicate key 'layers'"},
      {{"search", "--cluster", "cluster.json"}, "cluster.json: duplicate key 'gbps' (in 'nic')"},
      {{"search", "--cluster", "huge-cluster.json"},
       "huge-cluster.json: malformed JSON: number overflow parsing '1e999'"},
      {{"topo", "--profile", "profile.json"}, "profile.json: duplicate key 'p2p'"},
      {{"plot", "plan.json", "--out", "x.png"}, "plan.json: duplicate key 'ops'"},
  };
  for (const auto& [args, error] : cases) {
    SCOPED_TRACE(args.back());
    expect_usage_error(compass_in(dir.path(), args), error);
  }
}

TEST(Validation, ControlCharactersInArgumentsAreEscaped) {
  TempDir dir;
  const ProcessResult verb = compass_in(dir.path(), {"\x1b[2Jverb"});
  expect_usage_error(verb, "\\x1b[2Jverb");
  EXPECT_EQ(verb.err.find('\x1b'), std::string::npos);
  const ProcessResult prof = compass_in(dir.path(), {"topo", "--profile", "no\x1b]0;x\x07such"});
  expect_usage_error(prof, "no\\x1b]0;x\\x07such");
  EXPECT_EQ(prof.err.find('\x1b'), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Integer and time flags: one parser, which refuses overflow, empty and senseless values and
// echoes the text as typed

TEST(IntegerFlags, OverflowEmptyAndSenselessValuesAreRefused) {
  const std::vector<std::string> op = {"op", "--op", "gemm_rs", "--n", "5120", "--k", "13824",
                                       "--tp", "8"};
  const std::vector<std::string> sched = {"schedule", "--op", "ag_gemm", "--n", "32", "--k", "16",
                                          "--tp", "2", "--strategy", "sequential"};
  const FlagCase cases[] = {
      {with(kRunSmall, {"--seed", "18446744073709551616"}), "--seed"},
      {with(kRunSmall, {"--seed", "9223372036854775808"}), "--seed"},
      {with(kRunSmall, {"--seed", ""}), "--seed"},
      {with(kRunSmall, {"--seed", " 5"}), "--seed"},
      {with(kRunSmall, {"--repeat", ""}), "--repeat"},
      {with(kRunSmall, {"--warmup", "-1"}), "--warmup"},
      {with(kRunSmall, {"--threads-per-rank", "0"}), "--threads-per-rank"},
      {with(kRunSmall, {"--threads-per-rank", "4294967297"}), "--threads-per-rank"},
      {with(op, {"--m", "18446744073709551616"}), "--m"},
      {with(op, {"--m", ""}), "--m"},
      {with(op, {"--m", "0x10"}), "--m"},
      {with(op, {"--m", "1e3"}), "--m"},
      {with(op, {"--m", "-8192"}), "--m"},
      {with(sched, {"--m", "99999999999999999999999"}), "--m"},
      {with(sched, {"--m", "64", "--limit", "-1"}), "--limit"},
      {{"op", "--op", "gemm_rs", "--m", "64", "--n", "64", "--k", "64", "--tp", ""}, "--tp"},
      {{"op", "--op", "gemm_rs", "--m", "64", "--n", "64", "--k", "64", "--tp", "4294967298"},
       "--tp"},
      {{"plan", "--seq", "0"}, "--seq"},
      {{"plan", "--mbs", ""}, "--mbs"},
      {{"plan", "--seq", "18446744073709551617"}, "--seq"},
      {{"plan", "--refine", "sim", "--refine-candidates", ""}, "--refine-candidates"},
      {{"export", "te", "--seq", "-4096"}, "--seq"},
      {{"sweep", "--limit", "-1"}, "--limit"},
      {{"sweep", "--stride", "0"}, "--stride"},
      {{"sweep", "--threads", "-1"}, "--threads"},
      {{"sweep", "--threads", "99999999999"}, "--threads"},
      {{"topo", "--random", "-5", "--tp", "4"}, "--random"},
      {{"topo", "--random", "", "--tp", "4"}, "--random"},
      {{"calibrate", "--backend", "cuda", "--device", "-1", "--out", "x.json"}, "--device"},
      {{"validate", "--calibration", "c.json", "--repeat", "0"}, "--repeat"},
      {{"validate", "--calibration", "c.json", "--warmup", ""}, "--warmup"},
      {{"simulate", "--m", "64", "--n", "32", "--k", "16", "--tp", "2", "--links", "-3"},
       "--links"},
  };
  for (const FlagCase& c : cases) {
    SCOPED_TRACE(quoted(c.args));
    TempDir dir;
    const ProcessResult r = compass_in(dir.path(), c.args, 60);
    expect_usage_error(r, c.error);
    // The message echoes the value exactly as it was typed.
    const auto flag = std::find(c.args.begin(), c.args.end(), std::string(c.error));
    ASSERT_NE(flag, c.args.end());
    EXPECT_NE(r.err.find("'" + *(flag + 1) + "'"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("9223372036854775807'"), std::string::npos) << "saturated: " << r.err;
  }
}

TEST(IntegerFlags, TheLargestValidValueStillWorks) {
  TempDir dir;
  // Plain decimal with a leading zero is sixty-four, not octal 52.
  const ProcessResult r =
      compass_in(dir.path(), {"schedule", "--op", "ag_gemm", "--m", "064", "--n", "32", "--k",
                              "16", "--tp", "2", "--strategy", "sequential", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"m\":64,"), std::string::npos) << r.out.substr(0, 400);
  const ProcessResult seed =
      compass_in(dir.path(), with(kRunSmall, {"--seed", "9223372036854775807", "--repeat", "1",
                                              "--warmup", "0"}));
  EXPECT_EQ(seed.exit_code, 0) << seed.err;
}

TEST(TimeFlags, HugeOrMalformedTimesAreRefusedWithTheMaximum) {
  const FlagCase cases[] = {
      {with(kRunSmall, {"--launch-timeout", "1e12"}), "--launch-timeout"},
      {with(kRunSmall, {"--launch-timeout", "0"}), "--launch-timeout"},
      {with(kRunSmall, {"--launch-timeout", ""}), "--launch-timeout"},
      {with(kRunSmall, {"--launch-timeout", "-1"}), "--launch-timeout"},
      {with(kRunSmall, {"--launch-timeout", "1e400"}), "--launch-timeout"},
      {with(kRunSmall, {"--wait-timeout", "1e12"}), "--wait-timeout"},
      {with(kRunSmall, {"--wait-timeout", "5s"}), "--wait-timeout"},
  };
  for (const FlagCase& c : cases) {
    SCOPED_TRACE(quoted(c.args));
    TempDir dir;
    const ProcessResult r = compass_in(dir.path(), c.args, 60);
    expect_usage_error(r, c.error);
    EXPECT_NE(r.err.find("1000000"), std::string::npos) << "the maximum is not stated: " << r.err;
    const auto flag = std::find(c.args.begin(), c.args.end(), std::string(c.error));
    EXPECT_NE(r.err.find("'" + *(flag + 1) + "'"), std::string::npos) << r.err;
  }
}

// ---------------------------------------------------------------------------------------------
// Limits on new inputs

// A `nvidia-smi topo -m` matrix of n GPUs all joined by PCIe (NODE), in the printed layout.
std::string topo_matrix(int n) {
  std::string text = "\t";
  for (int i = 0; i < n; ++i) text += "GPU" + std::to_string(i) + "\t";
  text += "CPU Affinity\tNUMA Affinity\n";
  for (int i = 0; i < n; ++i) {
    text += "GPU" + std::to_string(i);
    for (int j = 0; j < n; ++j) text += i == j ? "\t X " : "\tNODE";
    text += "\t0-63\t0\n";
  }
  return text;
}

TEST(Limits, DiscoverRefusesMoreGpusThanAMachineHas) {
  TempDir dir;
  spit(dir.path() + "/ok.txt", topo_matrix(16));
  const ProcessResult ok = compass_in(dir.path(), {"discover", "--from-topo", "ok.txt"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  spit(dir.path() + "/65.txt", topo_matrix(65));
  expect_usage_error(compass_in(dir.path(), {"discover", "--from-topo", "65.txt"}, 30),
                     "65 GPUs (at most 64");
  // The issue's case: a 1000-GPU matrix (a few MB) is refused at once, in bounded memory.
  spit(dir.path() + "/1000.txt", topo_matrix(1000));
  const ProcessResult big = compass_in(dir.path(), {"discover", "--from-topo", "1000.txt"}, 30);
  expect_usage_error(big, "1000.txt");
}

TEST(Limits, NcclLogNumbersMustBePlausible) {
  const std::string log = test_data("nccl/all_reduce_8xh20.log");
  struct Case {
    std::string from, to, error;
  };
  const Case cases[] = {
      {"   3.07       0    17.95", "  1e300       0    17.95", "busbw 1e300"},
      {"   1.76    3.07", "  1e308    3.07", "algbw 1e308"},
      {"       32768          8192", "100000000000000000000000          8192",
       "size '100000000000000000000000'"},
      {"       32768          8192", "           0          8192", "size '0'"},
      {"    18.66    1.76", "   1e+300    1.76", "time 1e+300"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    TempDir dir;
    std::string text = log;
    const auto at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    spit(dir.path() + "/bad.log", text);
    expect_usage_error(compass_in(dir.path(), {"calibrate", "--from-nccl-tests", "bad.log",
                                               "--profile", "h100x8"}),
                       c.error);
  }
}

// Inputs that are not regular files are refused at once: a FIFO with no writer would block a
// plain open() for good.
TEST(Limits, FifosAndDevicesAreNotInputFiles) {
  TempDir dir;
  const std::string fifo = dir.path() + "/in.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::vector<std::string>> cases = {
      {"plot", "in.json", "--out", "x.png"},
      {"discover", "--from-topo", "in.json"},
      {"calibrate", "--from-nccl-tests", "in.json"},
      {"plan", "--model", "in.json"},
      {"topo", "--profile", "in.json"},
      {"plot", "/dev/zero", "--out", "x.png"},
      {"discover", "--from-topo", "/dev/zero"},
  };
  for (const auto& args : cases) {
    SCOPED_TRACE(args[0] + " " + args[1] + " " + args[2]);
    const ProcessResult r = compass_in(dir.path(), args, 20);
    expect_usage_error(r, "not a regular file");
  }
}

// ---------------------------------------------------------------------------------------------
// Several outputs: all or none

// ---------------------------------------------------------------------------------------------
// The layout search: requests no layout can meet, and simulations too large to run, are refused
// at once, naming what to change

TEST(SearchLimits, ImpossibleAndOversizedRequestsAreOneLineErrors) {
  const std::vector<std::string> search = {"search", "--model", "llama2-7b", "--cluster",
                                           "dgx-h100"};
  const FlagCase cases[] = {
      // No pipeline size splits 32 layers into PP x 3 chunks (the first layout tried, PP 1,
      // is not the reason).
      {with(search, {"--gpus", "8", "--global-batch", "8", "--vpp", "3"}),
       "VPP 3: no PP among 2, 4, 8 splits the 32 layers"},
      // Simulating 65,536 GPUs whole would run for hours.
      {with(search, {"--gpus", "65536", "--global-batch", "65536", "--refine", "sim", "--sim-scope",
                     "cluster"}),
       "--sim-scope cluster simulates every GPU, at most 1024"},
  };
  for (const FlagCase& c : cases) {
    SCOPED_TRACE(quoted(c.args));
    TempDir dir;
    expect_usage_error(compass_in(dir.path(), c.args, 60), c.error);
  }
}

TEST(AllOrNone, ALaterFailingOutputLeavesNoEarlierOne) {
  TempDir dir;
  const std::string src = COMPASS_SOURCE_DIR;
  const std::string log = src + "/tests/data/nccl/all_reduce_8xh20.log";
  const std::vector<std::vector<std::string>> cases = {
      sweep_with({"--csv", "a.csv", "--json", "/dev/full"}),
      sweep_with({"--csv", "a.csv", "--json-out", "/dev/full"}),
      sweep_with({"--json-out", "a.json", "--csv", "/dev/full"}),
      {"simulate", "--m", "64", "--n", "32", "--k", "16", "--tp", "2", "--strategy", "sequential",
       "--trace", "t.json", "--json-out", "/dev/full"},
      {"calibrate", "--from-nccl-tests", log, "--profile", "h100x8", "--out", "p.json",
       "--json-out", "/dev/full"},
      {"export", "te", "--out", "cfg.yaml", "--json-out", "/dev/full"},
  };
  for (const auto& args : cases) {
    std::string line;
    for (const auto& a : args) line += " " + a;
    SCOPED_TRACE(line);
    const ProcessResult r = compass_in(dir.path(), args);
    expect_usage_error(r, "/dev/full");
    EXPECT_TRUE(listing(dir.path()).empty()) << listing(dir.path()).front() << " was written";
    for (const auto& name : listing(dir.path())) fs::remove(dir.path() + "/" + name);
  }
}

// A disk that fills up at the second file: neither file, no temporary left behind.
TEST(AllOrNone, DiskFullAtTheSecondFileLeavesNeither) {
  TempDir probe;
  const ProcessResult ok =
      compass_in(probe.path(), sweep_with({"--csv", "a.csv", "--json-out", "b.json"}));
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const auto csv = fs::file_size(probe.path() + "/a.csv");
  const auto json = fs::file_size(probe.path() + "/b.json");
  ASSERT_LT(csv, json);
  TempDir dir;
  const ProcessResult r = compass_with_file_limit(
      dir.path(), sweep_with({"--csv", "a.csv", "--json-out", "b.json"}),
      static_cast<rlim_t>(csv + (json - csv) / 2));
  expect_usage_error(r, "b.json");
  EXPECT_TRUE(listing(dir.path()).empty()) << listing(dir.path()).size() << " files left";
}

TEST(AllOrNone, CalibrateOutDashIsStdout) {
  TempDir dir;
  const std::string log = std::string(COMPASS_SOURCE_DIR) + "/tests/data/nccl/all_reduce_8xh20.log";
  const ProcessResult r = compass_in(
      dir.path(), {"calibrate", "--from-nccl-tests", log, "--profile", "h100x8", "--out", "-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(listing(dir.path()).empty()) << "created " << listing(dir.path()).front();
  const auto j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 200);
  EXPECT_TRUE(j.contains("links")) << r.out.substr(0, 200);
  EXPECT_NE(r.err.find("fit of profile h100x8"), std::string::npos) << r.err;
  expect_usage_error(compass_in(dir.path(), {"calibrate", "--from-nccl-tests", log, "--out", "-",
                                             "--json"}),
                     "both write to stdout");
}

}  // namespace
}  // namespace compass::testing
