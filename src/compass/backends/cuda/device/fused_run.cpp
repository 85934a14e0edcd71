// The fused kernels of a schedule's fused GEMM groups in the CUDA executor (the fused kernel
// of RunOptions::kernel): per rank with a group, one fused AG-GEMM launch in place of the
// group's first GEMM, whose tiles wait inside the kernel on the device flags of the transfers
// that deliver their rows (fused_plan.hpp builds the tile walk). A producer on the kernel's
// own stream is ordered by the stream and needs no flag. A flag wait that times out traps
// after writing a fault record into host-mapped memory (mapped_fault.hpp); the run's error
// then names the rank, the chunk and the flag.
#include <cstdlib>

#include "compass/backends/cuda/device/entry.hpp"
#include "compass/backends/cuda/device/run.hpp"
#include "compass/backends/cuda/fused.hpp"

namespace compass::backends::cuda::device {

using schedule::Schedule;
using schedule::Task;

namespace {

// Bands of this many M tiles are swept along N inside one piece (as in fused_check.cpp).
constexpr int kSwizzle = 4;

template <typename T>
Status upload(int device, const std::vector<T>& v, DeviceMemory& mem, std::string_view what) {
  const auto bytes = static_cast<std::int64_t>(std::max<std::size_t>(1, v.size()) * sizeof(T));
  COMPASS_ASSIGN(mem, DeviceMemory::allocate(device, bytes, what));
  if (!v.empty())
    COMPASS_CUDA(cudaMemcpy(mem.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
                 what);
  return Status::success();
}

bool fused_dtype(DType t) { return t == DType::bf16 || t == DType::fp16; }

}  // namespace

Result<KernelMode> choose_kernel(const Schedule& s, const RunOptions& o) {
  if (o.kernel == KernelMode::chunked || !fused_kernels_built() || !fused_dtype(s.op.dtype) ||
      s.op.kind != workload::OpKind::ag_gemm)
    return KernelMode::chunked;  // an explicit fused request was refused by the check
  const bool asked = o.kernel == KernelMode::fused;
  COMPASS_ASSIGN(const std::vector<FusedGroup> groups, fused_groups(s));
  if (groups.empty()) return KernelMode::chunked;
  COMPASS_ASSIGN(const int ndev, device_count());
  for (const FusedGroup& g : groups) {
    const int d = rank_device(s, o.mode, g.rank);
    if (d >= ndev) return KernelMode::chunked;  // the device setup reports the missing GPU
    COMPASS_ASSIGN(const DeviceInfo info, device_info(d));
    auto kernel = pick_fused_kernel(true, "auto", info);
    if (kernel.ok()) continue;
    if (!asked) return KernelMode::chunked;
    return make_error("rank {} on GPU {}: {}; use the chunked kernel", g.rank, d,
                      kernel.error().message);
  }
  return KernelMode::fused;
}

Status Run::prepare_fused() {
  if (o_.kernel != KernelMode::fused) return Status::success();
  COMPASS_ASSIGN(const std::vector<FusedGroup> groups, fused_groups(s_));
  if (groups.empty()) return Status::success();
  if (o_.sync != SyncMode::flags)
    return make_error("the fused kernels wait on device flags; the run was prepared with events");
  COMPASS_CUDA(cudaSetDevice(ref_device_), "the fused kernels' fault record");
  COMPASS_TRY(fault_.init());
  fused_of_task_.assign(s_.tasks.size(), -1);
  for (const FusedGroup& g : groups) {
    FusedLaunch f;
    COMPASS_TRY(upload_fused_plan(g, f));
    for (int t : g.tasks) fused_of_task_[static_cast<std::size_t>(t)] = static_cast<int>(fused_.size());
    fused_.push_back(std::move(f));
  }
  info_.kernel = "fused " + fused_kernel_label(fused_.front().sm90 ? "sm90" : "sm80");
  for (const FusedLaunch& f : fused_)
    if (f.sm90 != fused_.front().sm90) info_.kernel = "fused sm90 and sm80 (mixed GPUs)";
  return Status::success();
}

// The group's tile plan, wait lists and flag pointers on its GPU, and the launch arguments.
Status Run::upload_fused_plan(const FusedGroup& g, FusedLaunch& f) const {
  const Task& first = s_.tasks[static_cast<std::size_t>(g.tasks.front())];
  for (int t : g.tasks)
    if (s_.tasks[static_cast<std::size_t>(t)].b != first.b)
      return make_error("fused AG-GEMM of rank {}: task '{}' multiplies another B than '{}'",
                        g.rank, labels_[static_cast<std::size_t>(t)], labels_[first.id]);
  const int stream = task_stream(first.id);
  const int dev = plan_.streams[static_cast<std::size_t>(stream)].device;
  COMPASS_ASSIGN(const DeviceInfo info, device_info(dev));
  const Result<std::string> kernel = pick_fused_kernel(true, "auto", info);
  if (!kernel.ok()) return kernel.error();
  f.rank = g.rank;
  f.first_task = first.id;
  f.sm90 = kernel->compare("sm90") == 0;
  f.sm_count = info.sm_count;
  const TileShape tile =
      f.sm90 ? TileShape{kSm90TileM, kSm90TileN} : TileShape{kSm80TileM, kSm80TileN};
  COMPASS_ASSIGN(AgTilePlan plan, ag_tile_plan(s_.op.m, first.dst.cols, tile, g.pieces, kSwizzle));
  auto flags = piece_flags(s_, plan_, stream, g.pieces);
  if (!flags.ok())
    return make_error("fused AG-GEMM of rank {}: {}", g.rank, flags.error().message);
  COMPASS_ASSIGN(plan, ag_plan_with_flags(plan, *flags));
  std::vector<const std::uint32_t*> flag_ptrs;
  for (CUdeviceptr p : flag_ptr_) flag_ptrs.push_back(reinterpret_cast<const std::uint32_t*>(p));
  const std::string what = fmt::format("the fused AG-GEMM plan of rank {}", g.rank);
  COMPASS_TRY(upload(dev, plan.tiles, f.tiles, what));
  COMPASS_TRY(upload(dev, plan.waits, f.waits, what));
  COMPASS_TRY(upload(dev, flag_ptrs, f.flags, what));
  FusedAgArgs& a = f.args;
  a.type = elem_type(s_.op.dtype);
  a.m = s_.op.m;
  a.n = first.dst.cols;
  a.k = first.src.cols;
  a.a = mem_[static_cast<std::size_t>(first.src.buffer)].get();  // whole rows from row 0
  a.lda = ld(first.src);
  a.b = ptr(first.b);
  a.ldb = ld(first.b);
  a.d = mem_[static_cast<std::size_t>(first.dst.buffer)].get();
  a.ldd = ld(first.dst);
  a.tiles = static_cast<const AgTile*>(f.tiles.get());
  a.num_tiles = static_cast<int>(plan.tiles.size());
  a.waits = static_cast<const std::int32_t*>(f.waits.get());
  a.wait.flags = static_cast<const std::uint32_t* const*>(f.flags.get());
  a.wait.timeout_ns = static_cast<long long>(o_.fused_timeout_s * 1e9);
  a.wait.fault = fault_.device();
  a.wait.rank = g.rank;
  return Status::success();
}

bool Run::in_fused_group(int task) const {
  return !fused_of_task_.empty() && fused_of_task_[static_cast<std::size_t>(task)] >= 0;
}

// The group's kernel in place of its first GEMM; the group's other GEMMs are inside it.
Status Run::launch_fused(const Task& t, cudaStream_t stream) {
  FusedLaunch& f = fused_[static_cast<std::size_t>(fused_of_task_[static_cast<std::size_t>(t.id)])];
  if (f.first_task != t.id) return Status::success();
  f.args.wait.target = ag_flag_target(iteration_);
  const cudaError_t e = f.sm90 ? launch_fused_ag_sm90(f.args, f.sm_count, stream)
                               : launch_fused_ag_sm80(f.args, stream);
  COMPASS_CUDA(e, fmt::format("the fused AG-GEMM of rank {} ({})", f.rank, info_.kernel));
  return Status::success();
}

// The error of a fused kernel that trapped on a flag timeout, if one did. The kernel's waits
// name dependency flags: the chunk is the producer task's.
Status Run::fused_fault() const {
  if (!fault_.initialised()) return Status::success();
  const FusedFault f = fault_.read();
  if (f.code == kFaultNone) return Status::success();
  int chunk = -1;
  if (f.flag >= 0 && static_cast<std::size_t>(f.flag) < plan_.event_task.size())
    chunk = s_.tasks[static_cast<std::size_t>(plan_.event_task[static_cast<std::size_t>(f.flag)])]
                .chunk;
  return make_error("{}", fused_fault_message(f, "fused AG-GEMM", o_.fused_timeout_s, chunk));
}

}  // namespace compass::backends::cuda::device
