// compass run: executes an operator for real under one strategy or all of them, on the CPU
// backend (ranks as threads, OpenBLAS GEMMs) or the CUDA backend, and reports the median, min
// and max time over --repeat runs, with --check the error against a reference. The work is
// study::run_operator; this file turns flags into its request and prints its report.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "compass/backends/cpu/backend.hpp"
#include "compass/backends/cpu/blas.hpp"
#include "compass/cli/common.hpp"
#include "compass/cli/run_report.hpp"
#include "compass/cli/spread.hpp"
#include "compass/study/run_operator.hpp"

namespace compass::cli {

namespace {

namespace cpu = backends::cpu;
namespace cuda = backends::cuda;
namespace launch = backends::launch;

constexpr double kMaxWaitTimeout = 1e6;  // seconds (11 days)

// Every flag checked, in the order the errors have always been reported, into the request.
study::RunRequest make_request(const RunArgs& a) {
  if (a.tp == 0 && a.gpus.empty()) throw UsageError("--tp or --gpus is required");
  study::RunRequest r;
  r.profile = load_profile(a.profile);
  r.gpus = select_group(r.profile, a.tp, a.gpus);
  const int tp = static_cast<int>(r.gpus.size());
  if (a.backend != "cpu" && a.backend != "cuda")
    throw UsageError(
        fmt::format("--backend: unknown backend '{}' (expected cpu or cuda)", a.backend));
  r.backend = a.backend == "cpu" ? study::RunBackend::cpu : study::RunBackend::cuda;
  r.op = operator_from_flags(a.op, a.m, a.n, a.k, tp, a.dtype);
  check_run_counts(a.repeat, a.warmup);
  if (a.seed < 0) throw UsageError(fmt::format("--seed: must not be negative, got {}", a.seed));
  if (a.threads_per_rank < 1 || a.threads_per_rank > 1024)
    throw UsageError(
        fmt::format("--threads-per-rank: must be in 1..1024, got {}", a.threads_per_rank));
  if (!(a.link_scale > 0) || !std::isfinite(a.link_scale))
    throw UsageError(
        fmt::format("--link-scale: must be a positive finite number, got {}", a.link_scale));
  if (!a.links.empty() && a.backend != "cpu")
    throw UsageError("--links: emulated links need --backend cpu");
  if (!a.links.empty()) r.emulated_links = load_profile(parse_links_option(a.links));
  if (!a.links.empty() && is_process_launch(a.launch))
    throw UsageError("--links: emulated links need --launch threads (one process for all ranks)");
  auto sync = cuda::parse_sync_mode(a.sync);
  if (!sync.ok()) throw UsageError(fmt::format("--sync: {}", sync.error().message));
  if (a.sync != "events" && a.backend != "cuda")
    throw UsageError("--sync: device flags need --backend cuda");
  if (!a.kernel.empty()) {
    auto kernel = cuda::parse_kernel_mode(a.kernel);
    if (!kernel.ok()) throw UsageError(fmt::format("--kernel: {}", kernel.error().message));
    if (a.backend != "cuda")
      throw UsageError(fmt::format(
          "--kernel: the fused kernels need --backend cuda (got --backend {})", a.backend));
    r.kernel = *kernel;
  }
  if (!(a.wait_timeout_s >= 0) || !(a.wait_timeout_s <= kMaxWaitTimeout))
    throw UsageError(fmt::format("--wait-timeout: must be in [0, {}] seconds, got {}",
                                 kMaxWaitTimeout, a.wait_timeout_s));
  if (a.backend == "cpu" && !a.launch.empty() && a.launch != "threads" &&
      !is_process_launch(a.launch))
    throw UsageError(fmt::format(
        "--launch: unknown launch '{}' for --backend cpu (expected threads, mpi or env)",
        a.launch));
  if (a.backend == "cuda" && !is_process_launch(a.launch)) {
    auto mode = cuda::parse_launch_mode(a.launch.empty() ? "virtual" : a.launch);
    if (!mode.ok())
      throw UsageError(
          fmt::format("--launch: unknown launch '{}' for --backend cuda (expected virtual, "
                      "multi-gpu, mpi or env)",
                      a.launch));
    r.cuda_mode = *mode;
  }
  if (!(a.launch_timeout_s > 0) || !std::isfinite(a.launch_timeout_s))
    throw UsageError(fmt::format("--launch-timeout: must be a positive number of seconds, got {}",
                                 a.launch_timeout_s));
  unwrap(cpu::check_operator(r.op));
  r.strategy = a.strategy;
  r.run = {a.repeat, a.warmup, a.check, static_cast<std::uint64_t>(a.seed)};
  r.threads_per_rank = a.threads_per_rank;
  r.wait_timeout_s = a.wait_timeout_s;
  r.link_scale = a.link_scale;
  r.sync = *sync;
  r.launch_timeout_s = a.launch_timeout_s;
  r.fault_task = a.fault_task;
  r.fault_prepare_rank = a.fault_prepare_rank;
  return r;
}

// What every rank of a multi-process run must have been given alike: every flag as typed
// (defaults as empty), except where rank 0 alone writes its report.
// Rank 0 (or the only process) reports; a failed check is exit code 1 after the table is out.
void report(const RunArgs& a, const study::RunRequest& req, const study::RunReport& rep) {
  if (!rep.reports) return;
  if (a.json.any()) a.json.emit(run_json(a, req.op, rep), a.force);
  if (!a.json.to_stdout()) print_run_table(a, req.op, rep);
  if (study::all_passed(rep)) return;
  std::vector<std::string> failed;
  for (const auto& r : rep.runs)
    if (!r.m.check.passed) failed.push_back(schedule::to_string(r.schedule.strategy));
  std::fflush(stdout);
  for (const auto& r : rep.runs)
    if (!r.m.check.passed && !r.m.check.worst.empty())
      fmt::print(stderr, "compass: {}: largest error at {}\n",
                 schedule::to_string(r.schedule.strategy), r.m.check.worst);
  fmt::print(stderr, "compass: check failed for {} (max rel err above {:.0e})\n",
             fmt::join(failed, ", "), rep.runs.front().m.check.tolerance);
  throw ExitCode{1};
}

// One process per rank: every rank checks that all were given the same run before any work,
// and a failure anywhere is reported by every process, which then ends the whole job within
// the stop bound, so no process waits for a peer that is gone.
void run_processes(const RunArgs& a, const launch::RunDescription& described,
                   const study::RunRequest& req, study::RunReport prepared) {
  if (a.fault_stall_rank >= 0 && a.fault_stall_rank == launch::rank_from_launcher_env())
    std::this_thread::sleep_for(std::chrono::hours(1));  // injected: this rank never starts
  launch::SessionOptions so;
  so.kind = unwrap(launch::parse_launch_kind(a.launch));
  so.start_timeout_s = a.launch_timeout_s;
  so.on_start_timeout = on_mpi_start_timeout(a.launch_timeout_s, " (--launch-timeout)");
  std::unique_ptr<launch::Session> session;
  try {
    session = unwrap(launch::Session::start(so));
    const study::ProcessRun process = unwrap(study::connect(*session));
    unwrap(session->agree(described));
    report(a, req, unwrap(study::run_operator(req, std::move(prepared), &process)));
  } catch (const UsageError& e) {
    end_rank_after_failure(session.get(), e.what());
  }
}

void run_verb(const RunArgs& a, const CLI::App& sub) {
  a.json.check_writable(a.force);
  const study::RunRequest req = make_request(a);
  study::RunReport prepared = unwrap(study::prepare_runs(req, is_process_launch(a.launch)));
  if (is_process_launch(a.launch))
    return run_processes(a, describe_command(sub), req, std::move(prepared));
  report(a, req, unwrap(study::run_operator(req, std::move(prepared), nullptr)));
}

}  // namespace

void add_run_verb(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand(
      "run", "Execute an operator for real under one strategy or all, and time it");
  sub->add_option("--backend", args->backend, "cpu (ranks as threads) or cuda")
      ->capture_default_str();
  sub->add_option("--op", args->op, "ag_gemm, gemm_rs or gemm_ar")->required();
  add_integer_option(sub, "--m", args->m, "tokens M (global)", 1)->required();
  add_integer_option(sub, "--n", args->n, "output features N (global)", 1)->required();
  add_integer_option(sub, "--k", args->k, "input features K (global)", 1)->required();
  sub->add_option("--tp", args->tp, "tensor-parallel degree p (ranks; default: the size of --gpus)")
      ->transform(positive_tp());
  sub->add_option("--gpus", args->gpus,
                  "GPU ordinals of the TP group on --profile, e.g. 0,1,4,5 (default 0..tp-1): "
                  "rank r is the r-th; they set the rings, the emulated links and, with "
                  "--launch multi-gpu, the CUDA devices")
      ->check(nonempty_gpus());
  sub->add_option("--strategy", args->strategy,
                  "sequential, decompose:D, fuse:all2all, fuse:ring, fuse:double-ring, fuse:hier, "
                  "fuse:synth or all")
      ->capture_default_str();
  sub->add_option("--profile", args->profile, "machine preset or profile file (ring order)")
      ->capture_default_str();
  sub->add_option("--dtype", args->dtype,
                  "operator dtype; the CPU backend computes in FP32 whatever it says")
      ->capture_default_str();
  sub->add_flag("--check", args->check,
                "compare with a reference (cpu: FP64, tolerance 1e-4; cuda: cuBLAS, tolerance "
                "by dtype); exit code 1 when a check fails");
  sub->add_option("--launch", args->launch,
                  "cpu: threads (default; ranks as threads of this process), mpi (one process "
                  "per rank under mpirun) or env (one process per rank from RANK, WORLD_SIZE, "
                  "MASTER_ADDR, MASTER_PORT as torchrun sets them); cuda: virtual (default; all "
                  "ranks on one GPU), multi-gpu (rank r on the r-th GPU of --gpus), or mpi / "
                  "env (one process per rank on GPU local rank % GPUs; sequential through "
                  "NCCL, the others through CUDA IPC)");
  sub->add_option("--launch-timeout", args->launch_timeout_s,
                  "mpi/env: seconds the processes may take to start and meet")
      ->transform(seconds_in(kMaxFlagSeconds, /*zero_ok=*/false))
      ->capture_default_str();
  add_integer_option(sub, "--fault-task", args->fault_task,
                     "testing: the owner of this task fails it", -1)
      ->group("");
  add_integer_option(sub, "--fault-prepare-rank", args->fault_prepare_rank,
                     "testing: this rank fails to prepare its first schedule", -1)
      ->group("");
  add_integer_option(sub, "--fault-stall-rank", args->fault_stall_rank,
                     "testing: this rank never starts", -1)
      ->group("");
  sub->add_option("--sync", args->sync,
                  "cuda: how streams wait for each other: events (cudaEventRecord/StreamWaitEvent) "
                  "or flags (stream memory operations on device flags)")
      ->capture_default_str();
  sub->add_option("--kernel", args->kernel,
                  "cuda: how the GEMMs of the fusions fuse:all2all, fuse:ring and "
                  "fuse:double-ring compute: fused (one CUTLASS kernel per rank: ag_gemm tiles "
                  "wait on device flags, gemm_rs / gemm_ar tiles are stored into the owners' "
                  "slots and summed in rank order; the run's dependencies then use flags) or "
                  "chunked (one cuBLASLt GEMM per chunk); default: fused where the kernels are "
                  "built and the GPU supports them, else chunked");
  add_integer_option(sub, "--repeat", args->repeat, "timed runs per strategy", 1, kMaxRuns)
      ->capture_default_str();
  add_integer_option(sub, "--warmup", args->warmup, "untimed runs first", 0, kMaxRuns)
      ->capture_default_str();
  add_integer_option(sub, "--seed", args->seed, "seed of the random X and W", 0)
      ->capture_default_str();
  add_integer_option(sub, "--threads-per-rank", args->threads_per_rank,
                     "BLAS threads per GEMM call (cpu)", 1, 1024)
      ->capture_default_str();
  sub->add_option("--wait-timeout", args->wait_timeout_s,
                  "seconds a task may wait for its dependencies (cpu; 0 = automatic), or with "
                  "cuda mpi/env every exchange and iteration (0 = --launch-timeout)")
      ->transform(seconds_in(kMaxFlagSeconds, /*zero_ok=*/true))
      ->capture_default_str();
  sub->add_option("--links", args->links,
                  "cpu: emulated:<preset|file> paces transfers on that machine's links "
                  "(default: plain memcpy)");
  sub->add_option("--link-scale", args->link_scale,
                  "cpu: factor on every emulated link bandwidth (< 1 slows the links)")
      ->capture_default_str();
  args->json.add_to(sub, "the times and checks");
  add_force_flag(sub, args->force, "--json-out");
  sub->callback([args, sub] { run_verb(*args, *sub); });
}

}  // namespace compass::cli
