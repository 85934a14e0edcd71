// Printing the report of `compass run` (verb_run.cpp): the table and the JSON.
#include "compass/cli/run_report.hpp"

#include <thread>

#include "compass/backends/cpu/blas.hpp"
#include "compass/backends/cpu/operator_data.hpp"

namespace compass::cli {

namespace cpu = backends::cpu;

namespace {

std::string ring_text(const std::vector<int>& ring) {
  return fmt::format("{}", fmt::join(ring, " "));
}

}  // namespace

void print_run_table(const RunArgs& a, const workload::OperatorSpec& op,
                     const study::RunReport& rep) {
  const schedule::CommPlan& plan = rep.plan;
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
      fmt::print(
          "device: {} (launch {}, {} processes, one rank each on GPU local rank % GPUs; "
          "times are the slowest rank's)\n",
          rep.device, a.launch, op.tp);
    else
      fmt::print("device: {} ({} ranks, dependencies by {})\n", rep.device,
                 a.launch.empty() || a.launch == "virtual" ? "virtual" : "multi-GPU", a.sync);
    for (const auto& r : rep.runs)
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
  for (const auto& r : rep.runs) {
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
        "\ncheck: max rel err = max |y - ref| / max |ref| over all outputs, {} reference, "
        "PASS when <= {:.0e}\n",
        a.backend == "cpu" ? "FP64" : "cuBLAS",
        rep.runs.empty() ? cpu::kCheckTolerance : rep.runs.front().m.check.tolerance);
}

nlohmann::json run_json(const RunArgs& a, const workload::OperatorSpec& op,
                        const study::RunReport& rep) {
  nlohmann::json j{{"backend", a.backend},
                   {"op",
                    {{"kind", workload::to_string(op.kind)},
                     {"m", op.m},
                     {"n", op.n},
                     {"k", op.k},
                     {"tp", op.tp},
                     {"dtype", to_string(op.dtype)}}}};
  if (a.backend == "cpu") {
    j["compute_dtype"] = "fp32";
    j["blas"] = cpu::blas_description();
    j["threads_per_rank"] = a.threads_per_rank;
    j["links"] = a.links.empty() ? nlohmann::json("memcpy") : nlohmann::json(a.links);
    if (!a.links.empty()) j["link_scale"] = a.link_scale;
    j["launch"] = a.launch.empty() ? "threads" : a.launch;
  } else {
    j["device"] = rep.device;
    j["launch"] = a.launch.empty() ? "virtual" : a.launch;
    j["sync"] = a.sync;
    j["kernel"] = a.kernel.empty() ? "default" : a.kernel;
  }
  j.update({{"profile", a.profile},
            {"gpus", rep.plan.gpus},
            {"ring", rep.plan.ring},
            {"ring2", rep.plan.ring2},
            {"repeat", a.repeat},
            {"warmup", a.warmup},
            {"seed", a.seed}});
  j["results"] = study::results_json(
      rep, a.backend == "cpu" ? study::RunBackend::cpu : study::RunBackend::cuda);
  if (a.check) j["passed"] = study::all_passed(rep);
  return j;
}

}  // namespace compass::cli
