// The --check of the CUDA executor: a cuBLASLt reference of the whole operator (FP32
// output) built from the ranks' own inputs, compared with every rank's "y", and a check that
// the run left the inputs untouched.
#include <algorithm>
#include <cmath>

#include "compass/backends/cuda/device/run.hpp"

namespace compass::backends::cuda::device {

using schedule::Buffer;
using schedule::BufferRole;
using schedule::Region;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;

// The names of the input and weight buffers that no longer hold their initial values (a
// schedule must never write them); empty when all are intact.
Result<std::string> Run::modified_inputs() {
  std::string out;
  for (size_t i = 0; i < s_.buffers.size(); ++i) {
    const Buffer& b = s_.buffers[i];
    if (b.role != BufferRole::input && b.role != BufferRole::weight) continue;
    const int d = buffer_device(static_cast<int>(i));
    COMPASS_ASSIGN(DeviceMemory fresh, DeviceMemory::allocate(d, mem_[i].bytes(), "input check"));
    COMPASS_ASSIGN(DeviceMemory count, DeviceMemory::allocate(d, 8, "input check"));
    COMPASS_TRY(fill(static_cast<int>(i), fresh.get()));
    const cudaStream_t st = aux_.at(d).get();
    COMPASS_CUDA(cudaMemsetAsync(count.get(), 0, 8, st), "input check");
    COMPASS_CUDA(launch_count_differences(mem_[i].get(), fresh.get(), mem_[i].bytes(),
                                          static_cast<unsigned long long*>(count.get()), st),
                 "input check");
    unsigned long long differ = 0;
    COMPASS_CUDA(cudaMemcpyAsync(&differ, count.get(), 8, cudaMemcpyDefault, st), "input check");
    COMPASS_CUDA(cudaStreamSynchronize(st), "input check");
    if (differ != 0) out += fmt::format("{}'{}' of rank {}", out.empty() ? "" : ", ", b.name, b.rank);
  }
  return out;
}

// Copies buffer `index` into the rectangle at (row0, col0) of a dense matrix with `ld`
// columns on the reference device.
Status Run::place(int index, void* dst, std::int64_t ld, std::int64_t row0, std::int64_t col0) {
  const Buffer& b = s_.buffers[index];
  char* base = static_cast<char*>(dst) + (row0 * ld + col0) * eb_;
  // On the reference device's aux stream, where the reference GEMM runs next: a plain
  // cudaMemcpy2D between device buffers may return before the copy is done, and the legacy
  // stream it uses does not order the non-blocking aux stream, so the GEMM could read
  // half-placed operands (it did, on an H200, once the GEMM kernel was already loaded).
  COMPASS_CUDA(cudaMemcpy2DAsync(base, static_cast<size_t>(ld * eb_), mem_[index].get(),
                                 static_cast<size_t>(b.cols * eb_),
                                 static_cast<size_t>(b.cols * eb_), static_cast<size_t>(b.rows),
                                 cudaMemcpyDefault, aux_.at(ref_device_).get()),
               fmt::format("gathering buffer '{}' of rank {} for the reference", b.name, b.rank));
  return Status::success();
}

// The whole operator's output Y [M, N] in FP32 on the reference device, from the ranks'
// own inputs placed into a global X and W.
Status Run::reference_output(DeviceMemory& Y) {
  const auto& op = s_.op;
  const int p = s_.ranks();
  const std::int64_t M = op.m, N = op.n, K = op.k;
  COMPASS_ASSIGN(const std::vector<ReferenceBlocks> blocks, reference_blocks(s_));
  COMPASS_ASSIGN(DeviceMemory X, DeviceMemory::allocate(ref_device_, M * K * eb_, "reference X"));
  COMPASS_ASSIGN(DeviceMemory W, DeviceMemory::allocate(ref_device_, K * N * eb_, "reference W"));
  COMPASS_ASSIGN(Y, DeviceMemory::allocate(ref_device_, M * N * 4, "reference Y"));
  COMPASS_CUDA(cudaSetDevice(ref_device_), "--check");
  for (int r = 0; r < p; ++r) {
    COMPASS_TRY(place(blocks[r].x, X.get(), K, blocks[r].x_row, blocks[r].x_col));
    COMPASS_TRY(place(blocks[r].w, W.get(), N, blocks[r].w_row, blocks[r].w_col));
  }
  COMPASS_CUDA(cudaSetDevice(ref_device_), "--check");
  LtHandle* handle = nullptr;
  auto h = handles_.find(ref_device_);
  if (h == handles_.end()) {
    COMPASS_ASSIGN(LtHandle lt, LtHandle::create(ref_device_));
    h = handles_.emplace(ref_device_, std::move(lt)).first;
  }
  handle = &h->second;
  const GemmCall call = reference_call(M, N, K, X.get(), W.get(), Y.get(), op.dtype);
  COMPASS_ASSIGN(DeviceMemory ws, DeviceMemory::allocate(ref_device_, kLtWorkspaceBytes,
                                                         "reference workspace"));
  COMPASS_ASSIGN(LtGemm ref, LtGemm::prepare(*handle, call, kLtWorkspaceBytes,
                                             "the --check reference GEMM"));
  const cudaStream_t st = aux_.at(ref_device_).get();
  COMPASS_TRY(ref.run(ws.get(), st));
  COMPASS_CUDA(cudaStreamSynchronize(st), "the --check reference GEMM");
  return Status::success();
}

RankError compare_values(const std::vector<float>& got, const std::vector<float>& want,
                         std::int64_t cols, double tolerance) {
  RankError e;
  for (size_t i = 0; i < got.size(); ++i) e.ref = std::max(e.ref, std::fabs(double(want[i])));
  const double bad_above = tolerance * e.ref;
  for (size_t i = 0; i < got.size(); ++i) {
    double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    // NaN must fail the check, so compare with !(<=).
    if (std::isnan(diff)) diff = INFINITY;
    if (!(diff <= e.err)) {
      e.err = diff;
      e.at = {static_cast<std::int64_t>(i) / cols, static_cast<std::int64_t>(i) % cols};
      e.val = {got[i], want[i]};
    }
    if (!(diff <= bad_above)) ++e.bad;
  }
  return e;
}

// Compares one rank's "y" with its block of the reference Y [M, N] (FP32, row-major).
Result<RankError> Run::compare_rank(const ReferenceBlocks& block, const DeviceMemory& Y) {
  const auto& op = s_.op;
  const std::int64_t N = op.n;
  const int yi = block.y;
  const std::int64_t yr = s_.buffers[yi].rows, yc = s_.buffers[yi].cols;
  const std::int64_t row0 = block.y_row, col0 = block.y_col;
  const int d = buffer_device(yi);
  COMPASS_ASSIGN(DeviceMemory yf, DeviceMemory::allocate(d, yr * yc * 4, "--check output"));
  COMPASS_CUDA(launch_to_float_2d(mem_[yi].get(), yc, yr, yc, elem_type(op.dtype),
                                  static_cast<float*>(yf.get()), aux_.at(d).get()),
               "--check conversion");
  COMPASS_CUDA(cudaStreamSynchronize(aux_.at(d).get()), "--check conversion");
  std::vector<float> got(static_cast<size_t>(yr * yc)), want(static_cast<size_t>(yr * yc));
  COMPASS_CUDA(cudaMemcpy(got.data(), yf.get(), got.size() * 4, cudaMemcpyDefault), "--check");
  COMPASS_CUDA(cudaMemcpy2D(want.data(), static_cast<size_t>(yc * 4),
                            static_cast<char*>(Y.get()) + (row0 * N + col0) * 4,
                            static_cast<size_t>(N * 4), static_cast<size_t>(yc * 4),
                            static_cast<size_t>(yr), cudaMemcpyDefault),
               "--check");
  return compare_values(got, want, yc, check_tolerance(op.dtype));
}

// Compares every rank's "y" with the reference (reference_output) and records the largest
// error, where it is, and how many elements per rank exceed the tolerance; modified inputs
// fail the check whatever the outputs say.
Status Run::check(CheckResult& report) {
  const int p = s_.ranks();
  COMPASS_ASSIGN(const std::vector<ReferenceBlocks> blocks, reference_blocks(s_));
  DeviceMemory Y;
  COMPASS_TRY(reference_output(Y));
  std::vector<RankError> ranks;
  double max_abs_err = 0, max_abs_ref = 0;
  for (int r = 0; r < p; ++r) {
    COMPASS_ASSIGN(RankError e, compare_rank(blocks[r], Y));
    max_abs_err = std::max(max_abs_err, e.err);
    max_abs_ref = std::max(max_abs_ref, e.ref);
    ranks.push_back(e);
  }
  int worst = 0;
  for (int r = 1; r < p; ++r) {
    if (ranks[r].err > ranks[worst].err) worst = r;
  }
  std::string bad;
  for (int r = 0; r < p; ++r) bad += fmt::format("{}{}", r ? " " : "", ranks[r].bad);
  report.worst = fmt::format("rank {} y[{}, {}]: got {}, want {}; elements over tolerance "
                             "per rank: {}",
                             worst, ranks[worst].at.first, ranks[worst].at.second,
                             ranks[worst].val.first, ranks[worst].val.second, bad);
  report.add(max_abs_err, max_abs_ref);
  COMPASS_ASSIGN(const std::string modified, modified_inputs());
  if (!modified.empty()) {
    // Not a numerical error: fail the check whatever the outputs say.
    report.worst += "; inputs modified by the run: " + modified;
    report.max_rel_error = INFINITY;
  }
  return Status::success();
}

}  // namespace compass::backends::cuda::device
