// Golden-output tests for the CLI. Every tests/golden/<case>.cmd holds, on its first line, the
// arguments after `compass`; the test runs the binary in a fresh temp dir and compares stdout
// with <case>.out exactly, the exit code with <case>.rc (default 0) and, when <case>.err
// exists, checks that stderr contains its text. In the .cmd line, ${SRC} expands to the
// source tree and ${GOLDEN} to tests/golden; a directory <case>.d is copied into the working
// directory first (so relative paths in messages stay machine-independent).
// COMPASS_UPDATE_GOLDEN=1 rewrites .out (and .rc) instead of comparing.

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "../test_files.hpp"
#include "subprocess.hpp"

namespace compass::testing {
namespace {

namespace fs = std::filesystem;

struct GoldenCase {
  std::string name;     ///< file stem, e.g. "topo_a6000x8"
  std::string test_id;  ///< sanitised, unique GoogleTest name
};

// Keeps GoogleTest from dumping the struct's bytes in failure messages.
void PrintTo(const GoldenCase& c, std::ostream* os) {
  *os << c.name;
}

fs::path golden_dir() {
  return fs::path(COMPASS_SOURCE_DIR) / "tests" / "golden";
}

std::vector<GoldenCase> discover_cases() {
  std::vector<std::string> stems;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(golden_dir(), ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".cmd") {
      stems.push_back(entry.path().stem().string());
    }
  }
  std::sort(stems.begin(), stems.end());
  std::vector<GoldenCase> cases;
  std::set<std::string> used;
  for (const auto& stem : stems) {
    std::string id;
    for (char c : stem) id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (id.empty()) id = "case";
    std::string unique = id;
    for (int i = 2; used.count(unique) != 0; ++i) unique = id + "_" + std::to_string(i);
    used.insert(unique);
    cases.push_back({stem, unique});
  }
  return cases;
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos;
       pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

double timeout_s() {
  if (const char* v = std::getenv("COMPASS_GOLDEN_TIMEOUT_S")) {
    const double t = std::atof(v);
    if (t > 0) return t;
  }
  return 120.0;
}

bool update_mode() {
  const char* v = std::getenv("COMPASS_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

// A readable account of where two outputs first differ.
std::string first_difference(const std::string& want, const std::string& got) {
  std::istringstream a(want), b(got);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(a, la));
    const bool hb = static_cast<bool>(std::getline(b, lb));
    if (!ha && !hb) return "outputs differ only in the final newline";
    if (!ha || !hb || la != lb) {
      std::ostringstream m;
      m << "first difference at line " << line
        << ":\n  expected: " << (ha ? "\"" + la + "\"" : std::string("<end of output>"))
        << "\n  actual:   " << (hb ? "\"" + lb + "\"" : std::string("<end of output>"));
      return m.str();
    }
  }
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, Matches) {
  const GoldenCase& c = GetParam();
  const fs::path dir = golden_dir();
  const fs::path base = dir / c.name;

  std::string cmd;
  ASSERT_TRUE(read_file_if_exists(base.string() + ".cmd", cmd)) << "cannot read " << c.name << ".cmd";
  cmd = cmd.substr(0, cmd.find('\n'));
  replace_all(cmd, "${SRC}", COMPASS_SOURCE_DIR);
  replace_all(cmd, "${GOLDEN}", dir.string());
  std::vector<std::string> args;
  ASSERT_TRUE(split_command_line(cmd, args)) << c.name << ".cmd: unclosed double quote";
  args.insert(args.begin(), compass_binary());

  TempDir cwd;
  const fs::path data = base.string() + ".d";
  if (fs::is_directory(data)) {
    fs::copy(data, cwd.path(), fs::copy_options::recursive);
  }

  const ProcessResult r = run_process(args, cwd.path(), timeout_s());
  ASSERT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  ASSERT_FALSE(r.timed_out) << "compass " << cmd << ": killed after " << timeout_s() << " s";

  if (update_mode()) {
    write_file(base.string() + ".out", r.out);
    const fs::path rc_path = base.string() + ".rc";
    if (r.exit_code != 0) {
      write_file(rc_path, std::to_string(r.exit_code) + "\n");
    } else {
      std::error_code ec;
      fs::remove(rc_path, ec);  // a stale non-zero expectation would be wrong now
    }
    std::cout << "[ updated  ] " << c.name << " (exit " << r.exit_code << ")\n";
    return;
  }

  int want_rc = 0;
  std::string rc_text;
  if (read_file_if_exists(base.string() + ".rc", rc_text)) {
    std::istringstream in(rc_text);
    ASSERT_TRUE(static_cast<bool>(in >> want_rc)) << c.name << ".rc must hold an integer";
  }
  std::string want_out;
  ASSERT_TRUE(read_file_if_exists(base.string() + ".out", want_out))
      << c.name << ".out is missing; run with COMPASS_UPDATE_GOLDEN=1 to create it";

  EXPECT_EQ(r.exit_code, want_rc) << "compass " << cmd << "\nstderr:\n" << r.err;
  if (r.out != want_out) {
    ADD_FAILURE() << "compass " << cmd << ": stdout differs from " << c.name << ".out\n"
                  << first_difference(want_out, r.out)
                  << (r.out.size() < 6000 ? "\n--- actual stdout ---\n" + r.out : std::string())
                  << "\n(rerun with COMPASS_UPDATE_GOLDEN=1 to accept)";
  }
  std::string want_err;
  if (read_file_if_exists(base.string() + ".err", want_err)) {
    while (!want_err.empty() && (want_err.back() == '\n' || want_err.back() == '\r')) {
      want_err.pop_back();
    }
    EXPECT_TRUE(r.err.find(want_err) != std::string::npos)
        << "stderr lacks the text of " << c.name << ".err: \"" << want_err << "\"\nstderr:\n"
        << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Cli, Golden, ::testing::ValuesIn(discover_cases()),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) {
                           return info.param.test_id;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

TEST(GoldenHarness, SplitsCommandLines) {
  std::vector<std::string> a;
  ASSERT_TRUE(split_command_line("  topo  --profile a6000x8\t--json ", a));
  EXPECT_EQ(a, (std::vector<std::string>{"topo", "--profile", "a6000x8", "--json"}));
  ASSERT_TRUE(split_command_line(R"(op "a b" --name="x y" "" "q\"uote")", a));
  EXPECT_EQ(a, (std::vector<std::string>{"op", "a b", "--name=x y", "", "q\"uote"}));
  EXPECT_FALSE(split_command_line(R"(op "unclosed)", a));
  ASSERT_TRUE(split_command_line("", a));
  EXPECT_TRUE(a.empty());
}

TEST(GoldenHarness, RunsAChildWithPipesAndCwd) {
  TempDir dir;
  const ProcessResult r =
      run_process({"/bin/sh", "-c", "pwd; echo oops >&2; exit 3"}, dir.path(), 30);
  ASSERT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(fs::canonical(r.out.substr(0, r.out.size() - 1)), fs::canonical(dir.path()));
  EXPECT_EQ(r.err, "oops\n");
}

TEST(GoldenHarness, KillsAChildPastTheTimeout) {
  const ProcessResult r = run_process({"/bin/sleep", "30"}, "", 0.3);
  EXPECT_TRUE(r.timed_out);
}

TEST(GoldenHarness, ReportsAMissingBinary) {
  const ProcessResult r = run_process({"/nonexistent/compass"}, "", 5);
  EXPECT_FALSE(r.spawn_error.empty());
}

}  // namespace
}  // namespace compass::testing
