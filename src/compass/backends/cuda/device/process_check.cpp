// The --check of one process of a one-process-per-GPU run: a cuBLASLt reference of the whole
// operator (FP32 output) built on this GPU from every rank's inputs, regenerated from their
// seeds (the values every process filled them with), compared with this rank's "y"; and a
// check that the run left this rank's inputs untouched. The caller combines the ranks.
#include "compass/backends/cuda/device/process_run.hpp"

#include <cmath>

namespace compass::backends::cuda::device {

using schedule::Buffer;
using schedule::BufferRole;

Status ProcessRun::reference_output(DeviceMemory& Y) {
  const auto& op = s_.op;
  const std::int64_t M = op.m, N = op.n, K = op.k;
  COMPASS_ASSIGN(const std::vector<ReferenceBlocks> blocks, reference_blocks(s_));
  COMPASS_ASSIGN(DeviceMemory X, DeviceMemory::allocate(dev_, M * K * eb_, "reference X"));
  COMPASS_ASSIGN(DeviceMemory W, DeviceMemory::allocate(dev_, K * N * eb_, "reference W"));
  COMPASS_ASSIGN(Y, DeviceMemory::allocate(dev_, M * N * 4, "reference Y"));
  const cudaStream_t st = res_->aux.get();
  auto place = [&](int index, void* dst, std::int64_t ldm, std::int64_t row0,
                   std::int64_t col0) -> Status {
    const Buffer& b = s_.buffers[static_cast<std::size_t>(index)];
    COMPASS_ASSIGN(DeviceMemory tmp, DeviceMemory::allocate(dev_, b.rows * b.cols * eb_, "reference block"));
    COMPASS_TRY(fill(index, tmp.get()));
    COMPASS_CUDA(cudaMemcpy2DAsync(static_cast<char*>(dst) + (row0 * ldm + col0) * eb_,
                                   static_cast<size_t>(ldm * eb_), tmp.get(),
                                   static_cast<size_t>(b.cols * eb_),
                                   static_cast<size_t>(b.cols * eb_), static_cast<size_t>(b.rows),
                                   cudaMemcpyDefault, st),
                 fmt::format("placing buffer '{}' of rank {} for the reference", b.name, b.rank));
    // tmp is freed on return: the copy must be done by then.
    COMPASS_CUDA(cudaStreamSynchronize(st), "the --check reference");
    return Status::success();
  };
  for (const ReferenceBlocks& r : blocks) {
    COMPASS_TRY(place(r.x, X.get(), K, r.x_row, r.x_col));
    COMPASS_TRY(place(r.w, W.get(), N, r.w_row, r.w_col));
  }
  const GemmCall call = reference_call(M, N, K, X.get(), W.get(), Y.get(), op.dtype);
  COMPASS_ASSIGN(DeviceMemory ws, DeviceMemory::allocate(dev_, kLtWorkspaceBytes, "reference workspace"));
  COMPASS_ASSIGN(LtGemm ref, LtGemm::prepare(res_->lt, call, kLtWorkspaceBytes,
                                             "the --check reference GEMM"));
  COMPASS_TRY(ref.run(ws.get(), st));
  COMPASS_CUDA(cudaStreamSynchronize(st), "the --check reference GEMM");
  return Status::success();
}

// This rank's "y" against its block of the reference Y [M, N] (FP32, row-major).
Result<RankError> ProcessRun::compare_mine(const DeviceMemory& Y) {
  COMPASS_ASSIGN(const std::vector<ReferenceBlocks> blocks, reference_blocks(s_));
  const ReferenceBlocks& block = blocks[static_cast<std::size_t>(me_)];
  const Buffer& y = s_.buffers[static_cast<std::size_t>(block.y)];
  const std::int64_t N = s_.op.n;
  const cudaStream_t st = res_->aux.get();
  COMPASS_ASSIGN(DeviceMemory yf, DeviceMemory::allocate(dev_, y.rows * y.cols * 4, "--check output"));
  COMPASS_CUDA(launch_to_float_2d(ptr_[static_cast<std::size_t>(block.y)], y.cols, y.rows, y.cols,
                                  elem_type(s_.op.dtype), static_cast<float*>(yf.get()), st),
               "--check conversion");
  std::vector<float> got(static_cast<size_t>(y.rows * y.cols)), want(got.size());
  COMPASS_CUDA(cudaMemcpyAsync(got.data(), yf.get(), got.size() * 4, cudaMemcpyDefault, st), "--check");
  COMPASS_CUDA(cudaMemcpy2DAsync(want.data(), static_cast<size_t>(y.cols * 4),
                                 static_cast<char*>(Y.get()) + (block.y_row * N + block.y_col) * 4,
                                 static_cast<size_t>(N * 4), static_cast<size_t>(y.cols * 4),
                                 static_cast<size_t>(y.rows), cudaMemcpyDefault, st),
               "--check");
  COMPASS_CUDA(cudaStreamSynchronize(st), "--check");
  return compare_values(got, want, y.cols, check_tolerance(s_.op.dtype));
}

// Whether an input or weight buffer of this rank no longer holds its initial values.
Result<bool> ProcessRun::inputs_modified() {
  const cudaStream_t st = res_->aux.get();
  for (std::size_t i = 0; i < s_.buffers.size(); ++i) {
    const Buffer& b = s_.buffers[i];
    if (b.rank != me_ || (b.role != BufferRole::input && b.role != BufferRole::weight)) continue;
    const std::int64_t bytes = res_->mem[i].bytes();
    COMPASS_ASSIGN(DeviceMemory fresh, DeviceMemory::allocate(dev_, bytes, "input check"));
    COMPASS_ASSIGN(DeviceMemory count, DeviceMemory::allocate(dev_, 8, "input check"));
    COMPASS_TRY(fill(static_cast<int>(i), fresh.get()));
    COMPASS_CUDA(cudaMemsetAsync(count.get(), 0, 8, st), "input check");
    COMPASS_CUDA(launch_count_differences(ptr_[i], fresh.get(), b.rows * b.cols * eb_,
                                          static_cast<unsigned long long*>(count.get()), st),
                 "input check");
    unsigned long long differ = 0;
    COMPASS_CUDA(cudaMemcpyAsync(&differ, count.get(), 8, cudaMemcpyDefault, st), "input check");
    COMPASS_CUDA(cudaStreamSynchronize(st), "input check");
    if (differ != 0) return true;
  }
  return false;
}

Status ProcessRun::check(CheckResult& report) {
  DeviceMemory Y;
  COMPASS_TRY(reference_output(Y));
  COMPASS_ASSIGN(const RankError e, compare_mine(Y));
  report.add(e.err, e.ref);
  report.worst = fmt::format("rank {} y[{}, {}]: got {}, want {}; {} elements over tolerance",
                             me_, e.at.first, e.at.second, e.val.first, e.val.second, e.bad);
  COMPASS_ASSIGN(const bool modified, inputs_modified());
  if (modified) {
    // Not a numerical error: fail the check whatever the output says.
    report.worst += fmt::format("; inputs of rank {} modified by the run", me_);
    report.max_abs_error = INFINITY;
    report.max_rel_error = INFINITY;
  }
  return Status::success();
}

}  // namespace compass::backends::cuda::device
