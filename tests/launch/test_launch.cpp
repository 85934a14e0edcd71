// Multi-process runs of the CPU backend: `compass run --launch mpi` under mpirun for every
// operator and strategy at p = 2, 3, 4 against the FP64 reference and the threaded executor,
// failure injection (one rank fails a task: every rank exits non-zero, naming it, quickly) and
// a rank that never starts (a timeout error, not a hang); studies shared among the processes of
// an MPI job (sweep --sim, search --refine sim): the same bytes as one process, and a failing
// rank ending the job.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/subprocess.hpp"
#include "support/ports.hpp"
#include "test_files.hpp"

namespace compass::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string mpiexec() { return COMPASS_MPIEXEC; }

#define REQUIRE_MPIRUN()                                                   \
  do {                                                                     \
    if (mpiexec().empty()) GTEST_SKIP() << "no mpirun found at configure time"; \
  } while (0)

struct Timed {
  ProcessResult result;
  double seconds = 0;
};

Timed run_timed(const std::vector<std::string>& argv, double timeout_s) {
  TempDir dir;
  const auto start = Clock::now();
  Timed t{run_process(argv, dir.path(), timeout_s), 0};
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_TRUE(t.result.spawn_error.empty()) << t.result.spawn_error;
  return t;
}

std::vector<std::string> mpirun(int np, const std::vector<std::string>& compass_args) {
  std::vector<std::string> argv{mpiexec(), "-np", std::to_string(np), "--oversubscribe",
                                "--allow-run-as-root", compass_binary()};
  argv.insert(argv.end(), compass_args.begin(), compass_args.end());
  return argv;
}

// Small shapes: M = 96 rows split into p blocks of 4 decomposition parts for p = 2, 3, 4.
std::vector<std::string> run_args(const std::string& op, int p, const std::string& launch) {
  return {"run",      "--backend", "cpu",  "--launch", launch,    "--op",     op,
          "--m",      "96",        "--n",  "48",       "--k",     "36",       "--tp",
          std::to_string(p), "--strategy", "all", "--check", "--repeat", "1", "--warmup", "0",
          "--json"};
}

struct Case {
  std::string op;
  int p;
};

// `--strategy all`: sequential, decompose:d* (the planner's degree), fuse:all2all, fuse:ring,
// fuse:double-ring, fuse:hier and fuse:synth.
constexpr std::size_t kStrategies = 7;

class MpiRun : public ::testing::TestWithParam<Case> {};

TEST_P(MpiRun, EveryStrategyPassesTheCheckAndMatchesThreads) {
  REQUIRE_MPIRUN();
  const Case c = GetParam();
  const Timed mpi = run_timed(mpirun(c.p, run_args(c.op, c.p, "mpi")), 240);
  ASSERT_FALSE(mpi.result.timed_out);
  ASSERT_EQ(mpi.result.exit_code, 0) << mpi.result.err;
  const auto j = nlohmann::json::parse(mpi.result.out);
  EXPECT_EQ(j.at("launch"), "mpi");
  EXPECT_TRUE(j.at("passed").get<bool>());
  ASSERT_EQ(j.at("results").size(), kStrategies);

  // The same schedules on threads: one process per rank must compute the very same numbers.
  std::vector<std::string> threads{compass_binary()};
  for (const auto& a : run_args(c.op, c.p, "threads")) threads.push_back(a);
  const Timed thr = run_timed(threads, 120);
  ASSERT_EQ(thr.result.exit_code, 0) << thr.result.err;
  const auto t = nlohmann::json::parse(thr.result.out);
  ASSERT_EQ(t.at("results").size(), kStrategies);
  for (std::size_t i = 0; i < kStrategies; ++i) {
    const auto& m = j.at("results")[i];
    const auto& h = t.at("results")[i];
    EXPECT_EQ(m.at("strategy"), h.at("strategy"));
    EXPECT_TRUE(m.at("check").at("pass").get<bool>()) << m.at("strategy");
    // Both runs add the same partial products in the same order: bit-identical outputs.
    EXPECT_EQ(m.at("check").at("max_abs_error").get<double>(),
              h.at("check").at("max_abs_error").get<double>())
        << m.at("strategy");
    EXPECT_EQ(m.at("threads"), h.at("threads")) << m.at("strategy");
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* op : {"ag_gemm", "gemm_rs", "gemm_ar"})
    for (int p : {2, 3, 4}) out.push_back({op, p});
  return out;
}

INSTANTIATE_TEST_SUITE_P(OpsAndRanks, MpiRun, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return info.param.op + "_p" + std::to_string(info.param.p);
                         });

// A task of `rank` in the schedule `compass schedule` prints for these arguments.
int task_of_rank(const std::vector<std::string>& schedule_args, int rank) {
  std::vector<std::string> argv{compass_binary(), "schedule"};
  argv.insert(argv.end(), schedule_args.begin(), schedule_args.end());
  argv.push_back("--json");
  const Timed t = run_timed(argv, 60);
  EXPECT_EQ(t.result.exit_code, 0) << t.result.err;
  const auto j = nlohmann::json::parse(t.result.out);
  int found = -1;
  for (const auto& task : j.at("tasks"))
    if (task.at("rank") == rank && task.at("kind") == "gemm") found = task.at("id");
  return found;  // the last GEMM of that rank: everyone else is waiting by then
}

TEST(MpiFailure, OneRankFailsEveryRankExitsNamingIt) {
  REQUIRE_MPIRUN();
  const std::vector<std::string> shape{"--op", "gemm_rs", "--m", "96", "--n", "48", "--k", "36",
                                       "--tp", "4", "--strategy", "fuse:ring"};
  const int task = task_of_rank(shape, 2);
  ASSERT_GE(task, 0);
  std::vector<std::string> args{"run", "--backend", "cpu", "--launch", "mpi", "--repeat", "1",
                                "--warmup", "0", "--fault-task", std::to_string(task)};
  args.insert(args.end(), shape.begin(), shape.end());
  const Timed t = run_timed(mpirun(4, args), 60);
  ASSERT_FALSE(t.result.timed_out);
  EXPECT_NE(t.result.exit_code, 0);
  RecordProperty("seconds", std::to_string(t.seconds));
  // Every process reports, and every report names the failing rank's task.
  const std::string failing = "rank 2 task " + std::to_string(task) + " ";
  for (int r = 0; r < 4; ++r) {
    const std::string tag = "[rank " + std::to_string(r) + " of 4]";
    const auto at = t.result.err.find(tag);
    ASSERT_NE(at, std::string::npos) << tag << " missing in:\n" << t.result.err;
    const std::string line = t.result.err.substr(at, t.result.err.find('\n', at) - at);
    EXPECT_NE(line.find(failing), std::string::npos) << line;
  }
  // mpirun itself takes about a second to start and stop four processes here.
  EXPECT_LT(t.seconds, 15.0) << t.result.err;
}

TEST(MpiFailure, ARankThatNeverStartsIsATimeoutNotAHang) {
  REQUIRE_MPIRUN();
  const std::vector<std::string> args{"run", "--backend", "cpu", "--launch", "mpi",
                                      "--op", "ag_gemm", "--m", "96", "--n", "48", "--k", "36",
                                      "--tp", "3", "--strategy", "sequential",
                                      "--launch-timeout", "3", "--fault-stall-rank", "1"};
  const Timed t = run_timed(mpirun(3, args), 90);
  ASSERT_FALSE(t.result.timed_out) << "the job hung";
  EXPECT_NE(t.result.exit_code, 0);
  EXPECT_NE(t.result.err.find("never started"), std::string::npos) << t.result.err;
  EXPECT_LT(t.seconds, 30.0);
}

// A rank that fails outside a run (here: preparing its schedule) tells the others, which stop
// with its error at their next exchange instead of waiting for it.
TEST(MpiFailure, ARankThatFailsBeforeItsRunStopsTheOthersWithItsError) {
  REQUIRE_MPIRUN();
  std::vector<std::string> args = run_args("gemm_rs", 3, "mpi");
  args.insert(args.end(), {"--fault-prepare-rank", "1"});
  const Timed t = run_timed(mpirun(3, args), 60);
  ASSERT_FALSE(t.result.timed_out) << "the job hung";
  EXPECT_NE(t.result.exit_code, 0);
  for (int r = 0; r < 3; ++r) {
    const std::string tag = "[rank " + std::to_string(r) + " of 3]";
    const auto at = t.result.err.find(tag);
    ASSERT_NE(at, std::string::npos) << tag << " missing in:\n" << t.result.err;
    const std::string line = t.result.err.substr(at, t.result.err.find('\n', at) - at);
    EXPECT_NE(line.find("injected fault while preparing"), std::string::npos) << line;
  }
}

TEST(MpiFailure, WrongProcessCountIsAnError) {
  REQUIRE_MPIRUN();
  std::vector<std::string> args = run_args("ag_gemm", 3, "mpi");
  const Timed t = run_timed(mpirun(2, args), 60);
  ASSERT_FALSE(t.result.timed_out);
  EXPECT_NE(t.result.exit_code, 0);
  EXPECT_NE(t.result.err.find("2 processes were started but --tp is 3"), std::string::npos)
      << t.result.err;
}

// ---- Ranks given different runs: refused before any work, naming the difference ------------

// `args` with the value of `flag` replaced.
std::vector<std::string> with(std::vector<std::string> args, const std::string& flag,
                              const std::string& value) {
  const auto at = std::find(args.begin(), args.end(), flag);
  EXPECT_NE(at, args.end()) << flag;
  if (at != args.end()) *(at + 1) = value;
  return args;
}

// mpirun starting one process per argument list (MPMD: "-np 1 prog args : -np 1 prog args").
std::vector<std::string> mpirun_each(const std::vector<std::vector<std::string>>& per_rank) {
  std::vector<std::string> argv{mpiexec(), "--oversubscribe", "--allow-run-as-root"};
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    if (r > 0) argv.push_back(":");
    argv.insert(argv.end(), {"-np", "1", compass_binary()});
    argv.insert(argv.end(), per_rank[r].begin(), per_rank[r].end());
  }
  return argv;
}

TEST(MpiDisagreement, ADifferentShapeIsRefusedNamingTheFlag) {
  REQUIRE_MPIRUN();
  const std::vector<std::string> args = run_args("ag_gemm", 2, "mpi");
  const Timed t = run_timed(mpirun_each({args, with(args, "--m", "128")}), 60);
  ASSERT_FALSE(t.result.timed_out) << "the job hung";
  EXPECT_EQ(t.result.exit_code, 2) << t.result.err;
  // mpirun forwards both processes' stderr into one stream.
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(t.result.err.find("[rank " + std::to_string(r) +
                                " of 2] the ranks were given different runs: rank 1 was given "
                                "--m 128 where rank 0 was given --m 96"),
              std::string::npos)
        << t.result.err;
  EXPECT_EQ(t.result.err.find("corrupted"), std::string::npos) << t.result.err;
}

TEST(MpiDisagreement, ADifferentStrategyIsRefusedInsteadOfHanging) {
  REQUIRE_MPIRUN();
  const std::vector<std::string> args =
      with(run_args("gemm_rs", 2, "mpi"), "--strategy", "fuse:ring");
  const Timed t = run_timed(mpirun_each({args, with(args, "--strategy", "sequential")}), 60);
  ASSERT_FALSE(t.result.timed_out) << "the job hung";
  EXPECT_EQ(t.result.exit_code, 2) << t.result.err;
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(t.result.err.find("[rank " + std::to_string(r) +
                                " of 2] the ranks were given different runs: rank 1 was given "
                                "--strategy sequential where rank 0 was given --strategy "
                                "fuse:ring"),
              std::string::npos)
        << t.result.err;
}

// ---- --launch env: processes started as torchrun starts them, on loopback ---------------------

// Starts `world` processes with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (through
// env(1), since run_process passes no environment), skipping ranks in `absent`.
std::vector<Timed> run_env_each(int world, const std::vector<std::vector<std::string>>& per_rank,
                                const std::vector<int>& absent = {}, double timeout_s = 240) {
  const int port = free_port();
  EXPECT_NE(port, 0) << "no free loopback port";
  std::vector<std::future<Timed>> procs;
  for (int r = 0; r < world; ++r) {
    if (std::find(absent.begin(), absent.end(), r) != absent.end()) continue;
    const std::vector<std::string>& compass_args = per_rank[r];
    std::vector<std::string> argv{"/usr/bin/env",
                                  "RANK=" + std::to_string(r),
                                  "WORLD_SIZE=" + std::to_string(world),
                                  "LOCAL_RANK=" + std::to_string(r),
                                  "MASTER_ADDR=127.0.0.1",
                                  "MASTER_PORT=" + std::to_string(port),
                                  compass_binary()};
    argv.insert(argv.end(), compass_args.begin(), compass_args.end());
    procs.push_back(std::async(std::launch::async, [argv, timeout_s] { return run_timed(argv, timeout_s); }));
  }
  std::vector<Timed> out;
  for (auto& p : procs) out.push_back(p.get());
  return out;
}

std::vector<Timed> run_env_world(int world, const std::vector<std::string>& compass_args,
                                 const std::vector<int>& absent = {}, double timeout_s = 240) {
  return run_env_each(world, std::vector<std::vector<std::string>>(world, compass_args), absent,
                      timeout_s);
}

class EnvRun : public ::testing::TestWithParam<Case> {};

TEST_P(EnvRun, EveryStrategyPassesTheCheck) {
  const Case c = GetParam();
  const std::vector<Timed> procs = run_env_world(c.p, run_args(c.op, c.p, "env"));
  ASSERT_EQ(procs.size(), static_cast<std::size_t>(c.p));
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r;
    ASSERT_EQ(procs[r].result.exit_code, 0) << "rank " << r << ": " << procs[r].result.err;
    if (r > 0) {
      EXPECT_TRUE(procs[r].result.out.empty()) << "only rank 0 reports";
    }
  }
  const auto j = nlohmann::json::parse(procs[0].result.out);
  EXPECT_EQ(j.at("launch"), "env");
  EXPECT_TRUE(j.at("passed").get<bool>());
  ASSERT_EQ(j.at("results").size(), kStrategies);
  for (const auto& res : j.at("results"))
    EXPECT_TRUE(res.at("check").at("pass").get<bool>()) << res.at("strategy");
}

std::vector<Case> env_cases() {
  std::vector<Case> out;
  for (const char* op : {"ag_gemm", "gemm_rs", "gemm_ar"}) out.push_back({op, 3});
  out.push_back({"gemm_rs", 2});
  out.push_back({"ag_gemm", 4});
  return out;
}

INSTANTIATE_TEST_SUITE_P(OpsAndRanks, EnvRun, ::testing::ValuesIn(env_cases()),
                         [](const auto& info) {
                           return info.param.op + "_p" + std::to_string(info.param.p);
                         });

TEST(EnvFailure, OneRankFailsEveryRankExitsNamingIt) {
  const std::vector<std::string> shape{"--op", "ag_gemm", "--m", "96", "--n", "48", "--k", "36",
                                       "--tp", "3", "--strategy", "fuse:double-ring"};
  const int task = task_of_rank(shape, 1);
  ASSERT_GE(task, 0);
  std::vector<std::string> args{"run", "--backend", "cpu", "--launch", "env", "--repeat", "1",
                                "--warmup", "0", "--fault-task", std::to_string(task)};
  args.insert(args.end(), shape.begin(), shape.end());
  const std::vector<Timed> procs = run_env_world(3, args, {}, 60);
  const std::string failing = "rank 1 task " + std::to_string(task) + " ";
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r << " hung";
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r;
    EXPECT_NE(procs[r].result.err.find("[rank " + std::to_string(r) + " of 3]"), std::string::npos)
        << procs[r].result.err;
    EXPECT_NE(procs[r].result.err.find(failing), std::string::npos) << procs[r].result.err;
    EXPECT_LT(procs[r].seconds, 10.0) << procs[r].result.err;
  }
}

TEST(EnvFailure, ARankThatFailsBeforeItsRunStopsTheOthersWithItsError) {
  std::vector<std::string> args = run_args("ag_gemm", 3, "env");
  args.insert(args.end(), {"--fault-prepare-rank", "2"});
  const std::vector<Timed> procs = run_env_world(3, args, {}, 60);
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r << " hung";
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r;
    EXPECT_NE(procs[r].result.err.find("[rank " + std::to_string(r) + " of 3]"), std::string::npos)
        << procs[r].result.err;
    EXPECT_NE(procs[r].result.err.find("injected fault while preparing"), std::string::npos)
        << procs[r].result.err;
  }
}

TEST(EnvFailure, ARankThatNeverStartsIsATimeoutNotAHang) {
  std::vector<std::string> args = run_args("ag_gemm", 3, "env");
  args.insert(args.end(), {"--launch-timeout", "2"});
  const std::vector<Timed> procs = run_env_world(3, args, {2}, 60);
  ASSERT_EQ(procs.size(), 2u);
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r << " hung";
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r;
    EXPECT_NE(procs[r].result.err.find("[rank " + std::to_string(r) + " of 3]"), std::string::npos)
        << procs[r].result.err;
    EXPECT_LT(procs[r].seconds, 20.0);
  }
}

TEST(EnvDisagreement, ADifferentShapeIsRefusedNamingTheFlag) {
  const std::vector<std::string> args = run_args("ag_gemm", 3, "env");
  const std::vector<Timed> procs = run_env_each(3, {args, args, with(args, "--m", "192")}, {}, 60);
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r << " hung";
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r << ": " << procs[r].result.err;
    EXPECT_NE(procs[r].result.err.find("[rank " + std::to_string(r) +
                                       " of 3] the ranks were given different runs: rank 2 was "
                                       "given --m 192 where rank 0 was given --m 96"),
              std::string::npos)
        << procs[r].result.err;
  }
}

TEST(EnvDisagreement, ADifferentStrategyIsRefusedInsteadOfHanging) {
  const std::vector<std::string> args =
      with(run_args("gemm_ar", 2, "env"), "--strategy", "fuse:ring");
  const std::vector<Timed> procs =
      run_env_each(2, {args, with(args, "--strategy", "fuse:all2all")}, {}, 60);
  for (std::size_t r = 0; r < procs.size(); ++r) {
    ASSERT_FALSE(procs[r].result.timed_out) << "rank " << r << " hung";
    EXPECT_EQ(procs[r].result.exit_code, 2) << "rank " << r;
    EXPECT_NE(procs[r].result.err.find("rank 1 was given --strategy fuse:all2all where rank 0 was "
                                       "given --strategy fuse:ring"),
              std::string::npos)
        << procs[r].result.err;
  }
}

TEST(EnvFailure, MissingVariableIsNamed) {
  const Timed t = run_timed({"/usr/bin/env", "-u", "RANK", "-u", "MASTER_ADDR", "WORLD_SIZE=2",
                             compass_binary(), "run", "--backend", "cpu", "--launch", "env",
                             "--op", "ag_gemm", "--m", "8", "--n", "4", "--k", "4", "--tp", "2"},
                            30);
  EXPECT_EQ(t.result.exit_code, 2);
  EXPECT_NE(t.result.err.find("RANK is not set"), std::string::npos) << t.result.err;
}

// ---- Studies shared among MPI processes: the output of one process, byte for byte ----------

struct Output {
  ProcessResult result;
  std::string file;  ///< the JSON file the command wrote ("" when none)
};

// `compass <args> --json-out out.json` in a directory of its own, under mpirun -np `np` (np 0:
// one process without mpirun).
Output study_output(int np, std::vector<std::string> args) {
  TempDir dir;
  args.insert(args.end(), {"--json-out", "out.json"});
  std::vector<std::string> argv{compass_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Output o{run_process(np == 0 ? argv : mpirun(np, args), dir.path(), 300), ""};
  EXPECT_TRUE(o.result.spawn_error.empty()) << o.result.spawn_error;
  EXPECT_FALSE(o.result.timed_out) << "np " << np;
  read_file_if_exists(dir.path() + "/out.json", o.file);
  return o;
}

void expect_same_output_on_2_and_3_ranks(const std::vector<std::string>& args) {
  const Output one = study_output(0, args);
  ASSERT_EQ(one.result.exit_code, 0) << one.result.err;
  ASSERT_FALSE(one.file.empty());
  for (int np : {2, 3}) {
    const Output many = study_output(np, args);
    ASSERT_EQ(many.result.exit_code, 0) << "np " << np << ": " << many.result.err;
    EXPECT_EQ(many.result.out, one.result.out) << "np " << np;
    EXPECT_EQ(many.file, one.file) << "np " << np;
  }
}

TEST(MpiSpread, SimulatedSweepIsTheOneProcessOutput) {
  REQUIRE_MPIRUN();
  // 7 rows: ranks of 2 and 3 get unequal shares.
  expect_same_output_on_2_and_3_ranks({"sweep", "--sim", "--limit", "7", "--csv", "rows.csv", "--progress", "none"});
}

TEST(MpiSpread, SimulatedSweepOverProfilesIsTheOneProcessTable) {
  REQUIRE_MPIRUN();
  const std::vector<std::string> args{"sweep", "--sim", "--limit", "4", "--progress", "none",
                                      "--profiles", "a6000x8,h100x8"};
  TempDir dir;
  std::vector<std::string> argv{compass_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult one = run_process(argv, dir.path(), 300);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const ProcessResult three = run_process(mpirun(3, args), dir.path(), 300);
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_EQ(three.out, one.out);
}

TEST(MpiSpread, SearchRefinedBySimulationIsTheOneProcessOutput) {
  REQUIRE_MPIRUN();
  expect_same_output_on_2_and_3_ranks(
      {"search", "--gpus", "64", "--top", "5", "--refine", "sim"});
}

TEST(MpiSpread, AFailingRankEndsTheJobWithItsError) {
  REQUIRE_MPIRUN();
  for (int failing : {0, 1}) {
    // The whole grid simulated takes tens of seconds; the failure ends the job in about one.
    const auto start = Clock::now();
    const Output o = study_output(2, {"sweep", "--sim", "--progress", "none", "--fault-rank",
                                     std::to_string(failing)});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_NE(o.result.exit_code, 0);
    EXPECT_NE(o.result.err.find("[rank " + std::to_string(failing) +
                                " of 2] injected failure (--fault-rank)"),
              std::string::npos)
        << o.result.err;
    EXPECT_TRUE(o.file.empty()) << "rank 0 wrote its output after a rank failed";
    EXPECT_LT(seconds, 15) << "the other rank went on with its share";
  }
}

TEST(MpiSpread, RanksGivenDifferentStudiesAreRefused) {
  REQUIRE_MPIRUN();
  const std::vector<std::string> args{"sweep", "--sim", "--limit", "4", "--progress", "none"};
  const Timed t = run_timed(mpirun_each({args, with(args, "--limit", "5")}), 60);
  ASSERT_FALSE(t.result.timed_out) << "the job hung";
  EXPECT_EQ(t.result.exit_code, 2) << t.result.err;
  EXPECT_NE(t.result.err.find("rank 1 was given --limit 5 where rank 0 was given --limit 4"),
            std::string::npos)
      << t.result.err;
}

}  // namespace
}  // namespace compass::testing
