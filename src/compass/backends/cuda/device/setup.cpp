// Device setup of the CUDA executor: devices, peer access, buffers, streams, events or
// flags, GEMM plans and the inputs of one schedule.
#include <algorithm>
#include <cstdlib>

#include "compass/backends/cuda/device/entry.hpp"
#include "compass/backends/cuda/device/run.hpp"

namespace compass::backends::cuda::device {

using schedule::Buffer;
using schedule::BufferRole;
using schedule::Region;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;

Result<int> device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    // No driver, no device and a broken driver all mean the same to the user.
    return make_error("no CUDA device found");
  }
  if (n <= 0) return make_error("no CUDA device found");
  return n;
}

Result<StreamMemOps> StreamMemOps::load() {
  StreamMemOps ops;
  auto get = [](const char* symbol, void** fn) -> Status {
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    COMPASS_CUDA(cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &found),
                 fmt::format("the driver entry point {}", symbol));
    if (found != cudaDriverEntryPointSuccess || *fn == nullptr) {
      return make_error("the CUDA driver does not provide {} (needed by device flags: --sync flags and the fused kernels)", symbol);
    }
    return Status::success();
  };
  COMPASS_TRY(get("cuStreamWaitValue32", reinterpret_cast<void**>(&ops.wait)));
  COMPASS_TRY(get("cuStreamWriteValue32", reinterpret_cast<void**>(&ops.write)));
  COMPASS_TRY(get("cuGetErrorName", reinterpret_cast<void**>(&ops.error_name)));
  return ops;
}

Status StreamMemOps::check(CUresult r, std::string_view call, std::string_view what) const {
  if (r == CUDA_SUCCESS) return Status::success();
  const char* name = nullptr;
  if (error_name == nullptr || error_name(r, &name) != CUDA_SUCCESS) name = nullptr;
  return make_error("{} failed for {}: {} ({})", call, what, name ? name : "unknown error",
                    static_cast<int>(r));
}

ElemType elem_type(DType t) {
  switch (t) {
    case DType::fp16: return ElemType::f16;
    case DType::bf16: return ElemType::bf16;
    default: return ElemType::f32;
  }
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == "1";
}

Run::Run(const Schedule& s, const RunOptions& o) : s_(s), o_(o), eb_(dtype_bytes(s.op.dtype)) {
  serialize_ = o.serialize || env_flag("COMPASS_CUDA_SERIALIZE");
}

Status Run::setup() {
  COMPASS_TRY(check_devices());
  ref_device_ = rank_device(s_, o_.mode, 0);
  COMPASS_TRY(enable_peer_access());
  COMPASS_TRY(allocate_buffers());
  COMPASS_TRY(create_streams_and_events());
  if (o_.sync == SyncMode::flags) COMPASS_TRY(create_flags());
  COMPASS_TRY(prepare_tasks());
  COMPASS_TRY(prepare_fused());
  COMPASS_TRY(fill_inputs());
  return describe_devices();
}

// Every rank's GPU is visible, and the schedule maps onto streams.
Status Run::check_devices() {
  COMPASS_ASSIGN(int ndev, device_count());
  COMPASS_ASSIGN(plan_, make_stream_plan(s_, o_.mode));
  for (int r = 0; r < s_.ranks(); ++r) {
    const int d = rank_device(s_, o_.mode, r);
    if (d >= ndev) {
      return make_error(
          "rank {} needs GPU {}, but only {} CUDA device{} visible (use virtual ranks)", r, d,
          ndev, ndev == 1 ? " is" : "s are");
    }
  }
  return Status::success();
}

// The GPU names ("NVIDIA H200 x8" for eight of one kind), streams, events and sync mode.
Status Run::describe_devices() {
  std::vector<std::string> names;
  for (int d : plan_.devices) {
    COMPASS_ASSIGN(DeviceInfo dev, device_info(d));
    if (std::find(names.begin(), names.end(), dev.name) == names.end()) names.push_back(dev.name);
  }
  for (size_t i = 0; i < names.size(); ++i) info_.device += (i ? ", " : "") + names[i];
  if (plan_.devices.size() > 1) info_.device += fmt::format(" x{}", plan_.devices.size());
  info_.streams = static_cast<int>(streams_.size());
  info_.events = static_cast<int>(plan_.event_task.size());
  info_.sync = std::string(to_string(o_.sync));
  return Status::success();
}

Status Run::enable_peer_access() {
  if (o_.mode != LaunchMode::multi_gpu) return Status::success();
  for (int a : plan_.devices) {
    for (int b : plan_.devices) {
      if (a == b) continue;
      int can = 0;
      COMPASS_CUDA(cudaDeviceCanAccessPeer(&can, a, b), fmt::format("GPU {} -> GPU {}", a, b));
      if (!can) continue;  // copies still work, staged by the driver; adds check below
      COMPASS_CUDA(cudaSetDevice(a), "peer access");
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();
      } else {
        COMPASS_CUDA(e, fmt::format("peer access GPU {} -> GPU {}", a, b));
      }
      peer_.insert({a, b});
    }
  }
  return Status::success();
}

Status Run::allocate_buffers() {
  std::map<int, std::int64_t> need;
  for (size_t i = 0; i < s_.buffers.size(); ++i) {
    need[buffer_device(static_cast<int>(i))] += s_.buffers[i].rows * s_.buffers[i].cols * eb_;
  }
  for (auto [d, bytes] : need) {
    size_t free_bytes = 0, total_bytes = 0;
    COMPASS_CUDA(cudaSetDevice(d), "memory check");
    COMPASS_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes), fmt::format("GPU {}", d));
    // Keep room for workspaces, the reference and the CUDA context.
    if (static_cast<double>(bytes) > 0.9 * static_cast<double>(free_bytes)) {
      return make_error("the schedule's buffers need {:.2f} GiB on GPU {}, but only {:.2f} GiB "
                        "are free",
                        bytes / 1073741824.0, d, free_bytes / 1073741824.0);
    }
  }
  mem_.reserve(s_.buffers.size());
  for (size_t i = 0; i < s_.buffers.size(); ++i) {
    const Buffer& b = s_.buffers[i];
    COMPASS_ASSIGN(DeviceMemory m,
                   DeviceMemory::allocate(buffer_device(static_cast<int>(i)), b.rows * b.cols * eb_,
                                          fmt::format("buffer '{}' of rank {}", b.name, b.rank)));
    mem_.push_back(std::move(m));
  }
  return Status::success();
}

Status Run::create_streams_and_events() {
  for (const StreamSpec& spec : plan_.streams) {
    int least = 0, greatest = 0;
    COMPASS_CUDA(cudaSetDevice(spec.device), "stream priorities");
    COMPASS_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest),
                 fmt::format("GPU {}", spec.device));
    // Debugging aid COMPASS_CUDA_NO_PRIORITIES=1: every stream at the default priority.
    const int priority = env_flag("COMPASS_CUDA_NO_PRIORITIES") ? 0
                         : spec.high_priority                    ? greatest
                                                                 : least;
    COMPASS_ASSIGN(Stream st, Stream::create(spec.device, priority));
    streams_.push_back(std::move(st));
    COMPASS_ASSIGN(Event end, Event::create(spec.device, false));
    stream_end_.push_back(std::move(end));
  }
  for (int task : plan_.event_task) {
    if (o_.sync == SyncMode::flags) break;  // flags instead, see create_flags()
    const int stream = task_stream(task);
    COMPASS_ASSIGN(Event e, Event::create(plan_.streams[stream].device, false));
    events_.push_back(std::move(e));
  }
  COMPASS_ASSIGN(timing_stream_, Stream::create(ref_device_, 0));
  COMPASS_ASSIGN(start_, Event::create(ref_device_, true));
  COMPASS_ASSIGN(stop_, Event::create(ref_device_, true));
  for (int d : plan_.devices) {
    COMPASS_ASSIGN(Stream st, Stream::create(d, 0));
    aux_.emplace(d, std::move(st));
  }
  if (aux_.find(ref_device_) == aux_.end()) {
    COMPASS_ASSIGN(Stream st, Stream::create(ref_device_, 0));
    aux_.emplace(ref_device_, std::move(st));
  }
  return Status::success();
}

// One 32-bit flag per dependency, in the memory of the producer's device, zeroed. A
// consumer on another GPU reads it through peer access.
Status Run::create_flags() {
  COMPASS_ASSIGN(mem_ops_, StreamMemOps::load());
  const int n = static_cast<int>(plan_.event_task.size());
  std::map<int, std::int64_t> count;
  std::vector<int> flag_device(n);
  for (int e = 0; e < n; ++e) {
    flag_device[e] = plan_.streams[task_stream(plan_.event_task[e])].device;
    ++count[flag_device[e]];
  }
  std::map<int, int> base;
  for (auto [d, c] : count) {
    COMPASS_ASSIGN(DeviceMemory m, DeviceMemory::allocate(d, c * 4, "dependency flags"));
    COMPASS_CUDA(cudaMemset(m.get(), 0, static_cast<size_t>(c * 4)), "dependency flags");
    base[d] = static_cast<int>(flags_.size());
    flags_.push_back(std::move(m));
  }
  std::map<int, std::int64_t> used;
  flag_ptr_.resize(n);
  for (int e = 0; e < n; ++e) {
    const int d = flag_device[e];
    flag_ptr_[e] = reinterpret_cast<CUdeviceptr>(flags_[base[d]].get()) + 4 * used[d]++;
  }
  for (const TaskIssue& is : plan_.issues) {
    const int dev = plan_.streams[is.stream].device;
    for (int e : is.wait_events) {
      if (flag_device[e] != dev && peer_.count({dev, flag_device[e]}) == 0) {
        return make_error("{} waits on a flag on GPU {} without peer access from GPU {}; use "
                          "--sync events",
                          task_label(s_.tasks[is.task]), flag_device[e], dev);
      }
    }
  }
  return Status::success();
}

int Run::task_stream(int task) const {
  for (const TaskIssue& is : plan_.issues) {
    if (is.task == task) return is.stream;
  }
  return 0;
}

Status Run::prepare_tasks() {
  const int n = static_cast<int>(s_.tasks.size());
  labels_.resize(n);
  gemms_.resize(n);
  workspace_.resize(streams_.size());
  for (const TaskIssue& is : plan_.issues) {
    const Task& t = s_.tasks[is.task];
    labels_[t.id] = task_label(t);
    const int dev = plan_.streams[is.stream].device;
    if (t.kind == TaskKind::gemm) {
      // Debugging aid COMPASS_CUDA_HANDLE_PER_STREAM=1: one cuBLASLt handle per stream.
      const int key = env_flag("COMPASS_CUDA_HANDLE_PER_STREAM") ? -1 - is.stream : dev;
      auto h = handles_.find(key);
      if (h == handles_.end()) {
        COMPASS_ASSIGN(LtHandle lt, LtHandle::create(dev));
        h = handles_.emplace(key, std::move(lt)).first;
      }
      for (const Region* r : {&t.src, &t.b, &t.dst}) {
        if (buffer_device(r->buffer) != dev) {
          return make_error("{}: a GEMM operand is in buffer '{}' of rank {}, on another GPU",
                            labels_[t.id], s_.buffers[r->buffer].name, s_.owner(*r));
        }
      }
      const GemmCall call = task_gemm_call(
          t, s_.op.dtype, [this](const schedule::Region& r) { return ptr(r); },
          [this](const schedule::Region& r) { return ld(r); });
      COMPASS_ASSIGN(gemms_[t.id],
                     LtGemm::prepare(h->second, call, kLtWorkspaceBytes, labels_[t.id]));
      if (workspace_[is.stream].get() == nullptr) {
        COMPASS_ASSIGN(workspace_[is.stream],
                       DeviceMemory::allocate(dev, kLtWorkspaceBytes, "cuBLASLt workspace"));
      }
    } else if (t.kind == TaskKind::add) {
      if (t.src.rows != t.dst.rows || t.src.cols != t.dst.cols) {
        return make_error("{}: add regions differ in shape ({}x{} vs {}x{})", labels_[t.id],
                          t.src.rows, t.src.cols, t.dst.rows, t.dst.cols);
      }
      for (const Region* r : {&t.src, &t.dst}) {
        const int d = buffer_device(r->buffer);
        if (d != dev && peer_.count({dev, d}) == 0) {
          return make_error("{}: the add reads buffer '{}' on GPU {} without peer access from "
                            "GPU {}",
                            labels_[t.id], s_.buffers[r->buffer].name, d, dev);
        }
      }
    } else if (t.src.rows != t.dst.rows || t.src.cols != t.dst.cols) {
      return make_error("{}: source and destination regions differ in shape ({}x{} vs {}x{})",
                        labels_[t.id], t.src.rows, t.src.cols, t.dst.rows, t.dst.cols);
    }
  }
  return Status::success();
}

Status Run::fill_inputs() {
  for (size_t i = 0; i < s_.buffers.size(); ++i) {
    const Buffer& b = s_.buffers[i];
    if (b.role != BufferRole::input && b.role != BufferRole::weight) continue;
    COMPASS_TRY(fill(static_cast<int>(i), mem_[i].get()));
  }
  return sync_aux();
}

// Writes buffer `index`'s pseudo-random input values to `dst` (on the buffer's device).
Status Run::fill(int index, void* dst) {
  const Buffer& b = s_.buffers[index];
  const int d = buffer_device(index);
  COMPASS_CUDA(cudaSetDevice(d), "filling inputs");
  COMPASS_CUDA(launch_fill_uniform(dst, b.rows * b.cols, elem_type(s_.op.dtype),
                                   input_seed(o_.seed, index),
                                   aux_.at(d).get()),
               fmt::format("filling buffer '{}' of rank {}", b.name, b.rank));
  return Status::success();
}

Status Run::sync_aux() {
  for (auto& [d, st] : aux_) {
    COMPASS_CUDA(cudaSetDevice(d), "synchronising");
    COMPASS_CUDA(cudaStreamSynchronize(st.get()), fmt::format("GPU {}", d));
  }
  return Status::success();
}

}  // namespace compass::backends::cuda::device
