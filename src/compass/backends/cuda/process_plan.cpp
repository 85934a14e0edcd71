#include "compass/backends/cuda/process_plan.hpp"

#include <algorithm>
#include <map>

#include "compass/backends/launch/doctor.hpp"

namespace compass::backends::cuda {

using schedule::Buffer;
using schedule::Schedule;
using schedule::StrategyKind;
using schedule::Task;
using schedule::TaskKind;

std::string_view to_string(NcclCall::Kind k) {
  switch (k) {
    case NcclCall::Kind::all_gather: return "all-gather";
    case NcclCall::Kind::reduce_scatter: return "reduce-scatter";
    case NcclCall::Kind::all_reduce: return "all-reduce";
  }
  return "?";
}

bool uses_nccl(const Schedule& s) {
  return s.strategy.kind == StrategyKind::sequential && s.ranks() > 1;
}

namespace {

Result<int> buffer_of(const Schedule& s, int rank, const char* name) {
  const int i = s.find_buffer(rank, name);
  if (i < 0)
    return make_error("the sequential schedule of rank {} has no buffer '{}' for NCCL", rank, name);
  return i;
}

std::int64_t elements(const Schedule& s, int buffer) {
  const Buffer& b = s.buffers[static_cast<std::size_t>(buffer)];
  return b.rows * b.cols;
}

// Every GEMM of `rank` reads A from buffer `a` (a >= 0) or writes C into buffer `c` (c >= 0).
Status gemms_use(const Schedule& s, const NcclCall& call, int a, int c) {
  for (int t : call.gemms) {
    const Task& task = s.tasks[static_cast<std::size_t>(t)];
    const int want = a >= 0 ? a : c;
    const int got = a >= 0 ? task.src.buffer : task.dst.buffer;
    if (got != want)
      return make_error("task {} '{}' {} buffer '{}', not '{}' as the NCCL path needs", t,
                        task.name, a >= 0 ? "reads" : "writes",
                        s.buffers[static_cast<std::size_t>(got)].name,
                        s.buffers[static_cast<std::size_t>(want)].name);
  }
  return Status::success();
}

// gemm_rs: "part" [M, N] reduce-scattered into equal blocks "y" of M / p rows.
Status reduce_scatter_call(const Schedule& s, int rank, NcclCall& call) {
  COMPASS_ASSIGN(call.send, buffer_of(s, rank, "part"));
  COMPASS_ASSIGN(call.recv, buffer_of(s, rank, "y"));
  const int p = s.ranks();
  for (int r = 0; r < p; ++r) {
    COMPASS_ASSIGN(const int y, buffer_of(s, r, "y"));
    if (s.buffers[static_cast<std::size_t>(y)].rows * p != s.op.m)
      return make_error("NCCL's reduce-scatter needs equal row blocks, but rank {} owns {} of "
                        "M = {} rows over {} ranks",
                        r, s.buffers[static_cast<std::size_t>(y)].rows, s.op.m, p);
  }
  call.count = elements(s, call.recv);
  if (elements(s, call.send) != call.count * p)
    return make_error("buffer 'part' of rank {} holds {} elements, not {} x {}", rank,
                      elements(s, call.send), p, call.count);
  call.gemms_first = true;
  return gemms_use(s, call, -1, call.send);
}

Status fill_call(const Schedule& s, int rank, NcclCall& call) {
  const int p = s.ranks();
  switch (s.op.kind) {
    case workload::OpKind::ag_gemm: {
      call.kind = NcclCall::Kind::all_gather;
      COMPASS_ASSIGN(call.send, buffer_of(s, rank, "x"));
      COMPASS_ASSIGN(call.recv, buffer_of(s, rank, "xg"));
      call.count = elements(s, call.send);
      for (int r = 0; r < p; ++r) {
        COMPASS_ASSIGN(const int x, buffer_of(s, r, "x"));
        if (elements(s, x) != call.count)
          return make_error("NCCL's all-gather needs equal blocks, but rank {} holds {} rows of "
                            "x and rank {} {}",
                            r, s.buffers[static_cast<std::size_t>(x)].rows, rank,
                            s.buffers[static_cast<std::size_t>(call.send)].rows);
      }
      if (elements(s, call.recv) != call.count * p)
        return make_error("buffer 'xg' of rank {} holds {} elements, not {} x {}", rank,
                          elements(s, call.recv), p, call.count);
      return gemms_use(s, call, call.recv, -1);
    }
    case workload::OpKind::gemm_rs:
      call.kind = NcclCall::Kind::reduce_scatter;
      return reduce_scatter_call(s, rank, call);
    case workload::OpKind::gemm_ar:
      call.kind = NcclCall::Kind::all_reduce;
      COMPASS_ASSIGN(call.send, buffer_of(s, rank, "y"));
      call.recv = call.send;
      call.count = elements(s, call.send);
      call.gemms_first = true;
      return gemms_use(s, call, -1, call.send);
  }
  return make_error("unknown operator");
}

}  // namespace

Result<NcclCall> nccl_call(const Schedule& s, int rank) {
  if (!uses_nccl(s))
    return make_error("only the sequential strategy on two or more ranks runs as one NCCL call, "
                      "not {} on {}",
                      schedule::to_string(s.strategy), s.ranks());
  if (rank < 0 || rank >= s.ranks())
    return make_error("rank {} is not one of the schedule's {} ranks", rank, s.ranks());
  NcclCall call;
  for (const Task& t : s.tasks)
    if (t.kind == TaskKind::gemm && t.resource.rank == rank) call.gemms.push_back(t.id);
  if (call.gemms.empty()) return make_error("rank {} has no GEMM in the schedule", rank);
  COMPASS_TRY(fill_call(s, rank, call));
  return call;
}

Result<ProcessPlan> make_process_plan(const Schedule& s, int rank) {
  if (rank < 0 || rank >= s.ranks())
    return make_error("rank {} is not one of the schedule's {} ranks", rank, s.ranks());
  ProcessPlan out;
  out.rank = rank;
  COMPASS_ASSIGN(out.plan, make_stream_plan(s, LaunchMode::virtual_ranks));
  const StreamPlan& plan = out.plan;
  for (std::size_t i = 0; i < plan.streams.size(); ++i)
    if (plan.streams[i].rank == rank) out.streams.push_back(static_cast<int>(i));
  out.remote_producer.assign(plan.event_task.size(), false);
  out.signals.assign(s.tasks.size(), {});
  out.awaited.assign(s.tasks.size(), false);
  for (std::size_t i = 0; i < plan.issues.size(); ++i) {
    const TaskIssue& is = plan.issues[i];
    const int consumer = s.tasks[static_cast<std::size_t>(is.task)].resource.rank;
    if (consumer == rank) out.issues.push_back(static_cast<int>(i));
    for (int e : is.wait_events) {
      const int producer_task = plan.event_task[static_cast<std::size_t>(e)];
      const int producer = s.tasks[static_cast<std::size_t>(producer_task)].resource.rank;
      if (producer == consumer) continue;
      out.remote_producer[static_cast<std::size_t>(e)] = true;
      if (consumer == rank) out.awaited[static_cast<std::size_t>(producer_task)] = true;
      if (producer != rank) continue;
      auto& to = out.signals[static_cast<std::size_t>(producer_task)];
      if (std::find(to.begin(), to.end(), consumer) == to.end()) to.push_back(consumer);
    }
  }
  return out;
}

Status check_nccl_gpu_sharing(const std::vector<std::string>& gpu_ids, int nccl_version,
                              bool multi_rank_enabled) {
  std::map<std::string, int> first;
  for (std::size_t r = 0; r < gpu_ids.size(); ++r) {
    auto [it, fresh] = first.emplace(gpu_ids[r], static_cast<int>(r));
    if (fresh) continue;
    const std::string who =
        fmt::format("ranks {} and {} share GPU {}", it->second, r, gpu_ids[r]);
    if (nccl_version < 23000)
      return make_error("{}, and NCCL {} refuses two ranks on one GPU (NCCL 2.30+ with "
                        "NCCL_MULTI_RANK_GPU_ENABLE=1 allows it); start one process per GPU",
                        who, launch::nccl_version_text(nccl_version));
    if (!multi_rank_enabled)
      return make_error("{}: set NCCL_MULTI_RANK_GPU_ENABLE=1 so that NCCL {} accepts two ranks "
                        "on one GPU",
                        who, launch::nccl_version_text(nccl_version));
  }
  return Status::success();
}

std::string pack_records(const std::vector<std::string>& records) {
  std::string out;
  for (const std::string& r : records) out += r;
  return out;
}

Result<std::vector<std::string>> unpack_records(const std::string& bytes, std::size_t size,
                                                std::size_t count, int from_rank) {
  if (size == 0 || bytes.size() != size * count)
    return make_error("rank {} sent {} bytes of handles, expected {} x {}", from_rank,
                      bytes.size(), count, size);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(bytes.substr(i * size, size));
  return out;
}

}  // namespace compass::backends::cuda
