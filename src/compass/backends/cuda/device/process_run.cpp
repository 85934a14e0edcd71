// One rank of a schedule in this process, on one GPU, with the other ranks in other processes
// (process_run.hpp in the API says what each path does). Setup: the GPU is local rank %
// visible GPUs; this rank's buffers are allocated and its inputs filled with the values the
// one-process executor gives them. The sequential strategy then joins an NCCL communicator;
// every other strategy exports its buffers and a flag array with CUDA IPC and maps everyone
// else's, creates a stream per resource of this rank and prepares its GEMMs. Each iteration
// starts when every process has finished the previous one and zeroed its outputs; the host
// waits for it with a bound and, while waiting, watches for a failure announced by another
// process.
#include "compass/backends/cuda/device/process_run.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "compass/backends/cuda/device/entry.hpp"

namespace compass::backends::cuda::device {

using schedule::Buffer;
using schedule::BufferRole;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;
using Clock = std::chrono::steady_clock;

IpcMapping::~IpcMapping() {
  if (p_ != nullptr) (void)cudaIpcCloseMemHandle(p_);
}

ProcessRun::ProcessRun(const Schedule& s, const ProcessRunOptions& o, launch::ProcessGroup& g)
    : s_(s), o_(o), g_(g), me_(g.rank()), eb_(dtype_bytes(s.op.dtype)),
      res_(std::make_unique<ProcessResources>()) {}

ProcessRun::~ProcessRun() {
  if (!stuck_) return;
  // A wait timed out: abort NCCL (it must not wait for a peer that is gone), release this
  // rank's own flag waits so its streams drain, and leave the rest to the end of the process,
  // since freeing memory would wait for streams that may never finish.
  if (res_->nccl) {
    res_->nccl->poison();
    res_->nccl.reset();
  }
  if (res_->flags.get() != nullptr)
    (void)cudaMemsetAsync(res_->flags.get(), 0xff, static_cast<size_t>(res_->flags.bytes()),
                          res_->aux.get());
  (void)res_.release();  // deliberately leaked, see above
}

std::string ProcessRun::label(int task) const {
  return fmt::format("rank {} {}", task_rank(task), task_label(s_.tasks[static_cast<std::size_t>(task)]));
}

Status ProcessRun::setup() {
  COMPASS_TRY(select_device());
  COMPASS_TRY(allocate_and_fill());
  nccl_path_ = uses_nccl(s_);
  if (nccl_path_) {
    COMPASS_TRY(prepare_nccl());
  } else {
    COMPASS_ASSIGN(pp_, make_process_plan(s_, me_));
    COMPASS_ASSIGN(mem_ops_, StreamMemOps::load());
    COMPASS_TRY(exchange_ipc());
  }
  COMPASS_TRY(create_streams());
  COMPASS_TRY(prepare_gemms());
  COMPASS_ASSIGN(const DeviceInfo dev, device_info(dev_));
  info_.device = dev.name;
  info_.streams = static_cast<int>(res_->streams.size());
  info_.events = nccl_path_ ? 0 : static_cast<int>(pp_.plan.event_task.size());
  info_.sync = nccl_path_ ? "nccl" : "events and ipc flags";
  info_.kernel = "chunked";
  return Status::success();
}

Status ProcessRun::select_device() {
  COMPASS_ASSIGN(const int ndev, device_count());
  dev_ = g_.local_rank() % ndev;
  COMPASS_CUDA(cudaSetDevice(dev_), fmt::format("selecting GPU {} for rank {}", dev_, me_));
  COMPASS_ASSIGN(res_->aux, Stream::create(dev_, 0));
  return Status::success();
}

Status ProcessRun::allocate_and_fill() {
  res_->mem.resize(s_.buffers.size());
  ptr_.assign(s_.buffers.size(), nullptr);
  for (std::size_t i = 0; i < s_.buffers.size(); ++i) {
    const Buffer& b = s_.buffers[i];
    if (b.rank != me_) continue;
    // At least one element: CUDA IPC cannot export an empty allocation.
    const std::int64_t bytes = std::max<std::int64_t>(1, b.rows * b.cols) * eb_;
    COMPASS_ASSIGN(res_->mem[i], DeviceMemory::allocate(dev_, bytes, fmt::format(
                                     "buffer '{}' of rank {}", b.name, b.rank)));
    ptr_[i] = static_cast<char*>(res_->mem[i].get());
    if (b.role == BufferRole::input || b.role == BufferRole::weight)
      COMPASS_TRY(fill(static_cast<int>(i), ptr_[i]));
  }
  COMPASS_CUDA(cudaStreamSynchronize(res_->aux.get()), fmt::format("rank {}: filling inputs", me_));
  return Status::success();
}

// The values the one-process executor gives buffer `index` (Run::fill).
Status ProcessRun::fill(int index, void* dst) {
  const Buffer& b = s_.buffers[static_cast<std::size_t>(index)];
  COMPASS_CUDA(launch_fill_uniform(dst, b.rows * b.cols, elem_type(s_.op.dtype),
                                   input_seed(o_.seed, index), res_->aux.get()),
               fmt::format("filling buffer '{}' of rank {}", b.name, b.rank));
  return Status::success();
}

// Every process's GPU identity, to refuse what NCCL would refuse with a clearer message.
Status ProcessRun::exchange_gpu_ids(std::vector<std::string>& ids) {
  char bus[64] = {};
  COMPASS_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, dev_), fmt::format("GPU {}", dev_));
  COMPASS_ASSIGN(ids, g_.all_gather(bus, o_.wait_timeout_s));
  return Status::success();
}

Status ProcessRun::prepare_nccl() {
  COMPASS_ASSIGN(call_, nccl_call(s_, me_));
  std::vector<std::string> ids;
  COMPASS_TRY(exchange_gpu_ids(ids));
  COMPASS_ASSIGN(const int version, NcclComm::loaded_version());
  const char* multi = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  COMPASS_TRY(check_nccl_gpu_sharing(ids, version,
                                     multi != nullptr && std::string_view(multi) == "1"));
  COMPASS_ASSIGN(res_->nccl, NcclComm::create(g_, o_.wait_timeout_s));
  return Status::success();
}

// This rank's flag array and buffers go out as IPC handles (flags first, then the buffers in
// index order); every other rank's come back and are mapped.
Status ProcessRun::exchange_ipc() {
  const auto nflags = static_cast<std::int64_t>(std::max<std::size_t>(1, s_.tasks.size()));
  COMPASS_ASSIGN(res_->flags, DeviceMemory::allocate(dev_, nflags * 4, "dependency flags"));
  COMPASS_CUDA(cudaMemset(res_->flags.get(), 0, static_cast<size_t>(nflags * 4)), "dependency flags");
  std::vector<std::string> handles;
  auto add = [&](void* p, const std::string& what) -> Status {
    cudaIpcMemHandle_t h{};
    COMPASS_CUDA(cudaIpcGetMemHandle(&h, p), fmt::format("rank {}: exporting {}", me_, what));
    handles.emplace_back(reinterpret_cast<const char*>(&h), sizeof h);
    return Status::success();
  };
  COMPASS_TRY(add(res_->flags.get(), "the dependency flags"));
  for (std::size_t i = 0; i < s_.buffers.size(); ++i)
    if (mine(static_cast<int>(i))) COMPASS_TRY(add(ptr_[i], "buffer '" + s_.buffers[i].name + "'"));
  COMPASS_ASSIGN(const auto all, g_.all_gather(pack_records(handles), o_.wait_timeout_s));
  peer_flags_.assign(static_cast<std::size_t>(s_.ranks()), nullptr);
  peer_flags_[static_cast<std::size_t>(me_)] = static_cast<char*>(res_->flags.get());
  for (int r = 0; r < s_.ranks(); ++r)
    if (r != me_) COMPASS_TRY(open_peer(r, all[static_cast<std::size_t>(r)]));
  return Status::success();
}

Status ProcessRun::open_peer(int rank, const std::string& bytes) {
  std::size_t count = 1;
  for (const Buffer& b : s_.buffers) count += b.rank == rank ? 1 : 0;
  COMPASS_ASSIGN(const auto handles,
                 unpack_records(bytes, sizeof(cudaIpcMemHandle_t), count, rank));
  std::vector<char*> opened;
  for (const std::string& h : handles) {
    cudaIpcMemHandle_t handle{};
    std::memcpy(&handle, h.data(), sizeof handle);
    void* p = nullptr;
    COMPASS_CUDA(cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess),
                 fmt::format("rank {} mapping the memory of rank {}", me_, rank));
    res_->mapped.emplace_back(p);
    opened.push_back(static_cast<char*>(p));
  }
  peer_flags_[static_cast<std::size_t>(rank)] = opened[0];
  std::size_t next = 1;
  for (std::size_t i = 0; i < s_.buffers.size(); ++i)
    if (s_.buffers[i].rank == rank) ptr_[i] = opened[next++];
  return Status::success();
}

// One stream per resource of this rank (one for the NCCL path), events for the dependencies
// this rank's tasks produce, and the timing events.
Status ProcessRun::create_streams() {
  int least = 0, greatest = 0;
  COMPASS_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest), fmt::format("GPU {}", dev_));
  if (nccl_path_) {
    COMPASS_ASSIGN(Stream st, Stream::create(dev_, least));
    res_->streams.emplace(0, std::move(st));
  }
  for (int i : pp_.streams) {
    const bool high = pp_.plan.streams[static_cast<std::size_t>(i)].high_priority;
    COMPASS_ASSIGN(Stream st, Stream::create(dev_, high ? greatest : least));
    res_->streams.emplace(i, std::move(st));
  }
  for (std::size_t e = 0; e < pp_.plan.event_task.size(); ++e) {
    if (task_rank(pp_.plan.event_task[e]) != me_) continue;
    COMPASS_ASSIGN(Event ev, Event::create(dev_, false));
    res_->events.emplace(static_cast<int>(e), std::move(ev));
  }
  for (std::size_t i = 0; i < res_->streams.size(); ++i) {
    COMPASS_ASSIGN(Event ev, Event::create(dev_, false));
    res_->stream_end.push_back(std::move(ev));
  }
  COMPASS_ASSIGN(res_->start, Event::create(dev_, true));
  COMPASS_ASSIGN(res_->stop, Event::create(dev_, true));
  return Status::success();
}

Status ProcessRun::prepare_gemms() {
  COMPASS_ASSIGN(res_->lt, LtHandle::create(dev_));
  for (const TaskIssue& is : pp_.plan.issues) {
    const Task& t = s_.tasks[static_cast<std::size_t>(is.task)];
    if (t.kind != TaskKind::gemm || t.resource.rank != me_) continue;
    const int stream = nccl_path_ ? 0 : is.stream;
    if (!res_->workspace.count(stream)) {
      COMPASS_ASSIGN(DeviceMemory ws, DeviceMemory::allocate(dev_, kLtWorkspaceBytes, "cuBLASLt workspace"));
      res_->workspace.emplace(stream, std::move(ws));
    }
  }
  if (nccl_path_ && !res_->workspace.count(0)) {
    COMPASS_ASSIGN(DeviceMemory ws, DeviceMemory::allocate(dev_, kLtWorkspaceBytes, "cuBLASLt workspace"));
    res_->workspace.emplace(0, std::move(ws));
  }
  for (const Task& t : s_.tasks) {
    if (t.kind != TaskKind::gemm || t.resource.rank != me_) continue;
    for (const schedule::Region* r : {&t.src, &t.b, &t.dst})
      if (!mine(r->buffer))
        return make_error("{}: a GEMM operand is in buffer '{}' of rank {}, in another process",
                          label(t.id), s_.buffers[static_cast<std::size_t>(r->buffer)].name,
                          s_.owner(*r));
    const GemmCall call = task_gemm_call(
        t, s_.op.dtype, [this](const schedule::Region& r) { return ptr(r); },
        [this](const schedule::Region& r) { return ld(r); });
    COMPASS_ASSIGN(LtGemm g, LtGemm::prepare(res_->lt, call, kLtWorkspaceBytes, label(t.id)));
    res_->gemms.emplace(t.id, std::move(g));
  }
  return Status::success();
}

// ---- the timed run --------------------------------------------------------------------------

Result<Measurement> ProcessRun::measure() {
  Measurement m;
  for (int it = 0; it < o_.warmup + o_.repeat; ++it) {
    COMPASS_TRY(start_iteration());
    const Result<double> t = iteration();
    if (!t.ok()) {
      stuck_ = true;  // work may be queued behind a wait that never ends
      return t.error();
    }
    if (it >= o_.warmup) m.times_s.push_back(*t);
  }
  COMPASS_TRY(finish_measurement(m, s_.op.dtype, o_.check,
                                 [this](CheckResult& out) { return check(out); }));
  return m;
}

// Every process has finished the previous iteration (nobody still reads or writes this rank's
// memory), then zeroes its outputs and scratch, then all start together.
Status ProcessRun::start_iteration() {
  COMPASS_TRY(g_.all_gather("", o_.wait_timeout_s));
  for (std::size_t i = 0; i < s_.buffers.size(); ++i) {
    const Buffer& b = s_.buffers[i];
    if (b.rank != me_ || b.role == BufferRole::input || b.role == BufferRole::weight) continue;
    COMPASS_CUDA(cudaMemsetAsync(ptr_[i], 0, static_cast<size_t>(res_->mem[i].bytes()),
                                 res_->aux.get()),
                 fmt::format("rank {}: zeroing buffer '{}'", me_, b.name));
  }
  COMPASS_CUDA(cudaStreamSynchronize(res_->aux.get()), fmt::format("rank {}: zeroing", me_));
  COMPASS_TRY(g_.all_gather("", o_.wait_timeout_s));
  return Status::success();
}

cudaStream_t ProcessRun::first_stream() const { return res_->streams.begin()->second.get(); }

Result<double> ProcessRun::iteration() {
  ++iteration_;
  const cudaStream_t first = first_stream();
  COMPASS_CUDA(cudaEventRecord(res_->start.get(), first), "the start event");
  for (const auto& [index, st] : res_->streams)
    if (st.get() != first) COMPASS_CUDA(cudaStreamWaitEvent(st.get(), res_->start.get(), 0), "fork");
  if (nccl_path_) {
    COMPASS_TRY(issue_nccl(first));
  } else {
    for (int i : pp_.issues) COMPASS_TRY(issue(pp_.plan.issues[static_cast<std::size_t>(i)]));
  }
  std::size_t k = 0;
  for (const auto& [index, st] : res_->streams) {
    COMPASS_CUDA(cudaEventRecord(res_->stream_end[k].get(), st.get()), "join");
    COMPASS_CUDA(cudaStreamWaitEvent(first, res_->stream_end[k++].get(), 0), "join");
  }
  COMPASS_CUDA(cudaEventRecord(res_->stop.get(), first), "the stop event");
  COMPASS_TRY(wait_bounded(res_->stop, fmt::format("iteration {}", iteration_)));
  return elapsed_s(res_->start, res_->stop);
}

Status ProcessRun::issue(const TaskIssue& is) {
  const Task& t = s_.tasks[static_cast<std::size_t>(is.task)];
  const cudaStream_t st = res_->streams.at(is.stream).get();
  if (t.id == o_.fail_task) return make_error("{}: injected fault", label(t.id));
  for (int e : is.wait_events) {
    const int producer = pp_.plan.event_task[static_cast<std::size_t>(e)];
    if (task_rank(producer) == me_) {
      COMPASS_CUDA(cudaStreamWaitEvent(st, res_->events.at(e).get(), 0), label(t.id));
      continue;
    }
    const auto flag = reinterpret_cast<CUdeviceptr>(peer_flags_[static_cast<std::size_t>(me_)] +
                                                    4 * static_cast<std::size_t>(producer));
    COMPASS_TRY(mem_ops_.check(mem_ops_.wait(reinterpret_cast<CUstream>(st), flag, iteration_,
                                             CU_STREAM_WAIT_VALUE_GEQ),
                               "cuStreamWaitValue32", label(t.id)));
  }
  void* ws = t.kind == TaskKind::gemm ? res_->workspace.at(is.stream).get() : nullptr;
  COMPASS_TRY(run_task(t, st, ws));
  if (is.record_event >= 0)
    COMPASS_CUDA(cudaEventRecord(res_->events.at(is.record_event).get(), st), label(t.id));
  return signal(t, st);
}

// After task t, its stream writes the iteration into t's slot of every waiting rank's flags
// (ordered after the task and fenced: the task's writes are visible to whoever sees it).
Status ProcessRun::signal(const Task& t, cudaStream_t st) {
  for (int r : pp_.signals[static_cast<std::size_t>(t.id)]) {
    const auto flag = reinterpret_cast<CUdeviceptr>(peer_flags_[static_cast<std::size_t>(r)] +
                                                    4 * static_cast<std::size_t>(t.id));
    COMPASS_TRY(mem_ops_.check(mem_ops_.write(reinterpret_cast<CUstream>(st), flag, iteration_,
                                              CU_STREAM_WRITE_VALUE_DEFAULT),
                               "cuStreamWriteValue32", label(t.id)));
  }
  return Status::success();
}

Status ProcessRun::run_task(const Task& t, cudaStream_t st, void* workspace) {
  const std::string& what = label(t.id);
  switch (t.kind) {
    case TaskKind::gemm:
      return res_->gemms.at(t.id).run(workspace, st);
    case TaskKind::add:
      COMPASS_CUDA(launch_add_2d(ptr(t.dst), ld(t.dst), ptr(t.src), ld(t.src), t.dst.rows,
                                 t.dst.cols, elem_type(s_.op.dtype), st),
                   what);
      return Status::success();
    case TaskKind::transfer:
    case TaskKind::copy:
      if (t.src.rows != t.dst.rows || t.src.cols != t.dst.cols)
        return make_error("{}: source and destination regions differ in shape", what);
      COMPASS_CUDA(cudaMemcpy2DAsync(ptr(t.dst), static_cast<size_t>(ld(t.dst) * eb_), ptr(t.src),
                                     static_cast<size_t>(ld(t.src) * eb_),
                                     static_cast<size_t>(t.src.cols * eb_),
                                     static_cast<size_t>(t.src.rows), cudaMemcpyDefault, st),
                   what);
      return Status::success();
  }
  return make_error("{}: unknown task kind", what);
}

// The sequential strategy: this rank's GEMMs and one NCCL collective, in order, on one stream.
Status ProcessRun::issue_nccl(cudaStream_t st) {
  const NcclCall& c = *call_;
  for (int t : c.gemms)
    if (t == o_.fail_task) return make_error("{}: injected fault", label(t));
  auto gemms = [&]() -> Status {
    for (int t : c.gemms) COMPASS_TRY(res_->gemms.at(t).run(res_->workspace.at(0).get(), st));
    return Status::success();
  };
  if (c.gemms_first) COMPASS_TRY(gemms());
  void* send = ptr_[static_cast<std::size_t>(c.send)];
  void* recv = ptr_[static_cast<std::size_t>(c.recv)];
  NcclComm& n = *res_->nccl;
  switch (c.kind) {
    case NcclCall::Kind::all_gather:
      COMPASS_TRY(n.all_gather(send, recv, c.count, s_.op.dtype, st));
      break;
    case NcclCall::Kind::reduce_scatter:
      COMPASS_TRY(n.reduce_scatter(send, recv, c.count, s_.op.dtype, st));
      break;
    case NcclCall::Kind::all_reduce:
      COMPASS_TRY(n.all_reduce(send, recv, c.count, s_.op.dtype, st));
      break;
  }
  return c.gemms_first ? Status::success() : gemms();
}

// Waits for `e` at most the wait timeout, watching for a failure announced by another process.
Status ProcessRun::wait_bounded(const Event& e, const std::string& what) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(o_.wait_timeout_s));
  for (int polls = 0;; ++polls) {
    const cudaError_t q = cudaEventQuery(e.get());
    if (q == cudaSuccess) return Status::success();
    if (q != cudaErrorNotReady) {
      stuck_ = true;
      return cuda_check(q, "cudaEventQuery", fmt::format("rank {}: {}", me_, what));
    }
    if (polls % 16 == 0) {
      if (Status peers = g_.peers_ok(); !peers.ok()) {
        stuck_ = true;
        return peers;
      }
    }
    if (Clock::now() > deadline) {
      stuck_ = true;
      return make_error("{}", stuck_message());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Names the first of this rank's tasks (in issue order) whose flag from another process
// never arrived.
std::string ProcessRun::stuck_message() {
  std::string base = fmt::format("rank {}: iteration {} did not finish within {:.3g} s", me_,
                                 iteration_, o_.wait_timeout_s);
  if (nccl_path_)
    return base + fmt::format(" (the NCCL {} waits for another rank)", to_string(call_->kind));
  std::vector<std::uint32_t> flags(s_.tasks.size(), 0);
  if (cudaMemcpyAsync(flags.data(), res_->flags.get(), flags.size() * 4, cudaMemcpyDeviceToHost,
                      res_->aux.get()) != cudaSuccess)
    return base;
  const auto until = Clock::now() + std::chrono::seconds(1);
  while (cudaStreamQuery(res_->aux.get()) == cudaErrorNotReady && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (cudaStreamQuery(res_->aux.get()) != cudaSuccess) return base;
  for (int i : pp_.issues) {
    const TaskIssue& is = pp_.plan.issues[static_cast<std::size_t>(i)];
    for (int e : is.wait_events) {
      const int p = pp_.plan.event_task[static_cast<std::size_t>(e)];
      if (task_rank(p) != me_ && flags[static_cast<std::size_t>(p)] < iteration_)
        return fmt::format("{}: {} waits for {}, which never signalled", base, label(is.task),
                           label(p));
    }
  }
  return base;
}

// ---- entry points ---------------------------------------------------------------------------

Result<ProcessRunPtr> prepare_process(const Schedule& s, const ProcessRunOptions& options,
                                      launch::ProcessGroup& group) {
  ProcessRunPtr run(new ProcessRun(s, options, group));
  COMPASS_TRY(run->setup());
  return run;
}

Result<Measurement> measure(ProcessRun& run) { return run.measure(); }

const RunInfo& info(const ProcessRun& run) { return run.info(); }

void ProcessRunDeleter::operator()(ProcessRun* run) const { delete run; }

}  // namespace compass::backends::cuda::device
