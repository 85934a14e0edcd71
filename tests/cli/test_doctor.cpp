// compass doctor: one line per item, exit 0 whatever is missing, and "no GPU" when the driver
// cannot be loaded (as on a machine without an NVIDIA driver).

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "subprocess.hpp"

namespace compass::testing {
namespace {

ProcessResult doctor(const std::vector<std::string>& args) {
  std::vector<std::string> argv{compass_binary(), "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  TempDir dir;
  ProcessResult r = run_process(argv, dir.path(), 60);
  EXPECT_TRUE(r.spawn_error.empty()) << r.spawn_error;
  EXPECT_FALSE(r.timed_out);
  return r;
}

bool driver_loadable() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

TEST(Doctor, OneLinePerItemAndExitZero) {
  const ProcessResult r = doctor({});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::string> items;
  while (std::getline(lines, line) && !line.empty()) {
    std::istringstream words(line);
    std::string item, verdict;
    words >> item >> verdict;
    EXPECT_TRUE(verdict == "ok" || verdict == "warn" || verdict == "missing") << line;
    items.push_back(item);
  }
  const std::vector<std::string> want{"cpu", "cuda-backend", "driver", "gpus", "p2p",
                                      "cuda-ipc", "nccl", "mpi", "env-launch"};
  EXPECT_EQ(items, want) << r.out;
}

TEST(Doctor, SaysNoGpuWithoutADriver) {
  if (driver_loadable()) GTEST_SKIP() << "an NVIDIA driver is installed here";
  const ProcessResult r = doctor({});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("gpus          missing  no GPU\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("libcuda.so.1 not loadable"), std::string::npos) << r.out;
}

TEST(Doctor, JsonHasTheSameItems) {
  const ProcessResult text = doctor({});
  const ProcessResult r = doctor({"--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("items").size(), 9u);
  for (const auto& item : j.at("items"))
    EXPECT_NE(text.out.find(item.at("item").get<std::string>()), std::string::npos);
  if (!driver_loadable()) {
    EXPECT_TRUE(j.at("gpus").empty());
    EXPECT_TRUE(j.at("peer_access").empty());
  }
}

TEST(Doctor, BadFlagIsExitTwo) {
  const ProcessResult r = doctor({"--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace compass::testing
