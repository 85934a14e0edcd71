#include "compass/backends/cuda/stream_plan.hpp"

#include <algorithm>
#include <map>
#include <queue>
#include <tuple>

namespace compass::backends::cuda {

int rank_device(const schedule::Schedule& s, LaunchMode mode, int rank) {
  if (mode == LaunchMode::virtual_ranks) return 0;
  return s.gpus.at(rank);
}

namespace {

using schedule::task_label;

// Multi-GPU mode needs one valid GPU ordinal per rank, no two ranks on one GPU.
Status check_gpus(const schedule::Schedule& s, LaunchMode mode) {
  if (mode != LaunchMode::multi_gpu) return Status::success();
  const int p = s.ranks();
  for (int r = 0; r < p; ++r) {
    if (s.gpus[r] < 0) return make_error("gpus[{}]: {} is not a GPU ordinal", r, s.gpus[r]);
    for (int q = 0; q < r; ++q) {
      if (s.gpus[q] == s.gpus[r]) {
        return make_error(
            "multi-gpu mode needs one GPU per rank, but ranks {} and {} are both on GPU {} "
            "(use virtual ranks)",
            q, r, s.gpus[r]);
      }
    }
  }
  return Status::success();
}

// Every task's id is its index, its resource is on a rank of the schedule with a non-negative
// index, and its dependencies are other tasks' ids.
Status check_tasks(const schedule::Schedule& s) {
  const int p = s.ranks();
  const int n = static_cast<int>(s.tasks.size());
  for (int i = 0; i < n; ++i) {
    const schedule::Task& t = s.tasks[i];
    if (t.id != i) return make_error("tasks[{}]: id is {}, expected {}", i, t.id, i);
    if (t.resource.rank < 0 || t.resource.rank >= p) {
      return make_error("{}: resource rank {} is not in [0, {})", task_label(t), t.resource.rank,
                        p);
    }
    if (t.resource.index < 0) {
      return make_error("{}: resource index {} is negative", task_label(t), t.resource.index);
    }
    for (int d : t.deps) {
      if (d < 0 || d >= n)
        return make_error("{}: dependency {} is not a task id", task_label(t), d);
      if (d == i) return make_error("{} depends on itself", task_label(t));
    }
  }
  return Status::success();
}

// One stream per serial resource (schedule::resource_lanes), in the lanes' order.
std::vector<StreamSpec> streams_of(const schedule::Schedule& s, LaunchMode mode,
                                   const schedule::ResourceLanes& lanes) {
  std::vector<StreamSpec> streams;
  for (const schedule::Resource& r : lanes.resources) {
    StreamSpec spec;
    spec.rank = r.rank;
    spec.kind = r.kind;
    spec.index = r.index;
    spec.device = rank_device(s, mode, r.rank);
    spec.high_priority = r.kind == schedule::ResourceKind::copy_engine;
    streams.push_back(spec);
  }
  return streams;
}

// A stream is a FIFO in its resource's order: a task depending on a later task of its own
// resource would deadlock.
Status check_lane_order(const schedule::Schedule& s, const std::vector<int>& task_stream) {
  const int n = static_cast<int>(s.tasks.size());
  for (int i = 0; i < n; ++i) {
    const schedule::Task& t = s.tasks[i];
    for (int d : t.deps) {
      if (task_stream[d] == task_stream[i] && d > i) {
        return make_error(
            "{} depends on {}, which is listed after it on the same resource (rank {} {} {}): "
            "the schedule would deadlock",
            task_label(t), task_label(s.tasks[d]), t.resource.rank,
            schedule::to_string(t.resource.kind), t.resource.index);
      }
    }
  }
  return Status::success();
}

// The issues in `order` with their events: per consumer and producer stream, only the producer
// issued last is waited on; a producer waited on records one event.
void add_issues(const schedule::Schedule& s, const std::vector<int>& task_stream,
                const std::vector<int>& order, StreamPlan& plan) {
  const int n = static_cast<int>(s.tasks.size());
  std::vector<int> position(n);
  for (int k = 0; k < n; ++k) position[order[k]] = k;
  std::vector<int> event_of(n, -1);
  plan.issues.resize(n);
  for (int k = 0; k < n; ++k) {
    const int i = order[k];
    TaskIssue& issue = plan.issues[k];
    issue.task = i;
    issue.stream = task_stream[i];
    std::map<int, int> last_producer;  // stream -> producer task with the largest position
    for (int d : s.tasks[i].deps) {
      if (task_stream[d] == task_stream[i]) continue;
      auto [it, inserted] = last_producer.emplace(task_stream[d], d);
      if (!inserted && position[d] > position[it->second]) it->second = d;
    }
    for (const auto& [stream, producer] : last_producer) {
      if (event_of[producer] < 0) {
        event_of[producer] = static_cast<int>(plan.event_task.size());
        plan.event_task.push_back(producer);
      }
      issue.wait_events.push_back(event_of[producer]);
    }
  }
  for (TaskIssue& issue : plan.issues) issue.record_event = event_of[issue.task];
}

}  // namespace

Result<StreamPlan> make_stream_plan(const schedule::Schedule& s, LaunchMode mode) {
  if (s.ranks() < 1) return make_error("schedule has no ranks (gpus is empty)");
  COMPASS_TRY(check_gpus(s, mode));
  COMPASS_TRY(check_tasks(s));
  StreamPlan plan;
  const schedule::ResourceLanes lanes = schedule::resource_lanes(s);
  plan.streams = streams_of(s, mode, lanes);
  COMPASS_TRY(check_lane_order(s, lanes.lane_of));
  // Issue order: deps and each stream's order, lowest id first (schedule::issue_order).
  COMPASS_ASSIGN(const std::vector<int> order, schedule::issue_order(s));
  add_issues(s, lanes.lane_of, order, plan);
  for (const StreamSpec& st : plan.streams) plan.devices.push_back(st.device);
  std::sort(plan.devices.begin(), plan.devices.end());
  plan.devices.erase(std::unique(plan.devices.begin(), plan.devices.end()), plan.devices.end());
  return plan;
}

Result<std::vector<ReferenceBlocks>> reference_blocks(const schedule::Schedule& s) {
  const auto& op = s.op;
  const int p = s.ranks();
  if (p < 1 || op.tp != p) {
    return make_error("--check: the operator has tp {} but the schedule has {} ranks", op.tp, p);
  }
  std::vector<ReferenceBlocks> out(p);
  for (int r = 0; r < p; ++r) {
    ReferenceBlocks& b = out[r];
    const workload::Block xb = workload::input_block(op, r);
    const workload::Block wb = workload::weight_block(op, r);
    const workload::Block yb = workload::output_block(op, r);
    struct Want {
      const char* name;
      int* index;
      std::int64_t rows, cols;
    };
    for (const Want& want : {Want{"x", &b.x, xb.rows, xb.cols}, Want{"w", &b.w, wb.rows, wb.cols},
                             Want{"y", &b.y, yb.rows, yb.cols}}) {
      for (size_t i = 0; i < s.buffers.size(); ++i) {
        if (s.buffers[i].rank == r && s.buffers[i].name == want.name) *want.index = static_cast<int>(i);
      }
      if (*want.index < 0) return make_error("--check: rank {} has no buffer '{}'", r, want.name);
      const schedule::Buffer& buf = s.buffers[*want.index];
      if (buf.rows != want.rows || buf.cols != want.cols) {
        return make_error("--check: buffer '{}' of rank {} is {}x{}, but {} needs {}x{}", want.name,
                          r, buf.rows, buf.cols, workload::describe(op), want.rows, want.cols);
      }
    }
    b.x_row = xb.row;
    b.x_col = xb.col;
    b.w_row = wb.row;
    b.w_col = wb.col;
    b.y_row = yb.row;
    b.y_col = yb.col;
  }
  return out;
}

Result<std::vector<std::vector<int>>> piece_flags(const schedule::Schedule& s,
                                                  const StreamPlan& plan, int kernel_stream,
                                                  const std::vector<Piece>& pieces) {
  const std::size_t n = s.tasks.size();
  std::vector<int> stream(n, -1), position(n, -1), event(n, -1);
  for (std::size_t i = 0; i < plan.issues.size(); ++i) {
    const TaskIssue& is = plan.issues[i];
    if (is.task < 0 || static_cast<std::size_t>(is.task) >= n) continue;
    stream[static_cast<std::size_t>(is.task)] = is.stream;
    position[static_cast<std::size_t>(is.task)] = static_cast<int>(i);
    event[static_cast<std::size_t>(is.task)] = is.record_event;
  }
  std::vector<std::vector<int>> out;
  for (const Piece& piece : pieces) {
    std::map<int, int> last;  // stream -> its producer issued last
    for (int p : piece.producers) {
      if (p < 0 || static_cast<std::size_t>(p) >= n || stream[static_cast<std::size_t>(p)] < 0)
        return make_error("fused GEMM: producer task {} of chunk {} is not in the stream plan", p,
                          piece.chunk);
      const int st = stream[static_cast<std::size_t>(p)];
      if (st == kernel_stream) continue;
      auto [it, fresh] = last.emplace(st, p);
      if (!fresh && position[static_cast<std::size_t>(p)] > position[static_cast<std::size_t>(it->second)])
        it->second = p;
    }
    std::vector<int> flags;
    for (auto [st, p] : last) {
      const int e = event[static_cast<std::size_t>(p)];
      if (e < 0)
        return make_error("fused GEMM: task {} ('{}') delivers chunk {} but signals no flag", p,
                          s.tasks[static_cast<std::size_t>(p)].name, piece.chunk);
      flags.push_back(e);
    }
    out.push_back(std::move(flags));
  }
  return out;
}

}  // namespace compass::backends::cuda
