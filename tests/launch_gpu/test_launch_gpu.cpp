// The CUDA backend with one process per GPU (`compass run --backend cuda --launch env`), CTest
// labels "launch" and "gpu". Without a GPU only the first test runs (every process refuses
// with "no CUDA device found", exit 2); the others skip. On one GPU both processes share it:
// the CUDA IPC strategies work with any NCCL, the sequential strategy's communicator needs NCCL
// 2.30+ with NCCL_MULTI_RANK_GPU_ENABLE=1 (which the tests set; `compass doctor` says which
// NCCL loads); with an older NCCL on one GPU the sequential cases skip with that reason.
// Times of two processes sharing one GPU mean nothing: only the checks are asserted.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/subprocess.hpp"
#include "support/ports.hpp"

namespace compass::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Runtime {
  int gpus = 0;
  int nccl_code = 0;  ///< e.g. 23000 for 2.30.0; 0 when no NCCL loads
};

Runtime probe() {
  TempDir dir;
  const ProcessResult r = run_process({compass_binary(), "doctor", "--json"}, dir.path(), 60);
  Runtime rt;
  if (r.exit_code != 0 && r.exit_code != 1) return rt;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded()) return rt;
  rt.gpus = static_cast<int>(j.value("gpus", nlohmann::json::array()).size());
  const auto v = j.value("nccl_version", nlohmann::json());
  if (v.is_string()) {
    int a = 0, b = 0, c = 0;
    if (std::sscanf(v.get<std::string>().c_str(), "%d.%d.%d", &a, &b, &c) == 3)
      rt.nccl_code = a * 10000 + b * 100 + c;
  }
  return rt;
}

const Runtime& runtime() {
  static const Runtime rt = probe();
  return rt;
}

#define REQUIRE_GPU()                                                   \
  do {                                                                  \
    if (runtime().gpus == 0) GTEST_SKIP() << "no GPU (compass doctor)"; \
  } while (0)

struct Timed {
  ProcessResult result;
  double seconds = 0;
};

// `world` processes of `compass run --backend cuda --launch env <args>` on loopback; rank r
// gets LOCAL_RANK=r, so with one GPU every process uses it.
std::vector<Timed> run_world(int world, const std::vector<std::string>& args, double timeout_s) {
  const int port = free_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  std::vector<std::future<Timed>> procs;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv{"/usr/bin/env", "RANK=" + std::to_string(r),
                                  "WORLD_SIZE=" + std::to_string(world),
                                  "LOCAL_RANK=" + std::to_string(r), "MASTER_ADDR=127.0.0.1",
                                  "MASTER_PORT=" + std::to_string(port),
                                  "NCCL_MULTI_RANK_GPU_ENABLE=1", compass_binary(), "run",
                                  "--backend", "cuda", "--launch", "env"};
    argv.insert(argv.end(), args.begin(), args.end());
    procs.push_back(std::async(std::launch::async, [argv, timeout_s] {
      TempDir dir;
      const auto start = Clock::now();
      Timed t{run_process(argv, dir.path(), timeout_s), 0};
      t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return t;
    }));
  }
  std::vector<Timed> out;
  for (auto& p : procs) out.push_back(p.get());
  return out;
}

std::vector<std::string> shape(const std::string& op, const std::string& strategy) {
  return {"--op", op, "--m", "1024", "--n", "512", "--k", "768", "--tp", "2", "--dtype", "bf16",
          "--strategy", strategy};
}

TEST(CudaProcesses, WithoutAGpuEveryProcessRefusesAtOnce) {
  if (runtime().gpus > 0) GTEST_SKIP() << "a GPU is present";
  const auto procs = run_world(2, shape("ag_gemm", "fuse:ring"), 60);
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r;
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r;
    EXPECT_NE(procs[r].result.err.find("no CUDA device found"), std::string::npos)
        << procs[r].result.err;
    EXPECT_LT(procs[r].seconds, 20.0);
  }
}

struct Case {
  std::string op;
  std::string strategy;
};

class CudaProcessRun : public ::testing::TestWithParam<Case> {};

TEST_P(CudaProcessRun, TwoProcessesPassTheCheck) {
  REQUIRE_GPU();
  const Case c = GetParam();
  if (c.strategy == "sequential" && runtime().gpus < 2 && runtime().nccl_code < 23000)
    GTEST_SKIP() << "one GPU and an NCCL that refuses two ranks on it (needs 2.30+)";
  auto args = shape(c.op, c.strategy);
  args.insert(args.end(), {"--check", "--repeat", "2", "--warmup", "1", "--json"});
  const auto procs = run_world(2, args, 180);
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r;
    ASSERT_EQ(procs[r].result.exit_code, 0) << "rank " << r << ": " << procs[r].result.err;
  }
  EXPECT_TRUE(procs[1].result.out.empty()) << "only rank 0 reports";
  const auto j = nlohmann::json::parse(procs[0].result.out);
  EXPECT_EQ(j.at("launch"), "env");
  EXPECT_TRUE(j.at("passed").get<bool>()) << procs[0].result.out;
  ASSERT_EQ(j.at("results").size(), 1u);
  const auto& res = j.at("results")[0];
  EXPECT_TRUE(res.at("check").at("pass").get<bool>());
  EXPECT_EQ(res.at("sync"), c.strategy == "sequential" ? "nccl" : "events and ipc flags");
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (const char* op : {"ag_gemm", "gemm_rs", "gemm_ar"})
    for (const char* st : {"sequential", "decompose:2", "fuse:all2all", "fuse:ring",
                           "fuse:double-ring", "fuse:hier", "fuse:synth"})
      v.push_back({op, st});
  return v;
}

INSTANTIATE_TEST_SUITE_P(OpsAndStrategies, CudaProcessRun, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string name = info.param.op + "_" + info.param.strategy;
                           for (char& ch : name)
                             if (ch == ':' || ch == '-') ch = '_';
                           return name;
                         });

// The last GEMM of `rank` in the schedule `compass schedule` prints for these arguments.
int gemm_of_rank(const std::vector<std::string>& args, int rank) {
  std::vector<std::string> argv{compass_binary(), "schedule"};
  for (const auto& a : args) argv.push_back(a);
  argv.push_back("--json");
  TempDir dir;
  const ProcessResult r = run_process(argv, dir.path(), 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  int found = -1;
  for (const auto& task : nlohmann::json::parse(r.out).at("tasks"))
    if (task.at("rank") == rank && task.at("kind") == "gemm") found = task.at("id");
  return found;
}

void expect_failure_reaches_everyone(const std::string& strategy) {
  const auto args = shape("gemm_rs", strategy);
  const int task = gemm_of_rank(args, 1);
  ASSERT_GE(task, 0);
  auto run_args = args;
  run_args.insert(run_args.end(), {"--repeat", "1", "--warmup", "0", "--wait-timeout", "20",
                                   "--fault-task", std::to_string(task)});
  const auto procs = run_world(2, run_args, 120);
  const std::string failing = "rank 1 task " + std::to_string(task) + " ";
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r << " hung";
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r;
    EXPECT_NE(procs[r].result.err.find("[rank " + std::to_string(r) + " of 2]"),
              std::string::npos)
        << procs[r].result.err;
    EXPECT_NE(procs[r].result.err.find(failing), std::string::npos) << procs[r].result.err;
    // The failure is announced: nobody waits for the 20 s timeout.
    EXPECT_LT(procs[r].seconds, 15.0) << procs[r].result.err;
  }
}

TEST(CudaProcessFailure, OneRankFailsEveryRankExitsNamingItIpc) {
  REQUIRE_GPU();
  expect_failure_reaches_everyone("fuse:ring");
}

TEST(CudaProcessFailure, OneRankFailsEveryRankExitsNamingItNccl) {
  REQUIRE_GPU();
  if (runtime().gpus < 2 && runtime().nccl_code < 23000)
    GTEST_SKIP() << "one GPU and an NCCL that refuses two ranks on it (needs 2.30+)";
  expect_failure_reaches_everyone("sequential");
}

TEST(CudaProcessFailure, ARankThatNeverStartsIsATimeoutNotAHang) {
  REQUIRE_GPU();
  auto args = shape("ag_gemm", "fuse:ring");
  args.insert(args.end(), {"--launch-timeout", "3"});  // rank 1 is never started
  const int port = free_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  TempDir dir;
  const auto start = Clock::now();
  std::vector<std::string> argv{"/usr/bin/env", "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0",
                                "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                                compass_binary(), "run", "--backend", "cuda", "--launch", "env"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv, dir.path(), 60);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(r.timed_out) << "rank 0 hung";
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("[rank 0 of 2]"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace compass::testing
