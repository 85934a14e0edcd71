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

std::string task_label(const schedule::Task& t) {
  return t.name.empty() ? fmt::format("task {}", t.id) : fmt::format("task {} ('{}')", t.id, t.name);
}

}  // namespace

Result<StreamPlan> make_stream_plan(const schedule::Schedule& s, LaunchMode mode) {
  const int p = s.ranks();
  if (p < 1) return make_error("schedule has no ranks (gpus is empty)");
  if (mode == LaunchMode::multi_gpu) {
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
  }
  const int n = static_cast<int>(s.tasks.size());
  StreamPlan plan;
  std::map<std::tuple<int, int, int>, int> stream_of;  // (rank, kind, index) -> stream
  std::vector<int> task_stream(n, -1);
  for (int i = 0; i < n; ++i) {
    const schedule::Task& t = s.tasks[i];
    if (t.id != i) return make_error("tasks[{}]: id is {}, expected {}", i, t.id, i);
    if (t.resource.rank < 0 || t.resource.rank >= p) {
      return make_error("{}: resource rank {} is not in [0, {})", task_label(t), t.resource.rank, p);
    }
    if (t.resource.index < 0) {
      return make_error("{}: resource index {} is negative", task_label(t), t.resource.index);
    }
    for (int d : t.deps) {
      if (d < 0 || d >= n) return make_error("{}: dependency {} is not a task id", task_label(t), d);
      if (d == i) return make_error("{} depends on itself", task_label(t));
    }
    const int kind_index = t.resource.kind == schedule::ResourceKind::compute ? 0 : 1;
    const int index = kind_index == 0 ? 0 : t.resource.index;
    auto key = std::make_tuple(t.resource.rank, kind_index, index);
    auto it = stream_of.find(key);
    if (it == stream_of.end()) {
      StreamSpec spec;
      spec.rank = t.resource.rank;
      spec.kind = t.resource.kind;
      spec.index = index;
      spec.device = rank_device(s, mode, t.resource.rank);
      spec.high_priority = t.resource.kind == schedule::ResourceKind::copy_engine;
      it = stream_of.emplace(key, static_cast<int>(plan.streams.size())).first;
      plan.streams.push_back(spec);
    }
    task_stream[i] = it->second;
  }

  // Edges: explicit deps, plus each stream's list order (a stream is a FIFO).
  std::vector<std::vector<int>> consumers(n);
  std::vector<int> indegree(n, 0);
  std::vector<int> last_on_stream(plan.streams.size(), -1);
  for (int i = 0; i < n; ++i) {
    const schedule::Task& t = s.tasks[i];
    for (int d : t.deps) {
      if (task_stream[d] == task_stream[i] && d > i) {
        return make_error(
            "{} depends on {}, which is listed after it on the same resource (rank {} {} {}): "
            "the schedule would deadlock",
            task_label(t), task_label(s.tasks[d]), t.resource.rank, schedule::to_string(t.resource.kind),
            t.resource.index);
      }
      consumers[d].push_back(i);
      ++indegree[i];
    }
    int& prev = last_on_stream[task_stream[i]];
    if (prev >= 0) {
      consumers[prev].push_back(i);
      ++indegree[i];
    }
    prev = i;
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int c : consumers[i]) {
      if (--indegree[c] == 0) ready.push(c);
    }
  }
  if (static_cast<int>(order.size()) != n) {
    for (int i = 0; i < n; ++i) {
      if (indegree[i] > 0) {
        return make_error(
            "the schedule would deadlock: {} waits (directly or through its resource's order) on "
            "a cycle of dependencies",
            task_label(s.tasks[i]));
      }
    }
  }
  std::vector<int> position(n);
  for (int k = 0; k < n; ++k) position[order[k]] = k;

  // Per consumer and producer stream, only the producer issued last matters.
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
  for (const StreamSpec& st : plan.streams) plan.devices.push_back(st.device);
  std::sort(plan.devices.begin(), plan.devices.end());
  plan.devices.erase(std::unique(plan.devices.begin(), plan.devices.end()), plan.devices.end());
  return plan;
}

Result<std::vector<ReferenceBlocks>> reference_blocks(const schedule::Schedule& s) {
  using workload::OpKind;
  const auto& op = s.op;
  const int p = s.ranks();
  if (p < 1 || op.tp != p) {
    return make_error("--check: the operator has tp {} but the schedule has {} ranks", op.tp, p);
  }
  const bool ag = op.kind == OpKind::ag_gemm;
  const std::int64_t xr = ag ? op.m / p : op.m, xc = ag ? op.k : op.k / p;
  const std::int64_t wr = ag ? op.k : op.k / p, wc = ag ? op.n / p : op.n;
  const std::int64_t yr = op.kind == OpKind::gemm_rs ? op.m / p : op.m;
  const std::int64_t yc = ag ? op.n / p : op.n;
  std::vector<ReferenceBlocks> out(p);
  for (int r = 0; r < p; ++r) {
    ReferenceBlocks& b = out[r];
    struct Want {
      const char* name;
      int* index;
      std::int64_t rows, cols;
    };
    for (const Want& want : {Want{"x", &b.x, xr, xc}, Want{"w", &b.w, wr, wc}, Want{"y", &b.y, yr, yc}}) {
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
    b.x_row = ag ? r * xr : 0;
    b.x_col = ag ? 0 : r * xc;
    b.w_row = ag ? 0 : r * wr;
    b.w_col = ag ? r * wc : 0;
    b.y_row = op.kind == OpKind::gemm_rs ? r * yr : 0;
    b.y_col = ag ? r * yc : 0;
  }
  return out;
}

}  // namespace compass::backends::cuda
