// compass run: executes an operator for real under one strategy or all of them, on the CPU
// backend (ranks as threads, OpenBLAS GEMMs) or the CUDA backend, and reports the median, min
// and max time over --repeat runs, with --check the error against an FP64 reference.

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "compass/backends/backend.hpp"
#include "compass/backends/cpu/backend.hpp"
#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cpu/mpi_transport.hpp"
#include "compass/backends/cpu/paced_links.hpp"
#include "compass/backends/cpu/socket_transport.hpp"
#include "compass/backends/cpu/transport_group.hpp"
#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cuda/process_run.hpp"
#include "compass/backends/launch/mpi_session.hpp"
#include "compass/backends/launch/tcp_store.hpp"
#include "compass/cli/common.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::cli {

namespace {

namespace cpu = backends::cpu;
namespace cuda = backends::cuda;
namespace launch = backends::launch;

constexpr double kMaxWaitTimeout = 1e6;  // seconds (11 days)

struct RunArgs {
  std::string backend = "cpu";
  std::string launch;  ///< empty = the backend's default (cpu: threads, cuda: virtual)
  std::string sync = "events";
  std::string kernel;  ///< cuda: fused or chunked; empty = fused where it can run
  std::string op;
  std::int64_t m = 0, n = 0, k = 0;
  int tp = 0;                ///< 0 = not given (then --gpus gives it)
  std::string gpus;          ///< the TP group on the profile, e.g. "0,1,4,5"; empty = 0..tp-1
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
  std::string links;         ///< "emulated:<preset|file>", empty = plain memcpy
  double link_scale = 1.0;   ///< factor on every emulated link bandwidth
  double launch_timeout_s = 60;  ///< bound on starting the processes of a multi-process run
  // Fault injection for tests (hidden flags).
  int fault_task = -1;        ///< the process that owns this task fails it
  int fault_stall_rank = -1;  ///< this rank never starts (sleeps before joining)
};

/// The processes of a multi-process CPU run (--launch mpi / env) as this process sees them.
struct Distributed {
  std::unique_ptr<launch::MpiSession> mpi;
  std::unique_ptr<launch::TcpStore> store;
  std::shared_ptr<cpu::Transport> transport;
  int rank = 0;  ///< this process's rank, known as soon as the launcher says it
  int size = 1;
  int local_rank = 0;  ///< among the processes of this machine (cuda: picks the GPU)
  bool active() const { return transport != nullptr; }
};

bool is_process_launch(const std::string& launch) { return launch == "mpi" || launch == "env"; }

struct StrategyRun {
  schedule::Schedule schedule;
  backends::Measurement m;
  std::string kernel;  ///< cuda: "chunked" or the fused kernel that ran the fused GEMM groups
  std::string sync;    ///< cuda: how dependencies waited (runs with fused kernels use flags)
};

/// Runs one schedule on the chosen backend into r.m (and what ran into r); errors are
/// complete messages.
using Runner = std::function<void(StrategyRun& r)>;

backends::RunOptions run_options(const RunArgs& a) {
  backends::RunOptions o;
  o.repeat = a.repeat;
  o.warmup = a.warmup;
  o.check = a.check;
  o.seed = static_cast<std::uint64_t>(a.seed);
  return o;
}

workload::OperatorSpec parse_operator(const RunArgs& a) {
  if (a.backend != "cpu" && a.backend != "cuda")
    throw UsageError(
        fmt::format("--backend: unknown backend '{}' (expected cpu or cuda)", a.backend));
  workload::OperatorSpec op = operator_from_flags(a.op, a.m, a.n, a.k, a.tp, a.dtype);
  check_run_counts(a.repeat, a.warmup);
  if (a.seed < 0) throw UsageError(fmt::format("--seed: must not be negative, got {}", a.seed));
  if (a.threads_per_rank < 1 || a.threads_per_rank > 1024)
    throw UsageError(
        fmt::format("--threads-per-rank: must be in 1..1024, got {}", a.threads_per_rank));
  if (!(a.link_scale > 0) || !std::isfinite(a.link_scale))
    throw UsageError(fmt::format("--link-scale: must be a positive finite number, got {}",
                                 a.link_scale));
  if (!a.links.empty() && a.backend != "cpu")
    throw UsageError("--links: emulated links need --backend cpu");
  if (!a.links.empty()) parse_links_option(a.links);
  if (!a.links.empty() && is_process_launch(a.launch))
    throw UsageError("--links: emulated links need --launch threads (one process for all ranks)");
  if (auto sync = cuda::parse_sync_mode(a.sync); !sync.ok())
    throw UsageError(fmt::format("--sync: {}", sync.error().message));
  if (a.sync != "events" && a.backend != "cuda")
    throw UsageError("--sync: device flags need --backend cuda");
  if (!a.kernel.empty()) {
    if (auto kernel = cuda::parse_kernel_mode(a.kernel); !kernel.ok())
      throw UsageError(fmt::format("--kernel: {}", kernel.error().message));
    if (a.backend != "cuda")
      throw UsageError(fmt::format("--kernel: the fused kernels need --backend cuda (got --backend {})", a.backend));
  }
  if (!(a.wait_timeout_s >= 0) || !(a.wait_timeout_s <= kMaxWaitTimeout))
    throw UsageError(fmt::format("--wait-timeout: must be in [0, {}] seconds, got {}",
                                 kMaxWaitTimeout, a.wait_timeout_s));
  if (a.backend == "cpu" && !a.launch.empty() && a.launch != "threads" &&
      !is_process_launch(a.launch))
    throw UsageError(fmt::format(
        "--launch: unknown launch '{}' for --backend cpu (expected threads, mpi or env)", a.launch));
  if (a.backend == "cuda" && !a.launch.empty() && !is_process_launch(a.launch))
    if (auto mode = cuda::parse_launch_mode(a.launch); !mode.ok())
      throw UsageError(fmt::format("--launch: unknown launch '{}' for --backend cuda (expected "
                                   "virtual, multi-gpu, mpi or env)",
                                   a.launch));
  if (!(a.launch_timeout_s > 0) || !std::isfinite(a.launch_timeout_s))
    throw UsageError(fmt::format("--launch-timeout: must be a positive number of seconds, got {}", a.launch_timeout_s));
  unwrap(cpu::check_operator(op));
  return op;
}

// The strategies to run with their schedules; all generated before anything runs, so bad input
// fails fast. For "all", decompose uses the largest of {4, 2, 1} parts the shape allows.
std::vector<StrategyRun> make_schedules(const workload::OperatorSpec& op, const std::string& name,
                                        const schedule::CommPlan& plan,
                                        const schedule::GenerateOptions& options) {
  std::vector<schedule::Strategy> strategies;
  if (name == "all") {
    int parts = 1;
    for (int d : {4, 2, 1})
      if (schedule::generate(op, schedule::Strategy{schedule::StrategyKind::decompose, d}, plan,
                             options)
              .ok()) {
        parts = d;
        break;
      }
    strategies = schedule::all_strategies(parts);
  } else {
    strategies.push_back(unwrap(schedule::parse_strategy(name)));
  }
  std::vector<StrategyRun> runs;
  for (const auto& st : strategies) {
    auto s = schedule::generate(op, st, plan, options);
    if (!s.ok()) {
      // Generator errors for decompose already start with "decompose:D: ".
      const std::string name = schedule::to_string(st);
      const std::string& msg = s.error().message;
      throw UsageError(msg.rfind(name, 0) == 0 ? msg : fmt::format("strategy {}: {}", name, msg));
    }
    runs.push_back({std::move(s).value()});
  }
  return runs;
}

// The CPU backend: the whole footprint is checked and the inputs made once, then each schedule
// is prepared (workspace, paced links) and run.
// Rank 0 turns every rank's [times..., max_abs, max_ref_abs, threads] into the run's numbers:
// per repetition the slowest rank's time, the largest errors, the threads summed.
void combine_ranks(const std::vector<std::vector<double>>& all, std::size_t iterations,
                   backends::Measurement& m) {
  m.times_s.assign(iterations, 0.0);
  m.check.max_abs_error = 0;
  m.check.max_ref_abs = 0;
  m.threads = 0;
  for (const auto& v : all) {
    if (v.size() != iterations + 3) throw UsageError("a rank sent results of the wrong size");
    for (std::size_t i = 0; i < iterations; ++i) m.times_s[i] = std::max(m.times_s[i], v[i]);
    m.check.max_abs_error = std::max(m.check.max_abs_error, v[iterations]);
    m.check.max_ref_abs = std::max(m.check.max_ref_abs, v[iterations + 1]);
    m.threads += static_cast<int>(v[iterations + 2]);
  }
  m.check.max_rel_error = m.check.max_ref_abs > 0 ? m.check.max_abs_error / m.check.max_ref_abs
                          : m.check.max_abs_error > 0 ? std::numeric_limits<double>::infinity()
                                                      : 0.0;
  if (m.check.checked) m.check.passed = m.check.max_rel_error <= m.check.tolerance;
  backends::summarise_times(m);
}

// After every process has run a schedule: all meet (a failure anywhere shows up here, also in
// a process whose own tasks were all done), then rank 0 gathers and combines.
void gather_ranks(const RunArgs& a, const Distributed& dist, const std::string& label,
                  backends::Measurement& m) {
  double slowest = 0;
  for (double t : m.times_s) slowest = std::max(slowest, t);
  // The ranks end close together: the start timeout plus ten of this rank's runs.
  const double bound = a.launch_timeout_s + std::max(a.wait_timeout_s, 10 * slowest);
  if (Status st = dist.transport->barrier(bound); !st.ok())
    throw UsageError(fmt::format("strategy {}: {}", label, st.error().message));
  std::vector<double> mine = m.times_s;
  mine.insert(mine.end(), {m.check.max_abs_error, m.check.max_ref_abs, static_cast<double>(m.threads)});
  auto all = dist.transport->gather(mine, bound);
  if (!all.ok()) throw UsageError(fmt::format("strategy {}: {}", label, all.error().message));
  if (dist.rank == 0) combine_ranks(*all, m.times_s.size(), m);
}

Runner cpu_runner(const RunArgs& a, const workload::OperatorSpec& op,
                  const std::vector<StrategyRun>& runs, const Distributed& dist) {
  std::int64_t workspace = 0;
  for (const auto& r : runs)
    workspace = std::max(workspace, cpu::Workspace::bytes_needed(r.schedule));
  std::shared_ptr<const cpu::Inputs> inputs =
      unwrap(cpu::make_inputs(op, run_options(a), workspace));
  cpu::ExecutorOptions options;
  options.blas_threads_per_rank = a.threads_per_rank;
  options.wait_timeout_s = a.wait_timeout_s;
  options.transport = dist.transport;
  options.fail_task_id = a.fault_task;
  std::optional<hardware::Profile> emulated;
  if (!a.links.empty()) emulated = load_profile(parse_links_option(a.links));
  return [a, inputs, options, emulated, &dist](StrategyRun& r) mutable {
    const schedule::Schedule& s = r.schedule;
    const std::string label = schedule::to_string(s.strategy);
    if (emulated) {
      auto engine = cpu::PacedLinkEngine::create(*emulated, s.gpus, a.link_scale);
      if (!engine.ok()) throw UsageError(fmt::format("--links: {}", engine.error().message));
      options.transfer_engine = *engine;
    }
    auto prepared = cpu::Prepared::create(s, inputs, options);
    if (!prepared.ok())
      throw UsageError(fmt::format("strategy {}: {}", label, prepared.error().message));
    auto m = prepared->run(run_options(a));
    if (!m.ok()) throw UsageError(fmt::format("strategy {}: {}", label, m.error().message));
    if (dist.active()) gather_ranks(a, dist, label, *m);
    r.m = std::move(m).value();
  };
}

// --kernel (checked by parse_operator); unset when not given.
std::optional<cuda::KernelMode> kernel_choice(const RunArgs& a) {
  if (a.kernel.empty()) return std::nullopt;
  return unwrap(cuda::parse_kernel_mode(a.kernel));
}

// What the chosen backend needs from the schedule generator (cuda: fused GEMM groups for the
// fused kernel).
schedule::GenerateOptions generate_options(const RunArgs& a) {
  if (a.backend != "cuda") return {};
  cuda::RunOptions options;
  options.kernel = kernel_choice(a);
  // One process per GPU runs every GEMM on its own (no fused kernel there yet).
  if (!options.kernel && is_process_launch(a.launch)) options.kernel = cuda::KernelMode::chunked;
  return cuda::generate_options(options);
}

// The CUDA backend: each schedule is prepared on the GPU(s) and run; `device` gets the GPU
// name.
Runner cuda_runner(const RunArgs& a, std::string& device) {
  unwrap(cuda::device_available());
  cuda::RunOptions options;
  static_cast<backends::RunOptions&>(options) = run_options(a);
  options.mode = unwrap(cuda::parse_launch_mode(a.launch.empty() ? "virtual" : a.launch));
  options.sync = unwrap(cuda::parse_sync_mode(a.sync));
  options.kernel = kernel_choice(a);
  return [options, &device](StrategyRun& r) {
    const schedule::Schedule& s = r.schedule;
    const std::string label = schedule::to_string(s.strategy);
    auto prepared = cuda::Prepared::create(s, options);
    if (!prepared.ok())
      throw UsageError(fmt::format("strategy {}: {}", label, prepared.error().message));
    auto m = prepared->run();
    if (!m.ok()) throw UsageError(fmt::format("strategy {}: {}", label, m.error().message));
    device = prepared->info().device;
    r.kernel = prepared->info().kernel;
    r.sync = prepared->info().sync;
    r.m = std::move(m).value();
  };
}

// The CUDA backend with one process per GPU (--launch mpi / env).
cuda::ProcessRunOptions cuda_process_options(const RunArgs& a) {
  cuda::ProcessRunOptions options;
  static_cast<backends::RunOptions&>(options) = run_options(a);
  options.sync = unwrap(cuda::parse_sync_mode(a.sync));
  options.kernel = a.kernel.empty() ? cuda::KernelMode::chunked : kernel_choice(a);
  options.wait_timeout_s = a.wait_timeout_s > 0 ? a.wait_timeout_s : a.launch_timeout_s;
  options.fail_task = a.fault_task;
  return options;
}

// Every schedule checked before any process starts: bad input fails at once, in every process.
void check_cuda_processes(const RunArgs& a, const std::vector<StrategyRun>& runs) {
  const cuda::ProcessRunOptions options = cuda_process_options(a);
  for (const auto& r : runs)
    if (Status st = cuda::check_process_request(r.schedule, options, a.tp); !st.ok())
      throw UsageError(fmt::format("strategy {}: {}", schedule::to_string(r.schedule.strategy),
                                   st.error().message));
  unwrap(cuda::device_available());
}

// Each process runs its rank; a failure is announced to the others before it is reported;
// rank 0 combines the ranks' times and errors (gather_ranks).
Runner cuda_process_runner(const RunArgs& a, const Distributed& dist, std::string& device) {
  auto group = std::make_shared<cpu::TransportGroup>(*dist.transport, dist.local_rank);
  return [a, group, &dist, &device](StrategyRun& r) {
    const std::string label = schedule::to_string(r.schedule.strategy);
    const cuda::ProcessRunOptions options = cuda_process_options(a);
    auto fail = [&](const std::string& message) {
      const std::string text = fmt::format("strategy {}: {}", label, message);
      group->announce_failure(text);
      throw UsageError(text);
    };
    auto prepared = cuda::ProcessPrepared::create(r.schedule, options, *group);
    if (!prepared.ok()) fail(prepared.error().message);
    auto m = prepared->run();
    if (!m.ok()) fail(m.error().message);
    device = prepared->info().device;
    r.kernel = prepared->info().kernel;
    r.sync = prepared->info().sync;
    const double own_error = m->check.max_abs_error;
    gather_ranks(a, dist, label, *m);
    // The location of the largest error is only known where it is.
    if (m->check.max_abs_error != own_error) m->check.worst.clear();
    r.m = std::move(m).value();
  };
}

std::string ring_text(const std::vector<int>& ring) {
  std::string s;
  for (int r : ring) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

void print_table(const RunArgs& a, const workload::OperatorSpec& op, const schedule::CommPlan& plan,
                 const std::vector<StrategyRun>& runs, const std::string& device) {
  fmt::print("{} M={} N={} K={} tp={} dtype={} on backend {}\n", workload::to_string(op.kind), op.m,
             op.n, op.k, op.tp, to_string(op.dtype), a.backend);
  if (a.backend == "cpu") {
    fmt::print(
        "compute: FP32 on the CPU ({} cores, {} BLAS thread{} per rank){}\n",
        std::thread::hardware_concurrency(), a.threads_per_rank, a.threads_per_rank == 1 ? "" : "s",
        op.dtype == DType::fp32 ? "" : fmt::format("; --dtype {} only sizes transfers", a.dtype));
    fmt::print("blas: {}\n", cpu::blas_description());
    if (!a.links.empty())
      fmt::print("links: {} (paced, bandwidth x{:.4g})\n", a.links, a.link_scale);
    if (is_process_launch(a.launch))
      fmt::print("launch: {}, {} processes (one per rank; times are the slowest rank's)\n",
                 a.launch, op.tp);
  } else {
    if (is_process_launch(a.launch))
      fmt::print("device: {} (launch {}, {} processes, one rank each on GPU local rank % GPUs; "
                 "times are the slowest rank's)\n",
                 device, a.launch, op.tp);
    else
      fmt::print("device: {} ({} ranks, dependencies by {})\n", device,
                 a.launch.empty() || a.launch == "virtual" ? "virtual" : "multi-GPU", a.sync);
    for (const auto& r : runs)
      if (is_process_launch(a.launch))
        fmt::print("{}: dependencies by {}\n", schedule::to_string(r.schedule.strategy), r.sync);
      else if (r.kernel != "chunked")
        fmt::print("{}: fused GEMM groups on {} (dependencies by {})\n",
                   schedule::to_string(r.schedule.strategy), r.kernel, r.sync);
  }
  fmt::print("gpus (of {}, rank r on the r-th): {}\n", a.profile, ring_text(plan.gpus));
  fmt::print("ring (ranks, from {}): {}   second ring: {}\n", a.profile, ring_text(plan.ring),
             ring_text(plan.ring2));
  fmt::print("time: over {} run{} after {} warmup{}\n\n", a.repeat, a.repeat == 1 ? "" : "s",
             a.warmup, a.warmup == 1 ? "" : "s");
  fmt::print("{:<18} {:>11} {:>11} {:>11} {:>7}", "strategy", "median", "min", "max", "tasks");
  if (a.check) fmt::print(" {:>12} {:>12} {:>6}", "max abs err", "max rel err", "check");
  fmt::print("\n");
  for (const auto& r : runs) {
    fmt::print("{:<18} {:>11} {:>11} {:>11} {:>7}", schedule::to_string(r.schedule.strategy),
               format_seconds(r.m.median_s), format_seconds(r.m.min_s), format_seconds(r.m.max_s),
               r.schedule.tasks.size());
    if (a.check)
      fmt::print(" {:>12.3e} {:>12.3e} {:>6}", r.m.check.max_abs_error, r.m.check.max_rel_error,
                 r.m.check.passed ? "PASS" : "FAIL");
    fmt::print("\n");
  }
  if (a.check)
    fmt::print(
        "\ncheck: max rel err = max |y - ref| / max |ref| over all outputs, {} "
        "reference, PASS when <= {:.0e}\n",
        a.backend == "cpu" ? "FP64" : "cuBLAS",
        runs.empty() ? cpu::kCheckTolerance : runs.front().m.check.tolerance);
}

nlohmann::json run_json(const RunArgs& a, const workload::OperatorSpec& op,
                        const schedule::CommPlan& plan, const std::vector<StrategyRun>& runs,
                        const std::string& device) {
  nlohmann::json j;
  j["backend"] = a.backend;
  j["op"] = {
      {"kind", workload::to_string(op.kind)}, {"m", op.m}, {"n", op.n}, {"k", op.k}, {"tp", op.tp},
      {"dtype", to_string(op.dtype)}};
  if (a.backend == "cpu") {
    j["compute_dtype"] = "fp32";
    j["blas"] = cpu::blas_description();
    j["threads_per_rank"] = a.threads_per_rank;
    j["links"] = a.links.empty() ? nlohmann::json("memcpy") : nlohmann::json(a.links);
    if (!a.links.empty()) j["link_scale"] = a.link_scale;
    j["launch"] = a.launch.empty() ? "threads" : a.launch;
  } else {
    j["device"] = device;
    j["launch"] = a.launch.empty() ? "virtual" : a.launch;
    j["sync"] = a.sync;
    j["kernel"] = a.kernel.empty() ? "default" : a.kernel;
  }
  j["profile"] = a.profile;
  j["gpus"] = plan.gpus;
  j["ring"] = plan.ring;
  j["ring2"] = plan.ring2;
  j["repeat"] = a.repeat;
  j["warmup"] = a.warmup;
  j["seed"] = a.seed;
  bool all_passed = true;
  nlohmann::json results = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json e = {{"strategy", schedule::to_string(r.schedule.strategy)},
                        {"tasks", r.schedule.tasks.size()},
                        {"times_s", r.m.times_s},
                        {"median_s", r.m.median_s},
                        {"min_s", r.m.min_s},
                        {"max_s", r.m.max_s}};
    if (a.backend == "cpu") e["threads"] = r.m.threads;
    if (a.backend == "cuda") {
      e["kernel"] = r.kernel;
      e["sync"] = r.sync;
    }
    if (r.m.check.checked)
      e["check"] = {{"max_abs_error", r.m.check.max_abs_error},
                    {"max_rel_error", r.m.check.max_rel_error},
                    {"max_ref_abs", r.m.check.max_ref_abs},
                    {"tolerance", r.m.check.tolerance},
                    {"pass", r.m.check.passed}};
    if (r.m.check.checked && !r.m.check.worst.empty()) e["check"]["worst"] = r.m.check.worst;
    all_passed = all_passed && r.m.check.passed;
    results.push_back(std::move(e));
  }
  j["results"] = std::move(results);
  if (a.check) j["passed"] = all_passed;
  return j;
}

// The rank this process will have, known before MPI starts (for the stall fault).
int rank_from_launcher_env() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return -1;
}

// MPI_Init waits for every process of the job; bound it so that a process that never starts
// ends the others with an error instead of a hang.
std::unique_ptr<launch::MpiSession> start_mpi(double timeout_s) {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  std::jthread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return started; })) {
      fmt::print(stderr,
                 "compass: error: MPI did not start within {:.3g} s (--launch-timeout): a process "
                 "of the job never started\n",
                 timeout_s);
      std::fflush(stderr);
      std::_Exit(2);
    }
  });
  auto session = launch::MpiSession::init();
  {
    std::lock_guard lock(mu);
    started = true;
  }
  cv.notify_all();
  return unwrap(std::move(session));
}

void start_processes(const RunArgs& a, Distributed& d) {
  if (a.fault_stall_rank >= 0 && a.fault_stall_rank == rank_from_launcher_env())
    std::this_thread::sleep_for(std::chrono::hours(1));  // injected: this rank never starts
  if (a.launch == "mpi") {
    if (!launch::mpi_compiled_in())
      throw UsageError("--launch mpi: compass was built without MPI (install libopenmpi-dev and rebuild)");
    d.mpi = start_mpi(a.launch_timeout_s);
    d.rank = d.mpi->rank();
    d.size = d.mpi->size();
    d.local_rank = d.mpi->local_rank();
    d.transport = unwrap(cpu::make_mpi_transport(*d.mpi));
  } else {
    const launch::EnvLaunch env = unwrap(launch::env_launch_from_environment());
    d.rank = env.rank;
    d.size = env.world_size;
    d.local_rank = env.local_rank;
    d.store = unwrap(launch::TcpStore::connect(env, a.launch_timeout_s));
    d.transport = unwrap(
        cpu::make_socket_transport(*d.store, env.rank, env.world_size, a.launch_timeout_s));
  }
  if (d.size != a.tp)
    throw UsageError(fmt::format("--launch {}: {} processes were started but --tp is {} (start one "
                                 "process per rank)",
                                 a.launch, d.size, a.tp));
}

void run_verb_in(const RunArgs& a, const Distributed& dist, const workload::OperatorSpec& op,
                 const schedule::CommPlan& plan, std::vector<StrategyRun>& runs);

void run_verb(const RunArgs& given) {
  given.json.check_writable(given.force);
  RunArgs a = given;
  if (a.tp == 0 && a.gpus.empty()) throw UsageError("--tp or --gpus is required");
  const hardware::Profile profile = load_profile(a.profile);
  const std::vector<int> group = select_group(profile, a.tp, a.gpus);
  a.tp = static_cast<int>(group.size());
  const workload::OperatorSpec op = parse_operator(a);
  const schedule::CommPlan plan = unwrap(schedule::comm_plan_for(profile, group));
  std::vector<StrategyRun> runs = make_schedules(op, a.strategy, plan, generate_options(a));
  if (a.backend == "cuda" && is_process_launch(a.launch)) check_cuda_processes(a, runs);
  if (!is_process_launch(a.launch)) {
    run_verb_in(a, Distributed{}, op, plan, runs);
    return;
  }
  // One process per rank: a failure anywhere is reported by every process, which then ends
  // the whole job, so no process waits for a peer that is gone.
  Distributed dist;
  try {
    start_processes(a, dist);
    run_verb_in(a, dist, op, plan, runs);
  } catch (const UsageError& e) {
    fmt::print(stderr, "compass: error: [rank {} of {}] {}\n", dist.rank, dist.size, e.what());
    std::fflush(stderr);
    // When every process has said goodbye, all of them have reported and each ends normally
    // (MPI_Finalize, exit 2). MPI_Abort is kept for a peer that did not answer: it would
    // otherwise wait forever, but it may also cut off output the launcher has not forwarded.
    const bool all_left = dist.transport && dist.transport->farewell(5.0);
    dist.transport.reset();
    if (dist.mpi && !all_left) dist.mpi->abort_job(2);
    throw ExitCode{2};
  }
}

void run_verb_in(const RunArgs& a, const Distributed& dist, const workload::OperatorSpec& op,
                 const schedule::CommPlan& plan, std::vector<StrategyRun>& runs) {
  std::string device;
  const Runner runner = a.backend == "cpu" ? cpu_runner(a, op, runs, dist)
                        : dist.active()   ? cuda_process_runner(a, dist, device)
                                          : cuda_runner(a, device);
  for (auto& r : runs) runner(r);
  if (dist.rank != 0) return;  // rank 0 reports for every process
  if (a.json.any()) a.json.emit(run_json(a, op, plan, runs, device), a.force);
  if (!a.json.to_stdout()) print_table(a, op, plan, runs, device);
  std::vector<std::string> failed;
  for (const auto& r : runs)
    if (!r.m.check.passed) failed.push_back(schedule::to_string(r.schedule.strategy));
  if (!failed.empty()) {
    std::fflush(stdout);
    for (const auto& r : runs)
      if (!r.m.check.passed && !r.m.check.worst.empty())
        fmt::print(stderr, "compass: {}: largest error at {}\n",
                   schedule::to_string(r.schedule.strategy), r.m.check.worst);
    fmt::print(stderr, "compass: check failed for {} (max rel err above {:.0e})\n",
               fmt::join(failed, ", "), runs.front().m.check.tolerance);
    // A failed check is not a usage error: exit code 1, after the table is out.
    throw ExitCode{1};
  }
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
  sub->callback([args] { run_verb(*args); });
}

}  // namespace compass::cli
