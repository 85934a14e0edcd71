// The CUDA executor: runs a prepared Schedule with one stream per (rank, resource), events
// (or device flags) for dependencies across streams, cuBLASLt for GEMM tasks (or one fused
// kernel per fused GEMM group, fused_run.cpp), a small kernel for adds and
// cudaMemcpy(2D)Async for transfers and copies (copy engines; peer copies between GPUs).
// Device setup is in setup.cpp, the --check reference in reference_check.cpp.
#include "compass/backends/cuda/device/entry.hpp"
#include "compass/backends/cuda/device/run.hpp"

namespace compass::backends::cuda::device {

using schedule::Buffer;
using schedule::BufferRole;
using schedule::Region;
using schedule::Schedule;
using schedule::Task;
using schedule::TaskKind;

Result<Measurement> Run::measure() {
  Measurement m;
  for (int it = 0; it < o_.warmup + o_.repeat; ++it) {
    Result<double> t = iteration();
    COMPASS_TRY(fused_fault());  // a trapped fused kernel explains the CUDA error best
    if (!t.ok()) return t.error();
    if (it >= o_.warmup) m.times_s.push_back(*t);
  }
  COMPASS_TRY(finish_measurement(m, s_.op.dtype, o_.check,
                                 [this](CheckResult& out) { return check(out); }));
  return m;
}

// Outputs and scratch start at zero in every iteration (accumulating GEMMs and adds).
Status Run::reset_outputs() {
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

Status Run::issue(const TaskIssue& is) {
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
  // A GEMM-RS owner's sum (a copy, then adds) runs as one kernel at its last task.
  switch (in_rs_sum(t.id) ? TaskKind::add : t.kind) {
    case TaskKind::gemm:
      if (in_fused_group(t.id)) {
        COMPASS_TRY(launch_fused(t, st.get()));
      } else {
        COMPASS_TRY(gemms_[t.id].run(workspace_[is.stream].get(), st.get()));
      }
      break;
    case TaskKind::add:
      if (in_rs_sum(t.id)) {
        COMPASS_TRY(launch_sum(t, st.get()));
        break;
      }
      COMPASS_CUDA(launch_add_2d(ptr(t.dst), ld(t.dst), ptr(t.src), ld(t.src), t.dst.rows,
                                 t.dst.cols, elem_type(s_.op.dtype), st.get()),
                   what);
      break;
    case TaskKind::transfer:
    case TaskKind::copy: {
      if (absorbed(t.id)) break;  // a fused GEMM-RS kernel's epilogue stored it already
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
Result<double> Run::iteration() {
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

namespace {

// Leave no half-finished work behind (the Run's destructor frees memory).
void drain(const Schedule& s, LaunchMode mode) {
  for (int d = 0; d < s.ranks(); ++d) {
    const int dev = rank_device(s, mode, d);
    if (cudaSetDevice(dev) == cudaSuccess) (void)cudaDeviceSynchronize();
  }
  (void)cudaGetLastError();
}

}  // namespace

Result<RunPtr> prepare(const Schedule& s, const RunOptions& options) {
  RunPtr run(new Run(s, options));
  const Status st = run->setup();
  if (!st.ok()) {
    run.reset();
    drain(s, options.mode);
    return st.error();
  }
  return run;
}

Result<Measurement> measure(Run& run, const Schedule& s, const RunOptions& options) {
  Result<Measurement> m = run.measure();
  drain(s, options.mode);
  return m;
}

const RunInfo& info(const Run& run) { return run.info(); }

void RunDeleter::operator()(Run* run) const { delete run; }

}  // namespace compass::backends::cuda::device
