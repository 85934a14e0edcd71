#pragma once
// The CUDA executor's state for one prepared schedule (device code only, private to
// device/): buffers, streams, events or flags, GEMM plans and inputs on the GPU(s). Its
// methods live in four units: setup.cpp (device setup), executor.cpp (the timed run),
// fused_run.cpp (the fused kernels of fused GEMM groups) and reference_check.cpp (the --check
// reference and the comparison).
#include <cuda.h>  // types of the stream memory operations only; no libcuda link
#include <cuda_runtime_api.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cuda/device/cuda_util.hpp"
#include "compass/backends/cuda/device/fused/fused_kernels.hpp"
#include "compass/backends/cuda/device/kernels.hpp"
#include "compass/backends/cuda/device/lt_gemm.hpp"
#include "compass/backends/cuda/device/mapped_fault.hpp"
#include "compass/backends/cuda/fused_plan.hpp"
#include "compass/backends/cuda/stream_plan.hpp"

namespace compass::backends::cuda::device {

/// Ends a measurement: summarises its timed iterations and, when `want_check` is set, fills
/// its check with `check` and judges it against the tolerance of `dtype`.
template <class CheckFn>
Status finish_measurement(Measurement& m, DType dtype, bool want_check, CheckFn&& check) {
  summarise_times(m);
  m.check.tolerance = check_tolerance(dtype);
  if (!want_check) return Status::success();
  COMPASS_TRY(check(m.check));
  m.check.judge(m.check.tolerance);
  return Status::success();
}

/// The cuBLASLt call of a schedule GEMM task (dst = src · b, added to dst when the task
/// accumulates) in `dtype`; `ptr` and `ld` say where a region lives and its row pitch.
template <class Ptr, class Ld>
GemmCall task_gemm_call(const schedule::Task& t, DType dtype, Ptr ptr, Ld ld) {
  GemmCall call;
  call.m = t.dst.rows;
  call.n = t.dst.cols;
  call.k = t.src.cols;
  call.a = ptr(t.src);
  call.lda = ld(t.src);
  call.b = ptr(t.b);
  call.ldb = ld(t.b);
  call.c = ptr(t.dst);
  call.ldc = ld(t.dst);
  call.in = call.out = dtype;
  call.accumulate = t.accumulate;
  return call;
}

// The driver's stream memory operations, looked up through the runtime so that the binaries
// need no link against libcuda (the driver provides them wherever a GPU is).
struct StreamMemOps {
  decltype(&cuStreamWaitValue32_v2) wait = nullptr;
  decltype(&cuStreamWriteValue32_v2) write = nullptr;
  decltype(&cuGetErrorName) error_name = nullptr;

  static Result<StreamMemOps> load();
  Status check(CUresult r, std::string_view call, std::string_view what) const;
};

ElemType elem_type(DType t);
/// True when the environment variable `name` is "1".
bool env_flag(const char* name);
using schedule::task_label;

/// The fused kernel that runs on a GPU (fused_kernel_for with what this binary was built with):
/// "sm90" (sm_90 GPUs, when built) or "sm80" (compute capability 8.0 and newer), for AG-GEMM
/// and GEMM-RS alike; `requested` is "auto", "sm90" or "sm80".
Result<std::string> pick_fused_kernel(std::string_view requested, const DeviceInfo& info);
/// The output tile the plans of the sm90 or the sm80 kernels are built with.
TileShape fused_tile_shape(bool sm90);
/// Bands of this many M tiles are swept along N inside one piece of a fused kernel's plan.
inline constexpr int kFusedSwizzle = 4;
/// "sm90 (CUTLASS 3.x TMA + WGMMA, persistent)" / "sm80 (CUTLASS 2.x mma.sync)".
std::string fused_kernel_label(std::string_view kernel);

/// One rank's fused GEMM group as one fused kernel launch: the tile plan and its wait lists
/// (AG) or piece slots and counters (GEMM-RS) on the device, and the launch arguments (the AG
/// flag target is set per iteration).
struct FusedLaunch {
  int rank = 0;
  int first_task = -1;  ///< the group's first GEMM, where the kernel is issued
  bool rs = false;      ///< a GEMM-RS group (gemm_rs / gemm_ar), else AG-GEMM
  bool sm90 = false;
  int sm_count = 0;
  DeviceMemory tiles, waits, flags;
  DeviceMemory piece_row, piece_out, piece_counter;
  FusedAgArgs args;
  FusedRsArgs rs_args;
};

/// The comparison of one rank's output with the reference.
struct RankError {
  double err = 0;  ///< max |y - ref| (infinity for NaN)
  double ref = 0;  ///< max |ref|
  std::int64_t bad = 0;  ///< elements over the tolerance
  std::pair<std::int64_t, std::int64_t> at{0, 0};  ///< (row, col) of the largest error
  std::pair<float, float> val{0.f, 0.f};            ///< (got, want) there
};

/// Compares an output block with its reference (both row-major with `cols` columns, on the
/// host); elements whose error exceeds `tolerance` x max |ref| count as bad, NaN fails.
RankError compare_values(const std::vector<float>& got, const std::vector<float>& want,
                         std::int64_t cols, double tolerance);

/// The seed of buffer `index`'s pseudo-random input values for the run seed `seed` (every
/// executor gives a buffer the same values).
inline std::uint64_t input_seed(std::uint64_t seed, int index) {
  return (seed << 20) + static_cast<std::uint64_t>(index);
}

// Everything one prepared schedule owns on the GPUs. Members are destroyed in reverse order:
// GEMM plans before handles, events and streams before memory. The schedule and the options
// must outlive the Run.
class Run {
 public:
  Run(const schedule::Schedule& s, const RunOptions& o);

  /// Device setup: GPUs, peer access, buffers, streams, events or flags, GEMM plans, inputs.
  Status setup();
  /// warmup + repeat timed iterations, then the reference check with RunOptions::check.
  Result<Measurement> measure();
  const RunInfo& info() const { return info_; }

 private:
  int buffer_device(int buffer) const { return rank_device(s_, o_.mode, s_.buffers[buffer].rank); }
  char* ptr(const schedule::Region& r) const {
    const schedule::Buffer& b = s_.buffers[r.buffer];
    return static_cast<char*>(mem_[r.buffer].get()) + (r.row * b.cols + r.col) * eb_;
  }
  std::int64_t ld(const schedule::Region& r) const { return s_.buffers[r.buffer].cols; }

  // setup.cpp
  Status check_devices();
  Status describe_devices();
  Status enable_peer_access();
  Status allocate_buffers();
  Status create_streams_and_events();
  Status create_flags();
  int task_stream(int task) const;
  Status prepare_tasks();
  Status fill_inputs();
  Status fill(int index, void* dst);
  Status sync_aux();
  // fused_run.cpp
  Status prepare_fused();
  Status upload_fused_plan(const FusedGroup& g, FusedLaunch& f);
  Status upload_ag_plan(const FusedGroup& g, FusedLaunch& f) const;
  Status upload_rs_plan(const FusedGroup& g, FusedLaunch& f);
  Status rs_piece_slots(const FusedGroup& g, std::vector<std::int64_t>& rows,
                        std::vector<void*>& out, std::vector<std::uint32_t*>& counters);
  bool absorbed(int task) const;
  Status prepare_rs_sums();
  bool in_rs_sum(int task) const;
  Status launch_sum(const schedule::Task& t, cudaStream_t stream);
  bool in_fused_group(int task) const;
  Status launch_fused(const schedule::Task& t, cudaStream_t stream);
  Status fused_fault() const;
  // executor.cpp
  Status reset_outputs();
  Status issue(const TaskIssue& is);
  Result<double> iteration();
  // reference_check.cpp
  Status check(CheckResult& out);
  Status reference_output(DeviceMemory& Y);
  Result<RankError> compare_rank(const ReferenceBlocks& block, const DeviceMemory& Y);
  Status place(int index, void* dst, std::int64_t ld, std::int64_t row0, std::int64_t col0);
  Result<std::string> modified_inputs();

  const schedule::Schedule& s_;
  const RunOptions& o_;
  bool serialize_ = false;
  const std::int64_t eb_;
  int ref_device_ = 0;
  RunInfo info_;
  StreamPlan plan_;
  std::set<std::pair<int, int>> peer_;
  std::vector<DeviceMemory> mem_;
  std::vector<DeviceMemory> workspace_;
  std::map<int, Stream> aux_;
  std::vector<Stream> streams_;
  std::vector<Event> stream_end_;
  std::vector<Event> events_;
  StreamMemOps mem_ops_;
  std::vector<DeviceMemory> flags_;   // per device, for --sync flags
  std::vector<CUdeviceptr> flag_ptr_; // per dependency
  cuuint32_t iteration_ = 0;
  Stream timing_stream_;
  Event start_, stop_;
  std::map<int, LtHandle> handles_;
  std::vector<LtGemm> gemms_;
  std::vector<std::string> labels_;
  // Fused GEMM groups under the fused kernel: one launch per rank with a group.
  std::vector<FusedLaunch> fused_;
  std::vector<int> fused_of_task_;  // index into fused_, or -1
  // GEMM-RS groups: the transfers whose stores the kernels' epilogues do (skipped), and one
  // tile counter per chunk on its owner's GPU (incremented by every tile stored into it).
  std::vector<char> absorbed_;
  std::vector<DeviceMemory> rs_counters_;
  std::vector<std::int64_t> rs_chunk_tiles_;  // tiles all ranks store into each chunk
  // The owners' sums: one ordered-sum kernel (after the chunk counter) at each sum's last task.
  std::vector<RsSum> rs_sums_;
  std::vector<int> sum_of_task_;  // index into rs_sums_, or -1
  MappedFault fault_;
};

}  // namespace compass::backends::cuda::device
