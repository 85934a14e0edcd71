#pragma once
// `compass run` as one library call: an operator's schedules, one per strategy asked for,
// generated on the TP group's plan and run on a backend: the CPU executor (ranks as threads, or
// one process per rank), the CUDA executor (virtual ranks or several GPUs in one process, or one
// process per GPU). With a launch::Session this process runs its own rank and rank 0's report
// holds every rank's numbers combined. The verb only turns flags into a RunRequest and prints.

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "compass/backends/backend.hpp"
#include "compass/backends/cpu/transport.hpp"
#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/launch/session.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/generate.hpp"
#include "compass/workload/operator.hpp"

namespace compass::study {

enum class RunBackend { cpu, cuda };

/// What to run and how.
struct RunRequest {
  RunBackend backend = RunBackend::cpu;
  workload::OperatorSpec op;
  hardware::Profile profile;     ///< the machine the rings and the decomposition degree come from
  std::vector<int> gpus;         ///< the TP group on `profile` (rank r on gpus[r])
  std::string strategy = "all";  ///< a strategy name or "all" (strategies_to_run)
  backends::RunOptions run;      ///< repeat, warmup, check, seed
  // The CPU backend.
  int threads_per_rank = 1;
  double wait_timeout_s = 0;  ///< a task's wait for its dependencies (0: automatic)
  std::optional<hardware::Profile> emulated_links;  ///< pace transfers on this machine's links
  double link_scale = 1;
  // The CUDA backend.
  backends::cuda::LaunchMode cuda_mode = backends::cuda::LaunchMode::virtual_ranks;
  backends::cuda::SyncMode sync = backends::cuda::SyncMode::events;
  std::optional<backends::cuda::KernelMode> kernel;  ///< unset: fused where it can run
  // One process per rank (a Session given to run_operator).
  double launch_timeout_s = 60;  ///< bound on the processes' start and every exchange
  int fault_task = -1;           ///< testing: the process owning this task fails it
  int fault_prepare_rank = -1;   ///< testing: this rank fails to prepare its first schedule
};

/// One strategy's schedule and what running it measured.
struct StrategyRun {
  schedule::Schedule schedule;
  backends::Measurement m;
  std::string kernel;  ///< cuda: "chunked" or the fused kernel that ran the fused GEMM groups
  std::string sync;    ///< cuda: how dependencies waited
};

struct RunReport {
  schedule::CommPlan plan;
  std::vector<StrategyRun> runs;  ///< in the order of strategies_to_run
  std::string device;             ///< cuda: the GPU(s)
  /// False on the ranks other than 0 of a multi-process run: their measurements are their own
  /// and rank 0 reports for every process.
  bool reports = true;
};

/// True when every run's check passed (or was not asked for).
bool all_passed(const RunReport& report);

/// Per run: strategy, tasks, times_s, median_s, min_s, max_s, the threads (cpu) or the kernel
/// and sync (cuda), and with a check its errors, tolerance, pass and where the worst error is.
nlohmann::json results_json(const RunReport& report, RunBackend backend);

/// The strategies `name` stands for on `plan`: the strategy it names, or for "all" every
/// strategy of schedule::all_strategies with decompose at the decomposition degree the planner
/// weighs (model::optimise_decomposition's closed-form d*), the same rule for every verb.
Result<std::vector<schedule::Strategy>> strategies_to_run(const std::string& name,
                                                          const hardware::Profile& profile,
                                                          const workload::OperatorSpec& op,
                                                          const schedule::CommPlan& plan);

/// The request's checks that need no backend and no other process: every schedule generated
/// for the backend and, when `processes` (one process per rank will run it), checked for that,
/// so that bad input fails before anything starts. Errors name the strategy.
Result<RunReport> prepare_runs(const RunRequest& r, bool processes);

/// This process's part of a one-process-per-rank run: its session and the CPU transport built
/// on the session's bootstrap (the CUDA processes exchange through it too).
struct ProcessRun {
  backends::launch::Session* session = nullptr;
  std::shared_ptr<backends::cpu::Transport> transport;
};

/// Builds the transport on `session`'s bootstrap (MPI, or sockets met through the TCP store)
/// and attaches it to the session, bounded by the session's start timeout.
Result<ProcessRun> connect(backends::launch::Session& session);

/// Runs every schedule of `prepared` (prepare_runs(r, process != nullptr)) on the backend, in
/// this process or, with `process`, as this process's rank. Errors name the strategy; under a
/// session a failure inside a run has been announced to the other processes.
Result<RunReport> run_operator(const RunRequest& r, RunReport prepared, const ProcessRun* process);

}  // namespace compass::study
