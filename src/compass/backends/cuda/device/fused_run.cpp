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
  if (o.kernel == KernelMode::chunked || !fused_kernels_built() || !fused_dtype(s.op.dtype))
    return KernelMode::chunked;  // an explicit fused request was refused by the check
  const bool asked = o.kernel == KernelMode::fused;
  COMPASS_ASSIGN(const std::vector<FusedGroup> groups, fused_groups(s));
  if (groups.empty() || !check_fused_shapes(s, groups).ok()) return KernelMode::chunked;
  COMPASS_ASSIGN(const int ndev, device_count());
  for (const FusedGroup& g : groups) {
    const int d = rank_device(s, o.mode, g.rank);
    if (d >= ndev) return KernelMode::chunked;  // the device setup reports the missing GPU
    COMPASS_ASSIGN(const DeviceInfo info, device_info(d));
    auto kernel = pick_fused_kernel("auto", info);
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
  absorbed_.assign(s_.tasks.size(), 0);
  for (const FusedGroup& g : groups) {
    if (s_.op.kind == workload::OpKind::ag_gemm) break;
    COMPASS_ASSIGN(const std::vector<int> stores, rs_store_tasks(s_, g));
    for (int t : stores)
      if (t >= 0) absorbed_[static_cast<std::size_t>(t)] = 1;
  }
  if (s_.op.kind != workload::OpKind::ag_gemm) COMPASS_TRY(prepare_rs_sums());
  info_.kernel = "fused " + fused_kernel_label(fused_.front().sm90 ? "sm90" : "sm80");
  for (const FusedLaunch& f : fused_)
    if (f.sm90 != fused_.front().sm90) info_.kernel = "fused sm90 and sm80 (mixed GPUs)";
  return Status::success();
}

// The kernel for the group's GPU, then the plan of its kind.
Status Run::upload_fused_plan(const FusedGroup& g, FusedLaunch& f) {
  const Task& first = s_.tasks[static_cast<std::size_t>(g.tasks.front())];
  for (int t : g.tasks)
    if (s_.tasks[static_cast<std::size_t>(t)].b != first.b)
      return make_error("fused GEMM of rank {}: task '{}' multiplies another B than '{}'",
                        g.rank, labels_[static_cast<std::size_t>(t)], labels_[first.id]);
  const int stream = task_stream(first.id);
  const int dev = plan_.streams[static_cast<std::size_t>(stream)].device;
  COMPASS_ASSIGN(const DeviceInfo info, device_info(dev));
  f.rs = s_.op.kind != workload::OpKind::ag_gemm;
  const Result<std::string> kernel = pick_fused_kernel("auto", info);
  if (!kernel.ok()) return kernel.error();
  f.rank = g.rank;
  f.first_task = first.id;
  f.sm90 = kernel->compare("sm90") == 0;
  f.sm_count = info.sm_count;
  return f.rs ? upload_rs_plan(g, f) : upload_ag_plan(g, f);
}

// The group's tile plan, wait lists and flag pointers on its GPU, and the launch arguments.
Status Run::upload_ag_plan(const FusedGroup& g, FusedLaunch& f) const {
  const Task& first = s_.tasks[static_cast<std::size_t>(g.tasks.front())];
  const int stream = task_stream(first.id);
  const int dev = plan_.streams[static_cast<std::size_t>(stream)].device;
  COMPASS_ASSIGN(AgTilePlan plan, ag_tile_plan(s_.op.m, first.dst.cols, fused_tile_shape(f.sm90),
                                               g.pieces, kFusedSwizzle));
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

// Per piece of a GEMM-RS group: its first global row, where the kernel stores it (the
// owner's slot for this rank: the destination of the transfer the kernel replaces, or the
// GEMM's own output for the own chunk) and the counter of its chunk. Every slot must have the
// GEMM output's row pitch, and a slot on another GPU needs peer access (a kernel store, unlike
// a copy, is not staged by the driver).
Status Run::rs_piece_slots(const FusedGroup& g, std::vector<std::int64_t>& rows,
                           std::vector<void*>& out, std::vector<std::uint32_t*>& counters) {
  COMPASS_ASSIGN(const std::vector<int> stores, rs_store_tasks(s_, g));
  const int dev = buffer_device(s_.tasks[static_cast<std::size_t>(g.tasks.front())].dst.buffer);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& gemm = s_.tasks[static_cast<std::size_t>(g.tasks[i])];
    const schedule::Region slot =
        stores[i] < 0 ? gemm.dst : s_.tasks[static_cast<std::size_t>(stores[i])].dst;
    const int owner_dev = buffer_device(slot.buffer);
    if (ld(slot) != ld(gemm.dst) || slot.col != 0 || slot.cols != gemm.dst.cols)
      return make_error("fused GEMM-RS of rank {}: the slot of '{}' is not whole rows of pitch {}",
                        g.rank, labels_[gemm.id], ld(gemm.dst));
    if (owner_dev != dev && !peer_.count({dev, owner_dev}))
      return make_error("fused GEMM-RS of rank {}: GPU {} has no peer access to GPU {} for the "
                        "kernel's stores; use the chunked kernel",
                        g.rank, dev, owner_dev);
    rows.push_back(g.pieces[i].row);
    out.push_back(ptr(slot));
    counters.push_back(
        static_cast<std::uint32_t*>(rs_counters_[static_cast<std::size_t>(gemm.chunk)].get()));
  }
  return Status::success();
}

// A GEMM-RS group: the tiles in compute order, the owners' slots and the chunk counters.
Status Run::upload_rs_plan(const FusedGroup& g, FusedLaunch& f) {
  const Task& first = s_.tasks[static_cast<std::size_t>(g.tasks.front())];
  const int dev = buffer_device(first.dst.buffer);
  if (rs_counters_.empty())
    for (int j = 0; j < s_.ranks(); ++j) {
      const int owner_dev = rank_device(s_, o_.mode, j);
      COMPASS_ASSIGN(DeviceMemory c, DeviceMemory::allocate(owner_dev, 4, "a GEMM-RS counter"));
      COMPASS_CUDA(cudaSetDevice(owner_dev), "a GEMM-RS counter");
      COMPASS_CUDA(cudaMemset(c.get(), 0, 4), "a GEMM-RS counter");
      rs_counters_.push_back(std::move(c));
    }
  COMPASS_ASSIGN(const RsTilePlan plan, rs_tile_plan(s_.op.m, first.dst.cols,
                                                     fused_tile_shape(f.sm90), g.pieces, kFusedSwizzle));
  COMPASS_ASSIGN(const std::vector<int> per_chunk, rs_tiles_per_chunk(plan, g.pieces, s_.ranks()));
  rs_chunk_tiles_.resize(per_chunk.size(), 0);
  for (std::size_t j = 0; j < per_chunk.size(); ++j) rs_chunk_tiles_[j] += per_chunk[j];
  std::vector<std::int64_t> rows;
  std::vector<void*> out;
  std::vector<std::uint32_t*> counters;
  COMPASS_TRY(rs_piece_slots(g, rows, out, counters));
  const std::string what = fmt::format("the fused GEMM-RS plan of rank {}", g.rank);
  COMPASS_TRY(upload(dev, plan.tiles, f.tiles, what));
  COMPASS_TRY(upload(dev, rows, f.piece_row, what));
  COMPASS_TRY(upload(dev, out, f.piece_out, what));
  COMPASS_TRY(upload(dev, counters, f.piece_counter, what));
  FusedRsArgs& a = f.rs_args;
  a.type = elem_type(s_.op.dtype);
  a.m = s_.op.m;
  a.n = first.dst.cols;
  a.k = first.src.cols;
  a.a = mem_[static_cast<std::size_t>(first.src.buffer)].get();  // x: global rows from row 0
  a.lda = ld(first.src);
  a.b = ptr(first.b);
  a.ldb = ld(first.b);
  a.tiles = static_cast<const RsTile*>(f.tiles.get());
  a.num_tiles = static_cast<int>(plan.tiles.size());
  a.num_pieces = static_cast<int>(rows.size());
  a.piece_row = static_cast<const std::int64_t*>(f.piece_row.get());
  a.piece_out = static_cast<void* const*>(f.piece_out.get());
  a.ldd = ld(first.dst);
  a.piece_counter = static_cast<std::uint32_t* const*>(f.piece_counter.get());
  return Status::success();
}

// The owners' sums of a schedule with GEMM-RS groups, each run as one ordered-sum kernel.
Status Run::prepare_rs_sums() {
  COMPASS_ASSIGN(rs_sums_, rs_sums(s_));
  sum_of_task_.assign(s_.tasks.size(), -1);
  for (std::size_t i = 0; i < rs_sums_.size(); ++i) {
    const RsSum& sum = rs_sums_[i];
    if (sum.parts.size() > 64)
      return make_error("GEMM-RS sum of rank {}: {} partials, the ordered sum takes at most 64",
                        sum.owner, sum.parts.size());
    for (const schedule::Region& part : sum.parts)
      if (ld(part) != ld(sum.parts.front()) || part.rows != sum.dst.rows ||
          part.cols != sum.dst.cols)
        return make_error("GEMM-RS sum of rank {}: its partials differ in shape or row pitch",
                          sum.owner);
    for (int t : sum.tasks) sum_of_task_[static_cast<std::size_t>(t)] = static_cast<int>(i);
  }
  return Status::success();
}

bool Run::in_rs_sum(int task) const {
  return !sum_of_task_.empty() && sum_of_task_[static_cast<std::size_t>(task)] >= 0;
}

// The owner's sum of its chunk at the sum's last task (the earlier copy and adds are inside
// it): every block waits for the chunk's tile counter to reach this iteration's count, then
// the partials are added in rank order in FP32 and rounded once.
Status Run::launch_sum(const Task& t, cudaStream_t stream) {
  const RsSum& sum = rs_sums_[static_cast<std::size_t>(sum_of_task_[static_cast<std::size_t>(t.id)])];
  if (sum.tasks.back() != t.id) return Status::success();
  std::vector<const void*> parts;
  for (const schedule::Region& r : sum.parts) parts.push_back(ptr(r));
  const auto chunk = static_cast<std::size_t>(sum.owner);
  CounterWait w;
  w.counter = static_cast<const std::uint32_t*>(rs_counters_.at(chunk).get());
  COMPASS_ASSIGN(w.target, rs_counter_target(iteration_, rs_chunk_tiles_.at(chunk)));
  w.timeout_ns = static_cast<long long>(o_.fused_timeout_s * 1e9);
  w.fault = fault_.device();
  w.rank = sum.owner;
  w.chunk = sum.owner;
  COMPASS_CUDA(launch_sum_ordered_wait_2d(ptr(sum.dst), ld(sum.dst), parts.data(),
                                          static_cast<int>(parts.size()), ld(sum.parts.front()),
                                          sum.dst.rows, sum.dst.cols, elem_type(s_.op.dtype), w,
                                          stream),
               labels_[static_cast<std::size_t>(t.id)]);
  return Status::success();
}

bool Run::absorbed(int task) const {
  return !absorbed_.empty() && absorbed_[static_cast<std::size_t>(task)] != 0;
}

bool Run::in_fused_group(int task) const {
  return !fused_of_task_.empty() && fused_of_task_[static_cast<std::size_t>(task)] >= 0;
}

// The group's kernel in place of its first GEMM; the group's other GEMMs are inside it.
Status Run::launch_fused(const Task& t, cudaStream_t stream) {
  FusedLaunch& f = fused_[static_cast<std::size_t>(fused_of_task_[static_cast<std::size_t>(t.id)])];
  if (f.first_task != t.id) return Status::success();
  if (f.rs) {
    const cudaError_t e = f.sm90 ? launch_fused_rs_sm90(f.rs_args, f.sm_count, stream)
                                 : launch_fused_rs_sm80(f.rs_args, stream);
    COMPASS_CUDA(e, fmt::format("the fused GEMM-RS of rank {} ({})", f.rank, info_.kernel));
    return Status::success();
  }
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
  if (f.tile < 0)  // an owner's ordered sum on its chunk counter (flag = chunk)
    return make_error("{}", fused_fault_message(f, "GEMM-RS ordered sum", o_.fused_timeout_s, f.flag));
  int chunk = -1;
  if (f.flag >= 0 && static_cast<std::size_t>(f.flag) < plan_.event_task.size())
    chunk = s_.tasks[static_cast<std::size_t>(plan_.event_task[static_cast<std::size_t>(f.flag)])]
                .chunk;
  return make_error("{}", fused_fault_message(f, "fused AG-GEMM", o_.fused_timeout_s, chunk));
}

}  // namespace compass::backends::cuda::device
