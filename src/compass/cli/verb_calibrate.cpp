// compass calibrate: measures the machine and writes a Profile whose calibration, overheads
// and interference come from the measurement (the planner then uses them).
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cpu/calibrate.hpp"
#include "compass/cli/calibrate_nccl.hpp"
#include "compass/cli/common.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/study/validation.hpp"

namespace compass::cli {
namespace {

struct CalibrateArgs {
  std::string backend = "cuda";
  std::string out;
  std::string profile;  // default: h200x1 (cuda), a6000x8 (cpu)
  std::string grid = "all";
  int tp = 2;
  bool force = false;
  bool quick = false;
  JsonOutput json;
  ProgressFlags progress;
  int device = 0;
  std::vector<std::string> nccl_logs;
};

void print_table(std::FILE* out, const backends::cuda::CalibrationResult& c,
                 const std::string& path) {
  print_to(out, "calibrated {} ({}, {} SMs, {} visible GPU{}) in {:.1f} s\n", c.device, c.arch,
             c.sm_count, c.device_count, c.device_count == 1 ? "" : "s", c.elapsed_s);
  print_to(out, "  {:<34} {}\n", "GEMM shapes measured (BF16)", c.gemm.size());
  print_to(out, "  {:<34} {:.1f} TFLOP/s\n", "best BF16 GEMM", c.best_bf16_flops / 1e12);
  print_to(out, "  {:<34} {}\n", "device-to-device copy", format_bandwidth(c.copy_bandwidth_bytes_per_s));
  if (c.peer_bandwidth_bytes_per_s) {
    print_to(out, "  {:<34} {}\n", "peer copy GPU0 -> GPU1", format_bandwidth(*c.peer_bandwidth_bytes_per_s));
  }
  print_to(out, "  {:<34} {}\n", "kernel launch", format_seconds(c.kernel_launch_s));
  print_to(out, "  {:<34} {}\n", "copy launch", format_seconds(c.copy_launch_s));
  if (c.collective_launch_s) {
    print_to(out, "  {:<34} {}\n", "NCCL collective launch", format_seconds(*c.collective_launch_s));
  }
  print_to(out, "  {:<34} {}\n", "GEMM beside copy-engine copies",
             format_ratio(c.gemm_slowdown_copy_engine));
  print_to(out, "  {:<34} {}\n", "GEMM beside an SM copy kernel",
             format_ratio(c.gemm_slowdown_sm_copy));
  print_to(out, "  {:<34} {}\n", "copy beside a GEMM", format_ratio(c.comm_slowdown_beside_gemm));
  if (c.fused_gemm_overhead) {
    print_to(out, "  {:<34} {}\n", "fused kernel / cuBLASLt", format_ratio(*c.fused_gemm_overhead));
  }
  if (c.fused_slowdown_copy_engine) {
    print_to(out, "  {:<34} {}\n", "fused kernel beside copies",
               format_ratio(*c.fused_slowdown_copy_engine));
  }
  for (const auto& n : c.notes) print_to(out, "  note: {}\n", n);
  print_to(out, "wrote {}\n", path);
}

nlohmann::ordered_json to_json(const backends::cuda::CalibrationResult& c, const std::string& out) {
  nlohmann::ordered_json j;
  j["device"] = c.device;
  j["arch"] = c.arch;
  j["sm_count"] = c.sm_count;
  j["device_count"] = c.device_count;
  j["elapsed_s"] = c.elapsed_s;
  j["best_bf16_flops"] = c.best_bf16_flops;
  j["copy_bandwidth_bytes_per_s"] = c.copy_bandwidth_bytes_per_s;
  j["peer_bandwidth_bytes_per_s"] =
      c.peer_bandwidth_bytes_per_s ? nlohmann::ordered_json(*c.peer_bandwidth_bytes_per_s) : nullptr;
  j["kernel_launch_s"] = c.kernel_launch_s;
  j["copy_launch_s"] = c.copy_launch_s;
  j["collective_launch_s"] =
      c.collective_launch_s ? nlohmann::ordered_json(*c.collective_launch_s) : nullptr;
  j["gemm_slowdown_copy_engine"] = c.gemm_slowdown_copy_engine;
  j["gemm_slowdown_sm_copy"] = c.gemm_slowdown_sm_copy;
  j["comm_slowdown_beside_gemm"] = c.comm_slowdown_beside_gemm;
  j["fused_kernel"] = c.fused_kernel.empty() ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(c.fused_kernel);
  j["fused_gemm_overhead"] =
      c.fused_gemm_overhead ? nlohmann::ordered_json(*c.fused_gemm_overhead) : nullptr;
  j["fused_slowdown_copy_engine"] =
      c.fused_slowdown_copy_engine ? nlohmann::ordered_json(*c.fused_slowdown_copy_engine) : nullptr;
  auto gemm = nlohmann::ordered_json::array();
  for (const auto& g : c.gemm) {
    gemm.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"time_s", g.time_s},
                    {"tflops", 2.0 * g.m * g.n * g.k / g.time_s / 1e12}});
  }
  j["gemm"] = gemm;
  j["notes"] = c.notes;
  j["profile"] = out;
  return j;
}

// --out names the profile written; '-' writes it to stdout (and the table to stderr).
void check_out(const CalibrateArgs& a) {
  if (a.out == "-" && a.json.to_stdout()) throw UsageError("--out - and --json both write to stdout");
  check_outputs({{"--out", a.out}, {"--json-out", a.json.file()}}, a.force);
}

std::FILE* human_stream(const CalibrateArgs& a) {
  return a.out == "-" || a.json.file() == "-" ? stderr : stdout;
}

void run_calibrate_cpu(const CalibrateArgs& a) {
  namespace cpu = backends::cpu;
  if (a.tp < 1 || a.tp > 256)
    throw UsageError(fmt::format("--tp: must be in 1..256 (GEMMs measured at once), got {}", a.tp));
  const hardware::Profile base = load_profile(a.profile.empty() ? "a6000x8" : a.profile);
  check_out(a);
  std::vector<study::GridConfig> grid;
  for (const char* g : {"small", "paper-scaled"})
    if (a.grid == "all" || a.grid == g) {
      auto part = unwrap(study::validation_grid(g, a.tp));
      grid.insert(grid.end(), part.begin(), part.end());
    }
  if (grid.empty())
    throw UsageError(
        fmt::format("--grid: unknown grid '{}' (expected small, paper-scaled or all)", a.grid));
  cpu::CpuCalibrateOptions options;
  options.shapes = study::grid_gemm_shapes(grid, base);
  options.concurrency = a.tp;
  options.quick = a.quick;
  ProgressBar bar("calibrating", a.progress);
  if (bar.enabled()) options.progress = [&bar](double f) { bar.update(f); };
  const cpu::CpuCalibration c = unwrap(cpu::calibrate(options));
  bar.finish();
  hardware::Profile measured = cpu::apply_calibration(base, c);
  measured.name = "cpu-calibrated";
  measured.description = fmt::format("this CPU measured by compass calibrate --backend cpu "
                                     "(topology of {})", base.name);
  unwrap(hardware::validate(measured));
  // The profile and the JSON are written together or not at all.
  StagedOutputs outputs;
  outputs.add({"--out", a.out}, hardware::profile_to_json(measured), a.force);
  if (a.json.any()) {
    nlohmann::ordered_json j;
    j["backend"] = "cpu";
    j["blas"] = c.blas;
    j["concurrency"] = c.concurrency;
    j["elapsed_s"] = c.elapsed_s;
    j["gemm_shapes"] = c.gemm.size();
    j["best_fp32_flops_per_gemm"] = c.best_flops_per_s;
    j["copy_bandwidth_bytes_per_s"] = c.copy_bandwidth_bytes_per_s;
    j["task_overhead_s"] = c.task_overhead_s;
    j["wake_lag_s"] = c.wake_lag_s;
    j["profile"] = a.out;
    a.json.stage(outputs, j, a.force);
  }
  outputs.commit();
  if (a.json.to_stdout()) return;
  std::FILE* out = human_stream(a);
  print_to(out, "calibrated this CPU ({}) in {:.1f} s\n", c.blas, c.elapsed_s);
  print_to(out, "  {:<34} {} ({} at once)\n", "GEMM shapes measured (FP32)", c.gemm.size(),
             c.concurrency);
  print_to(out, "  {:<34} {:.1f} GFLOP/s\n", "best FP32 GEMM (per rank)", c.best_flops_per_s / 1e9);
  print_to(out, "  {:<34} {}\n", "memcpy", format_bandwidth(c.copy_bandwidth_bytes_per_s));
  print_to(out, "  {:<34} {}\n", "executor task overhead", format_seconds(c.task_overhead_s));
  print_to(out, "  {:<34} {}\n", "timed-wait lateness", format_seconds(c.wake_lag_s));
  print_to(out, "wrote {}\n", a.out);
}

void run_calibrate(const CalibrateArgs& a) {
  if (a.backend == "cpu") {
    run_calibrate_cpu(a);
    return;
  }
  if (a.backend != "cuda") {
    throw UsageError(fmt::format("--backend: unknown backend '{}' (expected cuda or cpu)", a.backend));
  }
  if (a.device < 0) throw UsageError(fmt::format("--device: {} is not a GPU ordinal", a.device));
  // Everything that can fail without a GPU fails before minutes of measurement.
  const hardware::Profile base = load_profile(a.profile.empty() ? "h200x1" : a.profile);
  check_out(a);
  backends::cuda::CalibrateOptions options;
  options.quick = a.quick;
  options.device = a.device;
  const backends::cuda::CalibrationResult c = unwrap(backends::cuda::calibrate(options));
  hardware::Profile measured = backends::cuda::apply_calibration(base, c);
  unwrap(hardware::validate(measured));
  StagedOutputs outputs;
  outputs.add({"--out", a.out}, hardware::profile_to_json(measured), a.force);
  if (a.json.any()) a.json.stage(outputs, to_json(c, a.out), a.force);
  outputs.commit();
  if (!a.json.to_stdout()) print_table(human_stream(a), c, a.out);
}

}  // namespace

void add_calibrate_verb(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* sub = app.add_subcommand(
      "calibrate",
      "Measure a GPU or this CPU (GEMM table, copy bandwidth, launch overheads, interference) "
      "and write a calibrated profile");
  sub->add_option("--backend", args->backend, "cuda or cpu")
      ->capture_default_str();
  add_output_option(sub, "--out", args->out,
                    "profile JSON to write ('-' for stdout; required unless --from-nccl-tests)");
  sub->add_option("--from-nccl-tests", args->nccl_logs,
                  "fit the profile's link bandwidths and latencies to nccl-tests logs "
                  "(all_reduce_perf, all_gather_perf, reduce_scatter_perf, sendrecv_perf)");
  sub->add_option("--profile", args->profile,
                  "base profile (preset or file) the measurements are written into "
                  "(default h200x1 for cuda, a6000x8 for cpu)")
      ->capture_default_str();
  add_integer_option(sub, "--device", args->device, "CUDA device to measure", 0)->capture_default_str();
  sub->add_option("--grid", args->grid,
                  "cpu: GEMM shapes of the validation grid small, paper-scaled or all")
      ->capture_default_str();
  sub->add_option("--tp", args->tp, "cpu: GEMMs measured at once (= ranks of the runs)")
      ->transform(positive_tp())
      ->capture_default_str();
  sub->add_flag("--force", args->force, "overwrite --out (and --json-out) if it exists");
  add_progress_flags(sub, args->progress);
  sub->add_flag("--quick", args->quick, "fewer shapes and repeats (well under a minute)");
  args->json.add_to(sub, "the measurements (or the fit)");
  sub->callback([args] {
    if (!args->nccl_logs.empty()) {
      run_calibrate_from_nccl_tests(
          NcclFitArgs{args->nccl_logs, args->profile, args->out, args->force, args->json});
      return;
    }
    if (args->out.empty()) throw UsageError("--out is required");
    run_calibrate(*args);
  });
}

}  // namespace compass::cli
