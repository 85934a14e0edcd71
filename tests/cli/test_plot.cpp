// compass plot: a plan, a sweep and a simulation trace each become a non-empty PNG; bad input
// and existing files are one-line errors.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "subprocess.hpp"

namespace compass::testing {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

// The first bytes of every PNG file.
bool is_png(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  char head[8] = {};
  f.read(head, 8);
  return f && std::string(head, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

TEST(Plot, PlanSweepAndTimeline) {
  TempDir dir;
  const fs::path d = dir.path();
  ProcessResult r = compass_in(d, {"plan", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  write(d / "plan.json", r.out);
  r = compass_in(d, {"sweep", "--limit", "12", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  write(d / "sweep.json", r.out);
  r = compass_in(d, {"simulate", "--op", "ag_gemm", "--m", "1024", "--n", "512", "--k", "256",
                     "--tp", "2", "--strategy", "fuse:ring", "--trace", "trace.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [in, kind] : {std::pair{"plan", "plan"}, {"sweep", "sweep"},
                                 {"trace", "timeline"}}) {
    const std::string png = std::string(in) + ".png";
    r = compass_in(d, {"plot", std::string(in) + ".json", "--out", png});
    ASSERT_EQ(r.exit_code, 0) << in << ": " << r.err;
    EXPECT_EQ(r.out, "wrote " + png + " (" + kind + ")\n");
    EXPECT_TRUE(is_png(d / png)) << png;
    EXPECT_GT(fs::file_size(d / png), 10000u) << png;  // axes, bars and labels, not a blank
  }
  // An existing image is kept without --force.
  r = compass_in(d, {"plot", "plan.json", "--out", "plan.png"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--force"), std::string::npos);
}

TEST(Plot, BadInputIsOneLine) {
  TempDir dir;
  write(fs::path(dir.path()) / "x.json", "{\"a\": 1}");
  ProcessResult r = compass_in(dir.path(), {"plot", "x.json", "--out", "x.png"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a plan, sweep or simulation trace"), std::string::npos) << r.err;
  r = compass_in(dir.path(), {"plot", "missing.json", "--out", "x.png"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_FALSE(fs::exists(fs::path(dir.path()) / "x.png"));
}

}  // namespace
}  // namespace compass::testing
