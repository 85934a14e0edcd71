#include "compass/schedule/schedule.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <type_traits>
#include <set>
#include <utility>

#include "compass/hardware/profile_io.hpp"
#include "compass/hardware/task_costs.hpp"

namespace compass::schedule {

int Schedule::find_buffer(int rank, const std::string& name) const {
  for (std::size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].rank == rank && buffers[i].name == name) return static_cast<int>(i);
  return -1;
}

std::int64_t task_bytes(const Schedule& s, const Task& t) {
  if (t.kind == TaskKind::gemm) return 0;
  return t.src.elements() * dtype_bytes(s.op.dtype);
}

double task_flops(const Task& t, const Schedule& /*s*/) {
  if (t.kind != TaskKind::gemm) return 0;
  return 2.0 * static_cast<double>(t.dst.rows) * static_cast<double>(t.dst.cols) *
         static_cast<double>(t.src.cols);
}

std::string_view to_string(TaskKind k) {
  switch (k) {
    case TaskKind::transfer:
      return "transfer";
    case TaskKind::gemm:
      return "gemm";
    case TaskKind::add:
      return "add";
    case TaskKind::copy:
      return "copy";
  }
  return "?";
}

std::string_view to_string(ResourceKind k) {
  switch (k) {
    case ResourceKind::compute:
      return "compute";
    case ResourceKind::copy_engine:
      return "copy_engine";
  }
  return "?";
}

std::string_view to_string(BufferRole r) {
  switch (r) {
    case BufferRole::input:
      return "input";
    case BufferRole::weight:
      return "weight";
    case BufferRole::output:
      return "output";
    case BufferRole::scratch:
      return "scratch";
  }
  return "?";
}

std::string_view to_string(Launch l) {
  switch (l) {
    case Launch::kernel:
      return "kernel";
    case Launch::fused_kernel:
      return "fused_kernel";
    case Launch::flag_wait:
      return "flag_wait";
    case Launch::collective:
      return "collective";
    case Launch::in_collective:
      return "in_collective";
    case Launch::copy:
      return "copy";
  }
  return "?";
}

void assign_launches(Schedule& s) {
  const bool fused = is_fused(s.strategy.kind);
  const auto nb = static_cast<int>(s.buffers.size());
  auto owner = [&](const Region& r) { return r.buffer >= 0 && r.buffer < nb ? s.owner(r) : -1; };
  std::set<int> ranks_with_gemm;  // a rank's first GEMM task launches its fused kernel
  for (Task& t : s.tasks) {
    switch (t.kind) {
      case TaskKind::gemm: {
        const bool first = ranks_with_gemm.insert(t.resource.rank).second;
        t.launch = !fused ? Launch::kernel : first ? Launch::fused_kernel : Launch::flag_wait;
        break;
      }
      case TaskKind::transfer:
        if (fused || owner(t.src) == owner(t.dst))
          t.launch = Launch::copy;
        else
          t.launch = t.step <= 0 ? Launch::collective : Launch::in_collective;
        break;
      case TaskKind::add:
        t.launch = fused ? Launch::flag_wait : Launch::in_collective;
        break;
      case TaskKind::copy:
        t.launch = Launch::copy;
        break;
    }
  }
}

double launch_cost_s(const hardware::Profile& p, Launch l) {
  switch (l) {
    case Launch::kernel:
    case Launch::fused_kernel:
      return p.overheads.kernel_launch_s;
    case Launch::flag_wait:
      return p.overheads.flag_wait_s;
    case Launch::collective:
      return p.overheads.collective_launch_s;
    case Launch::in_collective:
      return 0.0;
    case Launch::copy:
      return hardware::copy_issue_s(p);
  }
  return 0.0;
}

bool in_fused_kernel(const Task& t) {
  return t.kind == TaskKind::gemm &&
         (t.launch == Launch::fused_kernel || t.launch == Launch::flag_wait);
}

std::string task_label(const Task& t) {
  if (t.name.empty()) return fmt::format("task {}", t.id);
  return fmt::format("task {} ('{}')", t.id, t.name);
}

namespace {

// Checks that a region lies inside its buffer; `what` names the operand ("src", "b", "dst").
Status check_region(const Schedule& s, const Task& t, const Region& r, const char* what) {
  const int nb = static_cast<int>(s.buffers.size());
  if (r.buffer < 0 || r.buffer >= nb)
    return make_error("{}: {} names buffer {} (schedule has {} buffers)", task_label(t),
                      what, r.buffer, nb);
  const Buffer& b = s.buffers[static_cast<std::size_t>(r.buffer)];
  if (r.rows <= 0 || r.cols <= 0)
    return make_error("{}: {} region is empty ({} x {})", task_label(t), what, r.rows,
                      r.cols);
  if (r.row < 0 || r.col < 0 || r.row + r.rows > b.rows || r.col + r.cols > b.cols)
    return make_error(
        "{}: {} region rows [{}, {}) cols [{}, {}) is outside buffer '{}' of rank "
        "{} ({} x {})",
        task_label(t), what, r.row, r.row + r.rows, r.col, r.col + r.cols, b.name, b.rank,
        b.rows, b.cols);
  return Status::success();
}

Status check_same_shape(const Task& t, const Region& a, const Region& b) {
  if (a.rows != b.rows || a.cols != b.cols)
    return make_error("{}: src is {} x {} but dst is {} x {}", task_label(t), a.rows, a.cols,
                      b.rows, b.cols);
  return Status::success();
}

}  // namespace

Status validate(const Schedule& s) {
  const int p = s.ranks();
  if (p < 1) return make_error("schedule: gpus is empty (needs one GPU per rank)");
  if (s.op.tp != p) return make_error("schedule: op.tp is {} but gpus lists {} ranks", s.op.tp, p);
  if (s.copy_engines < 1 || s.copy_engines > hardware::kMaxCopyEngines)
    return make_error("schedule: copy_engines must be in 1..{}, got {}", hardware::kMaxCopyEngines,
                      s.copy_engines);
  std::set<std::pair<int, std::string>> names;
  for (std::size_t i = 0; i < s.buffers.size(); ++i) {
    const Buffer& b = s.buffers[i];
    if (b.rank < 0 || b.rank >= p)
      return make_error("buffer {} ('{}'): rank {} is outside 0..{}", i, b.name, b.rank, p - 1);
    if (b.rows <= 0 || b.cols <= 0)
      return make_error("buffer {} ('{}' of rank {}): shape {} x {} is not positive", i, b.name,
                        b.rank, b.rows, b.cols);
    if (b.name.empty()) return make_error("buffer {}: empty name", i);
    if (!names.insert({b.rank, b.name}).second)
      return make_error("buffer {}: rank {} has two buffers named '{}'", i, b.rank, b.name);
  }

  const std::size_t n = s.tasks.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = s.tasks[i];
    if (t.id != static_cast<int>(i))
      return make_error("{}: id is {} but it sits at index {}",
                        t.name.empty() ? fmt::format("task {}", i)
                                       : fmt::format("task {} ('{}')", i, t.name),
                        t.id, i);
    const Resource& res = t.resource;
    if (res.rank < 0 || res.rank >= p)
      return make_error("{}: resource rank {} is outside 0..{}", task_label(t), res.rank, p - 1);
    if (res.kind == ResourceKind::compute && res.index != 0)
      return make_error("{}: compute resource index must be 0, got {}", task_label(t),
                        res.index);
    if (res.kind == ResourceKind::copy_engine && (res.index < 0 || res.index >= s.copy_engines))
      return make_error("{}: copy engine {} is outside 0..{}", task_label(t), res.index,
                        s.copy_engines - 1);
    for (int d : t.deps) {
      if (d < 0 || d >= static_cast<int>(n))
        return make_error("{}: dependency {} is not a task id", task_label(t), d);
      if (d == t.id) return make_error("{}: depends on itself", task_label(t));
    }
    COMPASS_TRY(check_region(s, t, t.src, t.kind == TaskKind::gemm ? "a" : "src"));
    COMPASS_TRY(check_region(s, t, t.dst, "dst"));
    const int src_rank = s.owner(t.src);
    const int dst_rank = s.owner(t.dst);
    switch (t.kind) {
      case TaskKind::transfer:
        if (res.kind != ResourceKind::copy_engine)
          return make_error("{}: transfers must run on a copy engine", task_label(t));
        if (src_rank != res.rank)
          return make_error("{}: transfer source is on rank {} but the sender is rank {}",
                            task_label(t), src_rank, res.rank);
        COMPASS_TRY(check_same_shape(t, t.src, t.dst));
        break;
      case TaskKind::copy:
      case TaskKind::add:
        if (src_rank != res.rank || dst_rank != res.rank)
          return make_error("{}: {} must read and write buffers of its own rank {}",
                            task_label(t), to_string(t.kind), res.rank);
        COMPASS_TRY(check_same_shape(t, t.src, t.dst));
        break;
      case TaskKind::gemm: {
        if (res.kind != ResourceKind::compute)
          return make_error("{}: gemm must run on the compute resource", task_label(t));
        COMPASS_TRY(check_region(s, t, t.b, "b"));
        if (src_rank != res.rank || dst_rank != res.rank || s.owner(t.b) != res.rank)
          return make_error("{}: gemm operands must be buffers of its own rank {}",
                            task_label(t), res.rank);
        if (t.src.cols != t.b.rows || t.dst.rows != t.src.rows || t.dst.cols != t.b.cols)
          return make_error("{}: gemm shapes do not agree: a {} x {}, b {} x {}, c {} x {}",
                            task_label(t), t.src.rows, t.src.cols, t.b.rows, t.b.cols,
                            t.dst.rows, t.dst.cols);
        break;
      }
    }
    if (t.fused < -1)
      return make_error("{}: fused group {} is negative", task_label(t), t.fused);
    if (t.fused >= 0 && t.kind != TaskKind::gemm)
      return make_error("{}: only gemm tasks belong to a fused group", task_label(t));
  }
  // One fused GEMM: the same B, A rows in one buffer, C rows in one buffer.
  std::map<std::pair<int, int>, std::size_t> first_of_group;
  for (std::size_t i = 0; i < n; ++i) {
    const Task& t = s.tasks[i];
    if (t.fused < 0) continue;
    auto [it, fresh] = first_of_group.emplace(std::make_pair(t.resource.rank, t.fused), i);
    if (fresh) continue;
    const Task& f = s.tasks[it->second];
    if (!(t.b == f.b) || t.src.buffer != f.src.buffer || t.dst.buffer != f.dst.buffer ||
        t.src.col != f.src.col || t.dst.col != f.dst.col)
      return make_error(
          "{}: fused group {} of rank {} mixes operands: every gemm of a group "
          "reads the same b and rows of one a buffer into one c buffer (task {} "
          "does not match task {})",
          task_label(t), t.fused, t.resource.rank, i, it->second);
  }

  // A cycle through deps or a resource's order is a deadlock.
  COMPASS_TRY(issue_order(s));
  return Status::success();
}

ResourceLanes resource_lanes(const Schedule& s, int only_rank) {
  ResourceLanes out;
  out.lane_of.assign(s.tasks.size(), -1);
  // (rank, slot) -> lane, slot 0 the compute resource and 1 + e copy engine e; a flat table
  // for the resources a valid schedule names, a map for anything else.
  const int p = s.ranks();
  const int slots = 1 + std::max(0, s.copy_engines);
  std::vector<int> flat(static_cast<std::size_t>(std::max(0, p)) * slots, -1);
  std::map<std::tuple<int, int, int>, int> other;
  for (std::size_t i = 0; i < s.tasks.size(); ++i) {
    const Task& t = s.tasks[i];
    if (only_rank >= 0 && t.resource.rank != only_rank) continue;
    const bool compute = t.resource.kind == ResourceKind::compute;
    const int index = compute ? 0 : t.resource.index;
    const int slot = compute ? 0 : 1 + index;
    int* lane = nullptr;
    if (t.resource.rank >= 0 && t.resource.rank < p && slot >= 0 && slot < slots) {
      lane = &flat[static_cast<std::size_t>(t.resource.rank) * slots + slot];
    } else {
      lane = &other.try_emplace({t.resource.rank, compute ? 0 : 1, index}, -1).first->second;
    }
    if (*lane < 0) {
      *lane = static_cast<int>(out.resources.size());
      out.resources.push_back(Resource{t.resource.rank, t.resource.kind, index});
      out.tasks.emplace_back();
    }
    out.tasks[static_cast<std::size_t>(*lane)].push_back(static_cast<int>(i));
    out.lane_of[i] = *lane;
  }
  return out;
}

Result<std::vector<int>> issue_order(const Schedule& s) {
  const std::size_t n = s.tasks.size();
  const ResourceLanes lanes = resource_lanes(s);
  // Edges: deps, and each resource's previous task.
  std::vector<std::vector<int>> succ(n);
  std::vector<int> indeg(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (int d : s.tasks[i].deps) {
      COMPASS_CHECK(d >= 0 && static_cast<std::size_t>(d) < n, "issue_order: dep {} of task {}",
                    d, i);
      succ[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
      ++indeg[i];
    }
  }
  for (const std::vector<int>& lane : lanes.tasks)
    for (std::size_t k = 1; k < lane.size(); ++k) {
      succ[static_cast<std::size_t>(lane[k - 1])].push_back(lane[k]);
      ++indeg[static_cast<std::size_t>(lane[k])];
    }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int v = ready.top();
    ready.pop();
    order.push_back(v);
    for (int w : succ[static_cast<std::size_t>(v)])
      if (--indeg[static_cast<std::size_t>(w)] == 0) ready.push(w);
  }
  if (order.size() != n) {
    for (std::size_t i = 0; i < n; ++i)
      if (indeg[i] > 0)
        return make_error(
            "{}: dependency cycle (through its deps or its resource's task order); the schedule "
            "would deadlock",
            task_label(s.tasks[i]));
  }
  return order;
}

}  // namespace compass::schedule
