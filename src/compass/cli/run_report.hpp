#pragma once
// The flags of `compass run` and how its report is printed: a table, or JSON with --json.

#include <nlohmann/json.hpp>
#include <string>

#include "compass/cli/common.hpp"
#include "compass/study/run_operator.hpp"

namespace compass::cli {

struct RunArgs {
  std::string backend = "cpu";
  std::string launch;  ///< empty = the backend's default (cpu: threads, cuda: virtual)
  std::string sync = "events";
  std::string kernel;  ///< cuda: fused or chunked; empty = fused where it can run
  std::string op;
  std::int64_t m = 0, n = 0, k = 0;
  int tp = 0;        ///< 0 = not given (then --gpus gives it)
  std::string gpus;  ///< the TP group on the profile, e.g. "0,1,4,5"; empty = 0..tp-1
  std::string strategy = "all";
  std::string profile = "a6000x8";
  std::string dtype = "fp32";
  bool check = false;
  int repeat = 5;
  int warmup = 1;
  std::int64_t seed = 1;
  JsonOutput json;
  bool force = false;
  int threads_per_rank = 1;
  double wait_timeout_s = 0;
  std::string links;             ///< "emulated:<preset|file>", empty = plain memcpy
  double link_scale = 1.0;       ///< factor on every emulated link bandwidth
  double launch_timeout_s = 60;  ///< bound on starting the processes of a multi-process run
  // Fault injection for tests (hidden flags).
  int fault_task = -1;        ///< the process that owns this task fails it
  int fault_stall_rank = -1;  ///< this rank never starts (sleeps before joining)
  int fault_prepare_rank = -1;  ///< this rank fails to prepare its first schedule
};

/// --launch mpi or env: one process per rank.
inline bool is_process_launch(const std::string& launch) {
  return launch == "mpi" || launch == "env";
}

/// The human table: operator, backend and machine, then one row per strategy.
void print_run_table(const RunArgs& a, const workload::OperatorSpec& op,
                     const study::RunReport& rep);

/// The report as JSON (what ran where, then study::results_json).
nlohmann::json run_json(const RunArgs& a, const workload::OperatorSpec& op,
                        const study::RunReport& rep);

}  // namespace compass::cli
