#pragma once
// Fixed costs of a schedule's non-GEMM tasks (local copies and adds, transfer issue), shared by
// the model and the simulator so both price a task by the same rule (docs/model.md, "Strategy
// estimates"; docs/simulator.md, "Execution").

#include <cstdint>
#include <span>
#include <vector>

#include "compass/hardware/profile.hpp"

namespace compass::hardware {

/// A device-to-device copy of `bytes` on GPU `gpu`: at the calibrated copy rate when the profile
/// has one, else every byte read and written once at memory bandwidth. Issue cost excluded.
double copy_s(const Profile& p, int gpu, double bytes);

/// A reduction of `bytes` into a local block: two regions read, one written at memory bandwidth.
double add_s(const Profile& p, int gpu, double bytes);

/// The issue cost of one copy task: the executors issue every copy (and every transfer) as one
/// cudaMemcpy(2D)Async, whatever stream it is ordered on, so every copy pays
/// `Overheads::copy_launch_s` (measured on an H200: profiles/measured/h200.json).
double copy_issue_s(const Profile& p);

/// The fixed cost of one transfer between GPUs at ring step `step` (-1 when not a ring step).
/// Fused strategies issue every transfer on a copy engine (`copy_launch_s`); sequential and
/// decompose stand for NCCL collectives, one kernel per collective: its launch
/// (`collective_launch_s`) is paid on the step-0 transfers and the later steps run inside it.
double transfer_issue_s(const Profile& p, bool fused, int step);

/// The factor by which a GEMM runs slower while its rank moves data: fused strategies move it on
/// copy engines (the measured `Calibration::fused_slowdown_copy_engine` of the fused kernel, else
/// `gemm_slowdown_copy_engine`); sequential and decompose stand for NCCL collectives, kernels
/// on SMs (`gemm_slowdown_sm_copy`). 1 for a single rank.
double gemm_slowdown(const Profile& p, bool fused, int ranks);

/// A time interval [from, until).
struct Window {
  double from = 0;
  double until = 0;
};

/// The proportional interference rule: a GEMM of `work` seconds starting at `start` advances at
/// 1/`factor` while one of `busy` (ascending by start; windows may overlap, and then count as
/// their union) is under way and at full speed otherwise; returns its end. The simulator
/// applies the same rule through the GPU host's speed.
double slowed_end(double start, double work, std::span<const Window> busy, double factor);

/// The work of a chunk of `rows` rows inside a fused kernel whose chunks add up to `total_rows`
/// rows of one [total_rows, k] x [k, n] GEMM: a fused kernel schedules output tiles, not one
/// GEMM per chunk, so its chunks share one GEMM's waves in proportion to their rows (a chunk is
/// gated by its arrival, not rounded up to waves of its own), times the fused kernel's measured
/// cost against cuBLASLt (`Calibration::fused_gemm_overhead`, 1 when not measured).
double fused_chunk_compute_s(const Profile& p, std::int64_t rows, std::int64_t total_rows,
                             std::int64_t n, std::int64_t k, DType dtype, int gpu = 0);

}  // namespace compass::hardware
