// Basic behaviour of the compass binary: help, version, and one-line errors with exit code 2.

#include <gtest/gtest.h>

#include <algorithm>

#include "../test_files.hpp"
#include "subprocess.hpp"

namespace compass::testing {
namespace {

ProcessResult compass(const std::vector<std::string>& args) {
  std::vector<std::string> argv{compass_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  TempDir dir;
  ProcessResult r = run_process(argv, dir.path(), 120);
  EXPECT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  EXPECT_FALSE(r.timed_out);
  return r;
}

TEST(CliBasics, HelpListsEveryVerb) {
  const ProcessResult r = compass({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* verb : {"list", "topo", "schedule", "run", "op", "plan", "sweep", "simulate",
                           "calibrate", "validate", "doctor"}) {
    EXPECT_NE(r.out.find(verb), std::string::npos) << "--help does not mention " << verb;
  }
}

TEST(CliBasics, EveryVerbHasHelp) {
  for (const char* verb : {"list", "topo", "schedule", "run", "op", "plan", "sweep", "simulate",
                           "calibrate", "validate", "doctor"}) {
    const ProcessResult r = compass({verb, "--help"});
    EXPECT_EQ(r.exit_code, 0) << verb << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << verb;
  }
}

TEST(CliBasics, RunHelpShowsTheKernelChoice) {
  const ProcessResult r = compass({"run", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("--kernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chunked"), std::string::npos) << r.out;
}

TEST(CliBasics, KernelChoiceErrorsAreOneLineAndExit2) {
  const std::vector<std::string> op{"--op", "ag_gemm", "--m", "16", "--n", "8", "--k", "8",
                                    "--tp", "2", "--strategy", "fuse:ring"};
  for (const auto& extra : std::vector<std::vector<std::string>>{
           {"--backend", "cuda", "--kernel", "bogus"},
           {"--kernel", "fused"},
           {"--backend", "cpu", "--kernel", "chunked"}}) {
    std::vector<std::string> args{"run"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), op.begin(), op.end());
    const ProcessResult r = compass(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("compass: error: --kernel: "), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(CliBasics, Version) {
  const ProcessResult r = compass({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "compass 0.1.0\n");
}

TEST(CliBasics, UnknownVerbIsOneLineAndExit2) {
  const ProcessResult r = compass({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("compass: error: ", 0), 0u) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliBasics, NoVerbIsAnError) {
  const ProcessResult r = compass({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(r.err.empty());
}

TEST(CliBasics, UnknownProfileIsOneLineAndExit2) {
  const ProcessResult r = compass({"topo", "--profile", "nosuch"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("compass: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace compass::testing
