// The standard streams closed or full: a command whose output cannot be written is exit code 2
// with one line on stderr naming stdout (or, when stderr itself is gone, exit code 2 and
// nothing more), never an abort and never exit code 0 with the output lost.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../test_files.hpp"
#include "subprocess.hpp"

namespace compass::testing {
namespace {

const std::string kSrc = COMPASS_SOURCE_DIR;

// Commands that succeed and print to stdout, each of a different verb or output path.
std::vector<std::vector<std::string>> printing_commands() {
  return {
      {"list", "presets"},
      {"list", "models", "--json"},
      {"topo", "a6000x8"},
      {"schedule", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16", "--tp", "2",
       "--strategy", "sequential"},
      {"op", "--op", "gemm_rs", "--m", "8192", "--n", "5120", "--k", "13824", "--tp", "8"},
      {"plan"},
      {"sweep", "--limit", "2", "--progress", "none"},
      {"profile", "dump", "a6000x8"},
      {"profile", "diff", "a6000x8", "a6000x8"},
      {"discover", "--from-topo", kSrc + "/tests/data/topo/nvlink_pairs_4x3090.txt"},
      {"calibrate", "--from-nccl-tests", kSrc + "/tests/data/nccl/all_reduce_8xh20.log",
       "--profile", "h100x8"},
      {"run", "--op", "ag_gemm", "--m", "64", "--n", "32", "--k", "16", "--tp", "2",
       "--strategy", "sequential", "--repeat", "1", "--warmup", "0"},
      {"export", "te", "--json"},
      {"--help"},
      {"--version"},
  };
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += " " + a;
  return s;
}

bool one_line(const std::string& s) {
  return !s.empty() && std::count(s.begin(), s.end(), '\n') == 1 && s.back() == '\n';
}

// One test per command, so that ctest runs them side by side.
class PrintingCommand : public ::testing::TestWithParam<std::size_t> {
 protected:
  std::vector<std::string> args() const { return printing_commands().at(GetParam()); }
};

TEST_P(PrintingCommand, FullOrClosedStdoutIsAnError) {
  const auto args = this->args();
  SCOPED_TRACE(joined(args));
  TempDir dir;
  const ProcessResult ok = compass_in(dir.path(), args);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  ASSERT_FALSE(ok.out.empty()) << "the command prints nothing on stdout";
  for (Stream to : {Stream::full, Stream::closed}) {
    SCOPED_TRACE(to == Stream::full ? ">/dev/full" : ">&-");
    const ProcessResult r = compass_with_streams(dir.path(), args, to, Stream::pipe);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(one_line(r.err)) << r.err;
    EXPECT_EQ(r.err.rfind("compass: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("stdout"), std::string::npos) << r.err;
  }
}

TEST_P(PrintingCommand, GoneStderrKeepsTheExitCodeHonest) {
  const auto args = this->args();
  SCOPED_TRACE(joined(args));
  TempDir dir;
  const ProcessResult ok = compass_in(dir.path(), args);
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  for (Stream to : {Stream::full, Stream::closed}) {
    SCOPED_TRACE(to == Stream::full ? "2>/dev/full" : "2>&-");
    const ProcessResult r = compass_with_streams(dir.path(), args, Stream::pipe, to);
    // Nothing was lost when the command had nothing to say on stderr; else the loss is exit 2.
    EXPECT_EQ(r.exit_code, ok.err.empty() ? 0 : 2) << "stderr of the normal run: " << ok.err;
    if (ok.err.empty()) {
      EXPECT_EQ(r.out.size(), ok.out.size());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Streams, PrintingCommand,
                         ::testing::Range<std::size_t>(0, printing_commands().size()));

// Errors, and progress, with stderr gone: a quiet exit 2, never an abort.
TEST(Streams, ErrorsWithStderrGoneAreAQuietExit2) {
  const std::vector<std::vector<std::string>> failing = {
      {"no-such-verb"},
      {"topo", "--tp", "0"},
      {"plan", "--model", "missing.json"},
      {"op", "--op", "ag_gemm", "--m", "1", "--n", "1", "--k", "1", "--tp", "3", "--gpus", "9"},
      {"sweep", "--limit", "2", "--progress", "lines"},
      {"sweep", "--csv", "/dev/full", "--limit", "1"},
  };
  for (const auto& args : failing) {
    SCOPED_TRACE(joined(args));
    TempDir dir;
    for (Stream to : {Stream::full, Stream::closed}) {
      SCOPED_TRACE(to == Stream::full ? "2>/dev/full" : "2>&-");
      const ProcessResult r = compass_with_streams(dir.path(), args, Stream::pipe, to);
      EXPECT_EQ(r.exit_code, 2);
    }
  }
}

// Both streams gone at once.
TEST(Streams, BothStreamsGone) {
  TempDir dir;
  for (Stream to : {Stream::full, Stream::closed}) {
    const ProcessResult r = compass_with_streams(dir.path(), {"list", "presets"}, to, to);
    EXPECT_EQ(r.exit_code, 2);
  }
}

// A closed stdout must not become an output file: the files compass opens never take its number.
TEST(Streams, ClosedStdoutIsNotAFile) {
  TempDir dir;
  const ProcessResult r = compass_with_streams(
      dir.path(), {"sweep", "--limit", "1", "--csv", "s.csv", "--progress", "none"},
      Stream::closed, Stream::pipe);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("stdout"), std::string::npos) << r.err;
  const std::string csv = read_file(dir.path() + "/s.csv");
  EXPECT_EQ(csv.rfind("model,", 0), 0u) << csv;
  EXPECT_EQ(csv.find("summary"), std::string::npos) << "the table went into the CSV file";
}

}  // namespace
}  // namespace compass::testing
