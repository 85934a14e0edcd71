// compass doctor: one line per item, exit 0 whatever is missing, and "no GPU" when the driver
// cannot be loaded (as on a machine without an NVIDIA driver).

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
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
  const std::vector<std::string> want{"cpu",    "cuda-backend", "driver", "gpus",  "p2p",
                                      "multicast", "cuda-ipc", "cudart", "cublas", "nccl",
                                      "mpi",    "env-launch", "torch",  "te",    "megatron-core",
                                      "max-conn"};
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
  ASSERT_EQ(j.at("items").size(), 16u);
  for (const auto& item : j.at("items"))
    EXPECT_NE(text.out.find(item.at("item").get<std::string>()), std::string::npos);
  if (!driver_loadable()) {
    EXPECT_TRUE(j.at("gpus").empty());
    EXPECT_TRUE(j.at("peer_access").empty());
  }
}

// The line of `item` in doctor's text output, or "".
std::string line_of(const std::string& out, const std::string& item) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(item + " ", 0) == 0) return line;
  return "";
}

// Sets an environment variable for the scope (doctor's child inherits it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void write_script(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0755);
}

// A program that never answers (and leaves a child holding its output open) must not hang
// doctor: each external program runs with a timeout and is killed with its process group.
TEST(Doctor, HangingProgramsTimeOut) {
  TempDir bin;
  const std::string hang = "#!/bin/sh\n/bin/sleep 1000 &\nexec /bin/sleep 1000\n";
  write_script(bin.path() + "/mpirun", hang);
  write_script(bin.path() + "/python3", hang);
  ScopedEnv path("PATH", bin.path());
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = doctor({});
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, 40.0);
  EXPECT_NE(line_of(r.out, "mpi").find("no answer to --version"), std::string::npos) << r.out;
  EXPECT_NE(line_of(r.out, "torch").find("no answer"), std::string::npos) << r.out;
}

// A program path with shell metacharacters is run as itself, never through a shell.
TEST(Doctor, ProgramPathIsNotShellText) {
  TempDir bin;
  const std::string dir = bin.path() + "/a;touch PWNED;b";
  ASSERT_EQ(mkdir(dir.c_str(), 0755), 0);
  write_script(dir + "/mpirun", "#!/bin/sh\necho 'fake mpirun 1.0'\n");
  ScopedEnv path("PATH", dir);
  const ProcessResult r = doctor({});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(line_of(r.out, "mpi").find("fake mpirun 1.0"), std::string::npos) << r.out;
  struct stat st {};
  EXPECT_NE(stat((bin.path() + "/PWNED").c_str(), &st), 0);
}

TEST(Doctor, MaxConnectionsFollowsTheEnvironment) {
  {
    ScopedEnv v("CUDA_DEVICE_MAX_CONNECTIONS", "1");
    EXPECT_NE(line_of(doctor({}).out, "max-conn").find(" ok "), std::string::npos);
  }
  ScopedEnv v("CUDA_DEVICE_MAX_CONNECTIONS", "8");
  const std::string line = line_of(doctor({}).out, "max-conn");
  EXPECT_NE(line.find(" warn "), std::string::npos) << line;
  EXPECT_NE(line.find("'8'"), std::string::npos) << line;
}

TEST(Doctor, BadFlagIsExitTwo) {
  const ProcessResult r = doctor({"--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace compass::testing
