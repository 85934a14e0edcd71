#pragma once
// Validation against real runs: the validation grids (the paper grid scaled down to fit a
// small CPU) and the runner that executes every strategy for real through the CPU executor
// with paced links and compares with the planner's predictions (counted by
// study/accuracy.hpp). docs/validation.md; `compass validate` formats the result.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compass/backends/cpu/calibrate.hpp"
#include "compass/hardware/profile.hpp"
#include "compass/schedule/strategy.hpp"
#include "compass/workload/operator.hpp"

namespace compass::study {

/// One configuration of a validation grid.
struct GridConfig {
  std::string label;  ///< e.g. "gpt3-2.7b qkv M=256"
  workload::OperatorSpec op;
};

/// Scaling of the paper grid: M / kGridScaleM, N and K / kGridScaleNK, TP 2 only, FP32.
inline constexpr std::int64_t kGridScaleM = 8;
inline constexpr std::int64_t kGridScaleNK = 16;

/// "small" (4 tiny configurations, for tests) or "paper-scaled" (the paper grid's TP-2 rows,
/// scaled); every op has tp = `tp`. Errors name an unknown grid.
Result<std::vector<GridConfig>> validation_grid(const std::string& name, int tp);

/// The distinct GEMM shapes every strategy's schedule of the grid produces (for calibration).
std::vector<backends::cpu::GemmShape> grid_gemm_shapes(const std::vector<GridConfig>& grid,
                                                       const hardware::Profile& topology);

/// The profile the planner predicts the emulated runs with: `topology`'s nodes, links (times
/// `link_scale`) and routes, with the devices, overheads, interference and calibration of
/// `calibrated` (the output of `compass calibrate --backend cpu`).
hardware::Profile emulated_profile(const hardware::Profile& topology,
                                   const hardware::Profile& calibrated, double link_scale);

/// The link scale that gives the emulated CPU machine the GPU machine's balance between
/// communication and computation: 2 x (GPU BF16 GEMM time / CPU FP32 GEMM time), geometric
/// mean over the grid's sequential GEMMs (2: FP32 transfers carry twice BF16's bytes).
double auto_link_scale(const std::vector<GridConfig>& grid, const hardware::Profile& topology,
                       const hardware::Profile& calibrated);

/// The regret up to which validation reports a choice as near the best: timing noise of
/// real runs on a shared CPU is a few percent.
inline constexpr double kNearBest = 0.05;

struct ValidateOptions {
  int repeat = 3;
  int warmup = 1;
  double link_scale = 1;
  bool use_min = false;  ///< measured = fastest run instead of the median (noisy machines)
  std::function<void(double)> progress;  ///< fraction done, may be empty
};

/// One (configuration, strategy) point.
struct ValidatePoint {
  std::string config;
  workload::OperatorSpec op;
  schedule::Strategy strategy;
  double predicted_s = 0;
  double measured_s = 0;  ///< median (or min) over the repeats
  bool chosen = false;    ///< the planner's choice for this configuration
  bool best = false;      ///< the fastest measured strategy of this configuration
};

/// Per-configuration outcome.
struct ValidateConfig {
  std::string config;
  workload::OperatorSpec op;
  std::string chosen, best;
  double chosen_s = 0, best_s = 0, sequential_s = 0;
  double regret = 0;  ///< chosen_s / best_s - 1
};

struct ValidateResult {
  std::vector<ValidatePoint> points;
  std::vector<ValidateConfig> configs;
  double link_scale = 1;
  std::vector<std::pair<std::string, double>> mape_by_strategy;  ///< kind name, mean |err|
  double mape = 0;                                               ///< over every point
  double choice_best = 0;     ///< fraction of configs whose choice is the measured best
                              ///< (the tie rule of study/accuracy.hpp)
  double choice_within5 = 0;  ///< ... within kNearBest of the best
  double mean_regret = 0, worst_regret = 0;
  double mean_speedup = 0;  ///< geometric mean of sequential_s / chosen_s
  bool outputs_ok = true;   ///< every run matched the FP64 reference (first run checked)
};

/// Runs and predicts every strategy the planner considers for each configuration.
Result<ValidateResult> run_validation(const std::vector<GridConfig>& grid,
                                      const hardware::Profile& topology,
                                      const hardware::Profile& predicted,
                                      const ValidateOptions& options);

}  // namespace compass::study
