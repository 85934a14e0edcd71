// compass run: executes an operator for real under one strategy or all of them, on the CPU
// backend (ranks as threads, OpenBLAS GEMMs) or the CUDA backend, and reports the median, min
// and max time over --repeat runs, with --check the error against an FP64 reference.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <functional>
#include <optional>
#include <thread>

#include "compass/backends/backend.hpp"
#include "compass/backends/cpu/backend.hpp"
#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cpu/paced_links.hpp"
#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/cli/common.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::cli {

namespace {

namespace cpu = backends::cpu;
namespace cuda = backends::cuda;

struct RunArgs {
  std::string backend = "cpu";
  std::string launch = "virtual";
  std::string sync = "events";
  std::string op;
  std::int64_t m = 0, n = 0, k = 0;
  int tp = 0;
  std::string strategy = "all";
  std::string profile = "a6000x8";
  std::string dtype = "fp32";
  bool check = false;
  int repeat = 5;
  int warmup = 1;
  std::uint64_t seed = 1;
  bool json = false;
  int threads_per_rank = 1;
  double wait_timeout_s = 0;
  std::string links;         ///< "emulated:<preset|file>", empty = plain memcpy
  double link_scale = 1.0;   ///< factor on every emulated link bandwidth
};

struct StrategyRun {
  schedule::Schedule schedule;
  backends::Measurement m;
};

/// Runs one schedule on the chosen backend; errors are complete messages.
using Runner = std::function<backends::Measurement(const schedule::Schedule&)>;

backends::RunOptions run_options(const RunArgs& a) {
  backends::RunOptions o;
  o.repeat = a.repeat;
  o.warmup = a.warmup;
  o.check = a.check;
  o.seed = a.seed;
  return o;
}

workload::OperatorSpec parse_operator(const RunArgs& a) {
  if (a.backend != "cpu" && a.backend != "cuda")
    throw UsageError(
        fmt::format("--backend: unknown backend '{}' (expected cpu or cuda)", a.backend));
  workload::OperatorSpec op = operator_from_flags(a.op, a.m, a.n, a.k, a.tp, a.dtype);
  if (a.repeat < 1) throw UsageError(fmt::format("--repeat: must be at least 1, got {}", a.repeat));
  if (a.warmup < 0)
    throw UsageError(fmt::format("--warmup: must not be negative, got {}", a.warmup));
  if (a.threads_per_rank < 1)
    throw UsageError(
        fmt::format("--threads-per-rank: must be at least 1, got {}", a.threads_per_rank));
  if (!(a.link_scale > 0))
    throw UsageError(fmt::format("--link-scale: must be positive, got {}", a.link_scale));
  if (!a.links.empty() && a.backend != "cpu")
    throw UsageError("--links: emulated links need --backend cpu");
  if (!a.links.empty()) parse_links_option(a.links);
  if (auto sync = cuda::parse_sync_mode(a.sync); !sync.ok())
    throw UsageError(fmt::format("--sync: {}", sync.error().message));
  if (a.sync != "events" && a.backend != "cuda")
    throw UsageError("--sync: device flags need --backend cuda");
  if (a.wait_timeout_s < 0)
    throw UsageError(fmt::format("--wait-timeout: must not be negative, got {}", a.wait_timeout_s));
  unwrap(cpu::check_operator(op));
  return op;
}

// The strategies to run with their schedules; all generated before anything runs, so bad input
// fails fast. For "all", decompose uses the largest of {4, 2, 1} parts the shape allows.
std::vector<StrategyRun> make_schedules(const workload::OperatorSpec& op, const std::string& name,
                                        const schedule::CommPlan& plan) {
  std::vector<schedule::Strategy> strategies;
  if (name == "all") {
    int parts = 1;
    for (int d : {4, 2, 1})
      if (schedule::generate(op, schedule::Strategy{schedule::StrategyKind::decompose, d}, plan)
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
    auto s = schedule::generate(op, st, plan);
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
Runner cpu_runner(const RunArgs& a, const workload::OperatorSpec& op,
                  const std::vector<StrategyRun>& runs) {
  std::int64_t workspace = 0;
  for (const auto& r : runs)
    workspace = std::max(workspace, cpu::Workspace::bytes_needed(r.schedule));
  std::shared_ptr<const cpu::Inputs> inputs =
      unwrap(cpu::make_inputs(op, run_options(a), workspace));
  cpu::ExecutorOptions options;
  options.blas_threads_per_rank = a.threads_per_rank;
  options.wait_timeout_s = a.wait_timeout_s;
  std::optional<hardware::Profile> emulated;
  if (!a.links.empty()) emulated = load_profile(parse_links_option(a.links));
  return [a, inputs, options, emulated](const schedule::Schedule& s) mutable {
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
    return std::move(m).value();
  };
}

// The CUDA backend: each schedule is prepared on the GPU(s) and run; `device` gets the GPU
// name.
Runner cuda_runner(const RunArgs& a, std::string& device) {
  unwrap(cuda::device_available());
  cuda::RunOptions options;
  static_cast<backends::RunOptions&>(options) = run_options(a);
  options.mode = unwrap(cuda::parse_launch_mode(a.launch));
  options.sync = unwrap(cuda::parse_sync_mode(a.sync));
  return [options, &device](const schedule::Schedule& s) {
    const std::string label = schedule::to_string(s.strategy);
    auto prepared = cuda::Prepared::create(s, options);
    if (!prepared.ok())
      throw UsageError(fmt::format("strategy {}: {}", label, prepared.error().message));
    auto m = prepared->run();
    if (!m.ok()) throw UsageError(fmt::format("strategy {}: {}", label, m.error().message));
    device = prepared->info().device;
    return std::move(m).value();
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
  } else {
    fmt::print("device: {} ({} ranks, dependencies by {})\n", device,
               a.launch == "virtual" ? "virtual" : "multi-GPU", a.sync);
  }
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

void print_json(const RunArgs& a, const workload::OperatorSpec& op, const schedule::CommPlan& plan,
                const std::vector<StrategyRun>& runs, const std::string& device) {
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
  } else {
    j["device"] = device;
    j["launch"] = a.launch;
    j["sync"] = a.sync;
  }
  j["profile"] = a.profile;
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
  fmt::print("{}\n", j.dump(2));
}

void run_verb(const RunArgs& a) {
  const workload::OperatorSpec op = parse_operator(a);
  const hardware::Profile profile = load_profile(a.profile);
  const std::vector<int> group = select_group(profile, a.tp, "");
  const schedule::CommPlan plan = unwrap(schedule::comm_plan_for(profile, group));
  std::vector<StrategyRun> runs = make_schedules(op, a.strategy, plan);

  std::string device;
  const Runner runner = a.backend == "cuda" ? cuda_runner(a, device) : cpu_runner(a, op, runs);
  for (auto& r : runs) r.m = runner(r.schedule);
  if (a.json) {
    print_json(a, op, plan, runs, device);
  } else {
    print_table(a, op, plan, runs, device);
  }
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
  sub->add_option("--m", args->m, "tokens M (global)")->required();
  sub->add_option("--n", args->n, "output features N (global)")->required();
  sub->add_option("--k", args->k, "input features K (global)")->required();
  sub->add_option("--tp", args->tp, "tensor-parallel degree p (ranks)")->required();
  sub->add_option("--strategy", args->strategy,
                  "sequential, decompose:D, fuse:all2all, fuse:ring, fuse:double-ring or all")
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
                  "cuda: virtual (all ranks on one GPU) or multi-gpu (rank r on GPU r)")
      ->capture_default_str();
  sub->add_option("--sync", args->sync,
                  "cuda: how streams wait for each other: events (cudaEventRecord/StreamWaitEvent) "
                  "or flags (stream memory operations on device flags)")
      ->capture_default_str();
  sub->add_option("--repeat", args->repeat, "timed runs per strategy")->capture_default_str();
  sub->add_option("--warmup", args->warmup, "untimed runs first")->capture_default_str();
  sub->add_option("--seed", args->seed, "seed of the random X and W")->capture_default_str();
  sub->add_option("--threads-per-rank", args->threads_per_rank, "BLAS threads per GEMM call (cpu)")
      ->capture_default_str();
  sub->add_option("--wait-timeout", args->wait_timeout_s,
                  "seconds a task may wait for its dependencies (cpu; 0 = automatic)")
      ->capture_default_str();
  sub->add_option("--links", args->links,
                  "cpu: emulated:<preset|file> paces transfers on that machine's links "
                  "(default: plain memcpy)");
  sub->add_option("--link-scale", args->link_scale,
                  "cpu: factor on every emulated link bandwidth (< 1 slows the links)")
      ->capture_default_str();
  sub->add_flag("--json", args->json, "machine-readable output");
  sub->callback([args] { run_verb(*args); });
}

}  // namespace compass::cli
