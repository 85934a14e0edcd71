// The CUDA executor: runs a Schedule with one stream per (rank, resource), events for
// dependencies across streams, cuBLASLt for GEMM tasks, a small kernel for adds and
// cudaMemcpy(2D)Async for transfers and copies (copy engines; peer copies between GPUs).
#include <cuda.h>  // types of the stream memory operations only; no libcuda link
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "compass/backends/cuda/device/cuda_util.hpp"
#include "compass/backends/cuda/device/entry.hpp"
#include "compass/backends/cuda/device/kernels.hpp"
#include "compass/backends/cuda/device/lt_gemm.hpp"
#include "compass/backends/cuda/stream_plan.hpp"

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

namespace {

// The driver's stream memory operations, looked up through the runtime so that the binaries
// need no link against libcuda (the driver provides them wherever a GPU is).
struct StreamMemOps {
  decltype(&cuStreamWaitValue32_v2) wait = nullptr;
  decltype(&cuStreamWriteValue32_v2) write = nullptr;
  decltype(&cuGetErrorName) error_name = nullptr;

  static Result<StreamMemOps> load() {
    StreamMemOps ops;
    auto get = [](const char* symbol, void** fn) -> Status {
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      COMPASS_CUDA(cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &found),
                   fmt::format("the driver entry point {}", symbol));
      if (found != cudaDriverEntryPointSuccess || *fn == nullptr) {
        return make_error("the CUDA driver does not provide {} (needed by --sync flags)", symbol);
      }
      return Status::success();
    };
    COMPASS_TRY(get("cuStreamWaitValue32", reinterpret_cast<void**>(&ops.wait)));
    COMPASS_TRY(get("cuStreamWriteValue32", reinterpret_cast<void**>(&ops.write)));
    COMPASS_TRY(get("cuGetErrorName", reinterpret_cast<void**>(&ops.error_name)));
    return ops;
  }

  Status check(CUresult r, std::string_view call, std::string_view what) const {
    if (r == CUDA_SUCCESS) return Status::success();
    const char* name = nullptr;
    if (error_name == nullptr || error_name(r, &name) != CUDA_SUCCESS) name = nullptr;
    return make_error("{} failed for {}: {} ({})", call, what, name ? name : "unknown error",
                      static_cast<int>(r));
  }
};

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

std::string task_label(const Task& t) {
  return t.name.empty() ? fmt::format("task {}", t.id)
                        : fmt::format("task {} ('{}')", t.id, t.name);
}

// Everything one run owns on the GPUs. Members are destroyed in reverse order: GEMM plans
// before handles, events and streams before memory.
class Run {
 public:
  Run(const Schedule& s, const RunOptions& o) : s_(s), o_(o), eb_(dtype_bytes(s.op.dtype)) {
    serialize_ = o.serialize || env_flag("COMPASS_CUDA_SERIALIZE");
  }

  Result<RunReport> execute() {
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
    ref_device_ = rank_device(s_, o_.mode, 0);
    COMPASS_TRY(enable_peer_access());
    COMPASS_TRY(allocate_buffers());
    COMPASS_TRY(create_streams_and_events());
    if (o_.sync == SyncMode::flags) COMPASS_TRY(create_flags());
    COMPASS_TRY(prepare_tasks());
    COMPASS_TRY(fill_inputs());

    RunReport report;
    std::vector<std::string> names;
    for (int d : plan_.devices) {
      COMPASS_ASSIGN(DeviceInfo info, device_info(d));
      if (std::find(names.begin(), names.end(), info.name) == names.end()) names.push_back(info.name);
    }
    for (size_t i = 0; i < names.size(); ++i) report.device += (i ? ", " : "") + names[i];
    if (plan_.devices.size() > 1) report.device += fmt::format(" x{}", plan_.devices.size());
    report.streams = static_cast<int>(streams_.size());
    report.events = static_cast<int>(plan_.event_task.size());
    report.sync = std::string(to_string(o_.sync));

    for (int it = 0; it < o_.warmup + o_.repeat; ++it) {
      COMPASS_ASSIGN(double t, iteration());
      if (it >= o_.warmup) report.times_s.push_back(t);
    }
    std::vector<double> sorted = report.times_s;
    std::sort(sorted.begin(), sorted.end());
    report.min_s = sorted.front();
    report.max_s = sorted.back();
    const size_t n = sorted.size();
    report.median_s = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);

    report.tolerance = check_tolerance(s_.op.dtype);
    if (o_.check) {
      COMPASS_TRY(check(report));
      report.checked = true;
      report.check_passed = report.max_rel_error <= report.tolerance;
    }
    return report;
  }

 private:
  int buffer_device(int buffer) const { return rank_device(s_, o_.mode, s_.buffers[buffer].rank); }

  char* ptr(const Region& r) const {
    const Buffer& b = s_.buffers[r.buffer];
    return static_cast<char*>(mem_[r.buffer].get()) + (r.row * b.cols + r.col) * eb_;
  }
  std::int64_t ld(const Region& r) const { return s_.buffers[r.buffer].cols; }

  Status enable_peer_access() {
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

  Status allocate_buffers() {
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

  Status create_streams_and_events() {
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
  Status create_flags() {
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

  int task_stream(int task) const {
    for (const TaskIssue& is : plan_.issues) {
      if (is.task == task) return is.stream;
    }
    return 0;
  }

  Status prepare_tasks() {
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
        call.in = call.out = s_.op.dtype;
        call.accumulate = t.accumulate;
        COMPASS_ASSIGN(gemms_[t.id],
                       LtGemm::prepare(h->second.get(), call, kLtWorkspaceBytes, labels_[t.id]));
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

  Status fill_inputs() {
    for (size_t i = 0; i < s_.buffers.size(); ++i) {
      const Buffer& b = s_.buffers[i];
      if (b.role != BufferRole::input && b.role != BufferRole::weight) continue;
      COMPASS_TRY(fill(static_cast<int>(i), mem_[i].get()));
    }
    return sync_aux();
  }

  // Writes buffer `index`'s pseudo-random input values to `dst` (on the buffer's device).
  Status fill(int index, void* dst) {
    const Buffer& b = s_.buffers[index];
    const int d = buffer_device(index);
    COMPASS_CUDA(cudaSetDevice(d), "filling inputs");
    const std::uint64_t seed = (static_cast<std::uint64_t>(o_.seed) << 20) + index;
    COMPASS_CUDA(launch_fill_uniform(dst, b.rows * b.cols, elem_type(s_.op.dtype), seed,
                                     aux_.at(d).get()),
                 fmt::format("filling buffer '{}' of rank {}", b.name, b.rank));
    return Status::success();
  }

  // The names of the input and weight buffers that no longer hold their initial values (a
  // schedule must never write them); empty when all are intact.
  Result<std::string> modified_inputs() {
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

  Status sync_aux() {
    for (auto& [d, st] : aux_) {
      COMPASS_CUDA(cudaSetDevice(d), "synchronising");
      COMPASS_CUDA(cudaStreamSynchronize(st.get()), fmt::format("GPU {}", d));
    }
    return Status::success();
  }

  // Outputs and scratch start at zero in every iteration (accumulating GEMMs and adds).
  Status reset_outputs() {
    for (size_t i = 0; i < s_.buffers.size(); ++i) {
      const Buffer& b = s_.buffers[i];
      if (b.role == BufferRole::input || b.role == BufferRole::weight) continue;
      const int d = buffer_device(static_cast<int>(i));
      COMPASS_CUDA(cudaSetDevice(d), "resetting outputs");
      COMPASS_CUDA(cudaMemsetAsync(mem_[i].get(), 0, static_cast<size_t>(mem_[i].bytes()),
                                   aux_.at(d).get()),
                   fmt::format("buffer '{}' of rank {}", b.name, b.rank));
    }
    return sync_aux();
  }

  Status issue(const TaskIssue& is) {
    const Task& t = s_.tasks[is.task];
    const Stream& st = streams_[is.stream];
    const std::string& what = labels_[t.id];
    COMPASS_CUDA(cudaSetDevice(st.device()), what);
    for (int e : is.wait_events) {
      if (o_.sync == SyncMode::flags) {
        COMPASS_TRY(mem_ops_.check(mem_ops_.wait(reinterpret_cast<CUstream>(st.get()), flag_ptr_[e],
                                                 iteration_, CU_STREAM_WAIT_VALUE_GEQ),
                                   "cuStreamWaitValue32", what));
      } else {
        COMPASS_CUDA(cudaStreamWaitEvent(st.get(), events_[e].get(), 0), what);
      }
    }
    switch (t.kind) {
      case TaskKind::gemm:
        COMPASS_TRY(gemms_[t.id].run(workspace_[is.stream].get(), st.get()));
        break;
      case TaskKind::add:
        COMPASS_CUDA(launch_add_2d(ptr(t.dst), ld(t.dst), ptr(t.src), ld(t.src), t.dst.rows,
                                   t.dst.cols, elem_type(s_.op.dtype), st.get()),
                     what);
        break;
      case TaskKind::transfer:
      case TaskKind::copy: {
        const std::int64_t width = t.src.cols * eb_;
        if (t.src.cols == ld(t.src) && t.dst.cols == ld(t.dst)) {
          COMPASS_CUDA(cudaMemcpyAsync(ptr(t.dst), ptr(t.src), static_cast<size_t>(width * t.src.rows),
                                       cudaMemcpyDefault, st.get()),
                       what);
        } else {
          COMPASS_CUDA(cudaMemcpy2DAsync(ptr(t.dst), static_cast<size_t>(ld(t.dst) * eb_), ptr(t.src),
                                         static_cast<size_t>(ld(t.src) * eb_),
                                         static_cast<size_t>(width),
                                         static_cast<size_t>(t.src.rows), cudaMemcpyDefault,
                                         st.get()),
                       what);
        }
        break;
      }
    }
    if (is.record_event >= 0) {
      if (o_.sync == SyncMode::flags) {
        // The default write is ordered after the stream's earlier work and fenced, so the
        // producer's output is visible to whoever sees the new value.
        COMPASS_TRY(mem_ops_.check(
            mem_ops_.write(reinterpret_cast<CUstream>(st.get()), flag_ptr_[is.record_event],
                           iteration_, CU_STREAM_WRITE_VALUE_DEFAULT),
            "cuStreamWriteValue32", what));
      } else {
        COMPASS_CUDA(cudaEventRecord(events_[is.record_event].get(), st.get()), what);
      }
    }
    return Status::success();
  }

  // One timed execution of the whole schedule: every stream starts after `start_` and
  // `stop_` follows the last task of every stream.
  Result<double> iteration() {
    COMPASS_TRY(reset_outputs());
    ++iteration_;  // the flag value of this iteration
    COMPASS_CUDA(cudaSetDevice(ref_device_), "timing");
    COMPASS_CUDA(cudaEventRecord(start_.get(), timing_stream_.get()), "the start event");
    for (const Stream& st : streams_) {
      COMPASS_CUDA(cudaSetDevice(st.device()), "fork");
      COMPASS_CUDA(cudaStreamWaitEvent(st.get(), start_.get(), 0), "the start event");
    }
    for (const TaskIssue& is : plan_.issues) {
      COMPASS_TRY(issue(is));
      if (serialize_) {
        COMPASS_CUDA(cudaSetDevice(streams_[is.stream].device()), "--serialize");
        COMPASS_CUDA(cudaStreamSynchronize(streams_[is.stream].get()), labels_[is.task]);
      }
    }
    for (size_t i = 0; i < streams_.size(); ++i) {
      COMPASS_CUDA(cudaSetDevice(streams_[i].device()), "join");
      COMPASS_CUDA(cudaEventRecord(stream_end_[i].get(), streams_[i].get()), "join");
    }
    COMPASS_CUDA(cudaSetDevice(ref_device_), "join");
    for (const Event& e : stream_end_) {
      COMPASS_CUDA(cudaStreamWaitEvent(timing_stream_.get(), e.get(), 0), "join");
    }
    COMPASS_CUDA(cudaEventRecord(stop_.get(), timing_stream_.get()), "the stop event");
    return elapsed_s(start_, stop_);
  }

  // Copies buffer `index` into the rectangle at (row0, col0) of a dense matrix with `ld`
  // columns on the reference device.
  Status place(int index, void* dst, std::int64_t ld, std::int64_t row0, std::int64_t col0) {
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

  // Compares every rank's "y" with a cuBLASLt reference of the whole operator (FP32 output),
  // built from the ranks' own inputs.
  Status check(RunReport& report) {
    const auto& op = s_.op;
    const int p = s_.ranks();
    const std::int64_t M = op.m, N = op.n, K = op.k;
    COMPASS_ASSIGN(const std::vector<ReferenceBlocks> blocks, reference_blocks(s_));
    COMPASS_ASSIGN(DeviceMemory X, DeviceMemory::allocate(ref_device_, M * K * eb_, "reference X"));
    COMPASS_ASSIGN(DeviceMemory W, DeviceMemory::allocate(ref_device_, K * N * eb_, "reference W"));
    COMPASS_ASSIGN(DeviceMemory Y, DeviceMemory::allocate(ref_device_, M * N * 4, "reference Y"));
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
    GemmCall call;
    call.m = M;
    call.n = N;
    call.k = K;
    call.a = X.get();
    call.lda = K;
    call.b = W.get();
    call.ldb = N;
    call.c = Y.get();
    call.ldc = N;
    call.in = op.dtype;
    call.out = DType::fp32;
    COMPASS_ASSIGN(DeviceMemory ws, DeviceMemory::allocate(ref_device_, kLtWorkspaceBytes,
                                                           "reference workspace"));
    COMPASS_ASSIGN(LtGemm ref, LtGemm::prepare(handle->get(), call, kLtWorkspaceBytes,
                                               "the --check reference GEMM"));
    const cudaStream_t st = aux_.at(ref_device_).get();
    COMPASS_TRY(ref.run(ws.get(), st));
    COMPASS_CUDA(cudaStreamSynchronize(st), "the --check reference GEMM");

    double max_abs_err = 0, max_abs_ref = 0;
    std::vector<double> rank_err(p, 0.0);
    std::vector<std::int64_t> rank_bad(p, 0);
    std::vector<std::pair<std::int64_t, std::int64_t>> rank_at(p, {0, 0});
    std::vector<std::pair<float, float>> rank_val(p, {0.f, 0.f});
    for (int r = 0; r < p; ++r) {
      const int yi = blocks[r].y;
      const std::int64_t yr = s_.buffers[yi].rows, yc = s_.buffers[yi].cols;
      const std::int64_t row0 = blocks[r].y_row, col0 = blocks[r].y_col;
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
      double ref_r = 0;
      for (size_t i = 0; i < got.size(); ++i) ref_r = std::max(ref_r, std::fabs(double(want[i])));
      const double bad_above = check_tolerance(op.dtype) * ref_r;
      for (size_t i = 0; i < got.size(); ++i) {
        double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
        // NaN must fail the check, so compare with !(<=).
        if (std::isnan(diff)) diff = INFINITY;
        if (!(diff <= rank_err[r])) {
          rank_err[r] = diff;
          rank_at[r] = {static_cast<std::int64_t>(i) / yc, static_cast<std::int64_t>(i) % yc};
          rank_val[r] = {got[i], want[i]};
        }
        if (!(diff <= bad_above)) ++rank_bad[r];
      }
      max_abs_err = std::max(max_abs_err, rank_err[r]);
      max_abs_ref = std::max(max_abs_ref, ref_r);
    }
    int worst = 0;
    for (int r = 1; r < p; ++r) {
      if (rank_err[r] > rank_err[worst]) worst = r;
    }
    std::string bad;
    for (int r = 0; r < p; ++r) bad += fmt::format("{}{}", r ? " " : "", rank_bad[r]);
    report.worst = fmt::format("rank {} y[{}, {}]: got {}, want {}; elements over tolerance "
                               "per rank: {}",
                               worst, rank_at[worst].first, rank_at[worst].second,
                               rank_val[worst].first, rank_val[worst].second, bad);
    report.max_ref_abs = max_abs_ref;
    COMPASS_ASSIGN(const std::string modified, modified_inputs());
    if (!modified.empty()) {
      // Not a numerical error: fail the check whatever the outputs say.
      report.worst += "; inputs modified by the run: " + modified;
      report.max_rel_error = INFINITY;
    }
    report.max_abs_error = max_abs_err;
    report.max_rel_error = max_abs_ref > 0 ? max_abs_err / max_abs_ref : max_abs_err;
    return Status::success();
  }

  const Schedule& s_;
  const RunOptions& o_;
  bool serialize_ = false;
  const std::int64_t eb_;
  int ref_device_ = 0;
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
};

}  // namespace

Result<RunReport> run(const Schedule& s, const RunOptions& options) {
  Run r(s, options);
  Result<RunReport> result = r.execute();
  // Leave no half-finished work behind an error (the Run's destructor frees memory).
  for (int d = 0; d < s.ranks(); ++d) {
    const int dev = rank_device(s, options.mode, d);
    if (cudaSetDevice(dev) == cudaSuccess) (void)cudaDeviceSynchronize();
  }
  (void)cudaGetLastError();
  return result;
}

}  // namespace compass::backends::cuda::device
