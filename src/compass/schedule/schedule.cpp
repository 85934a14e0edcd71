#include "compass/schedule/schedule.hpp"
#include "compass/schedule/limits.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "compass/hardware/profile_io.hpp"
#include "compass/hardware/task_costs.hpp"

namespace compass::schedule {

using nlohmann::json;

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

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

// Output uses ordered_json so fields appear in a logical order (id, kind, resource, deps, data).
using ojson = nlohmann::ordered_json;

ojson region_json(const Region& r) {
  return ojson{
      {"buffer", r.buffer}, {"row", r.row}, {"rows", r.rows}, {"col", r.col}, {"cols", r.cols}};
}

ojson task_json(const Task& t) {
  ojson j;
  j["id"] = t.id;
  j["kind"] = std::string(to_string(t.kind));
  j["rank"] = t.resource.rank;
  j["resource"] = std::string(to_string(t.resource.kind));
  j["index"] = t.resource.index;
  j["deps"] = t.deps;
  j["src"] = region_json(t.src);
  if (t.b != Region{}) j["b"] = region_json(t.b);
  j["dst"] = region_json(t.dst);
  if (t.accumulate) j["accumulate"] = true;
  j["channel"] = t.channel;
  j["step"] = t.step;
  j["chunk"] = t.chunk;
  if (t.fused >= 0) j["fused"] = t.fused;
  j["name"] = t.name;
  return j;
}

ojson buffer_json(const Buffer& b) {
  return ojson{{"name", b.name},
               {"rank", b.rank},
               {"rows", b.rows},
               {"cols", b.cols},
               {"role", std::string(to_string(b.role))}};
}

// Parses with a path prefix so errors say where ("tasks[3].src.rows").
struct Reader {
  std::string path;

  template <typename T>
  Result<T> get(const json& j, const char* key) const {
    auto it = j.find(key);
    if (it == j.end()) return make_error("schedule JSON: {}.{} is missing", path, key);
    // Integers must be JSON integers that fit: a float or an out-of-range value converted to
    // an integer type is undefined behaviour.
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      return integer<T>(*it, fmt::format("{}.{}", path, key));
    } else if constexpr (std::is_same_v<T, std::vector<int>>) {
      if (!it->is_array())
        return make_error("schedule JSON: {}.{} has the wrong type ({})", path, key, it->dump());
      std::vector<int> out;
      out.reserve(it->size());
      for (std::size_t i = 0; i < it->size(); ++i) {
        COMPASS_ASSIGN(int v, integer<int>((*it)[i], fmt::format("{}.{}[{}]", path, key, i)));
        out.push_back(v);
      }
      return out;
    } else {
      try {
        return it->template get<T>();
      } catch (const json::exception&) {
        return make_error("schedule JSON: {}.{} has the wrong type ({})", path, key, it->dump());
      }
    }
  }
  template <typename T>
  static Result<T> integer(const json& v, const std::string& where) {
    if (!v.is_number_integer())
      return make_error("schedule JSON: {} must be an integer, got {}", where, v.dump());
    if (v.is_number_unsigned()) {
      if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        return make_error("schedule JSON: {} is out of range ({})", where, v.dump());
      return static_cast<T>(v.get<std::uint64_t>());
    }
    const std::int64_t x = v.get<std::int64_t>();
    if (x < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        x > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
      return make_error("schedule JSON: {} is out of range ({})", where, v.dump());
    return static_cast<T>(x);
  }
  template <typename T>
  Result<T> get_or(const json& j, const char* key, T fallback) const {
    if (!j.contains(key)) return fallback;
    return get<T>(j, key);
  }
  Reader sub(const std::string& more) const { return Reader{path + more}; }
};

Result<Region> parse_region(const Reader& rd, const json& j) {
  if (!j.is_object()) return make_error("schedule JSON: {} must be an object", rd.path);
  Region r;
  COMPASS_ASSIGN(r.buffer, rd.get<int>(j, "buffer"));
  COMPASS_ASSIGN(r.row, rd.get<std::int64_t>(j, "row"));
  COMPASS_ASSIGN(r.rows, rd.get<std::int64_t>(j, "rows"));
  COMPASS_ASSIGN(r.col, rd.get<std::int64_t>(j, "col"));
  COMPASS_ASSIGN(r.cols, rd.get<std::int64_t>(j, "cols"));
  return r;
}

}  // namespace

std::string schedule_to_json(const Schedule& s) {
  // One buffer and one task per line keeps the file readable and diffable.
  ojson op{{"kind", std::string(workload::to_string(s.op.kind))},
           {"m", s.op.m},
           {"n", s.op.n},
           {"k", s.op.k},
           {"tp", s.op.tp},
           {"dtype", std::string(compass::to_string(s.op.dtype))},
           {"role", s.op.role}};
  std::string out = "{\n";
  out += "  \"format\": \"compass-schedule\",\n  \"version\": 1,\n";
  out += fmt::format("  \"op\": {},\n", op.dump());
  out += fmt::format("  \"strategy\": {},\n", json(to_string(s.strategy)).dump());
  out += fmt::format("  \"gpus\": {},\n", json(s.gpus).dump());
  out += fmt::format("  \"copy_engines\": {},\n", s.copy_engines);
  out += "  \"buffers\": [";
  for (std::size_t i = 0; i < s.buffers.size(); ++i)
    out += fmt::format("{}\n    {}", i ? "," : "", buffer_json(s.buffers[i]).dump());
  out += s.buffers.empty() ? "],\n" : "\n  ],\n";
  out += "  \"tasks\": [";
  for (std::size_t i = 0; i < s.tasks.size(); ++i)
    out += fmt::format("{}\n    {}", i ? "," : "", task_json(s.tasks[i]).dump());
  out += s.tasks.empty() ? "]\n" : "\n  ]\n";
  out += "}\n";
  return out;
}

Result<Schedule> schedule_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return make_error("schedule JSON: not valid JSON ({})", e.what());
  } catch (const json::exception& e) {
    // e.g. a number too large for a double (1e999): out_of_range, not parse_error.
    return make_error("schedule JSON: not valid JSON ({})", e.what());
  }
  if (!j.is_object()) return make_error("schedule JSON: the top level must be an object");
  Reader top{"schedule"};
  COMPASS_ASSIGN(std::string format, top.get<std::string>(j, "format"));
  if (format != "compass-schedule")
    return make_error("schedule JSON: format is '{}', expected 'compass-schedule'", format);
  COMPASS_ASSIGN(int version, top.get<int>(j, "version"));
  if (version != 1) return make_error("schedule JSON: version {} is not supported (1 is)", version);

  Schedule s;
  if (!j.contains("op") || !j["op"].is_object())
    return make_error("schedule JSON: schedule.op is missing or not an object");
  const json& jo = j["op"];
  Reader ro = top.sub(".op");
  COMPASS_ASSIGN(std::string kind, ro.get<std::string>(jo, "kind"));
  auto k = workload::parse_op_kind(kind);
  if (!k) return make_error("schedule JSON: schedule.op.kind '{}' is not an operator", kind);
  s.op.kind = *k;
  COMPASS_ASSIGN(s.op.m, ro.get<std::int64_t>(jo, "m"));
  COMPASS_ASSIGN(s.op.n, ro.get<std::int64_t>(jo, "n"));
  COMPASS_ASSIGN(s.op.k, ro.get<std::int64_t>(jo, "k"));
  COMPASS_ASSIGN(s.op.tp, ro.get<int>(jo, "tp"));
  COMPASS_ASSIGN(std::string dtype, ro.get<std::string>(jo, "dtype"));
  auto dt = parse_dtype(dtype);
  if (!dt) return make_error("schedule JSON: schedule.op.dtype '{}' is not a dtype", dtype);
  s.op.dtype = *dt;
  COMPASS_ASSIGN(s.op.role, ro.get_or<std::string>(jo, "role", ""));

  COMPASS_ASSIGN(std::string strategy, top.get<std::string>(j, "strategy"));
  auto st = parse_strategy(strategy);
  if (!st.ok()) return make_error("schedule JSON: {}", st.error().message);
  s.strategy = *st;
  COMPASS_ASSIGN(s.gpus, top.get<std::vector<int>>(j, "gpus"));
  COMPASS_ASSIGN(s.copy_engines, top.get<int>(j, "copy_engines"));

  if (!j.contains("buffers") || !j["buffers"].is_array())
    return make_error("schedule JSON: schedule.buffers is missing or not an array");
  for (std::size_t i = 0; i < j["buffers"].size(); ++i) {
    const json& jb = j["buffers"][i];
    Reader rb = top.sub(fmt::format(".buffers[{}]", i));
    if (!jb.is_object()) return make_error("schedule JSON: {} must be an object", rb.path);
    Buffer b;
    COMPASS_ASSIGN(b.name, rb.get<std::string>(jb, "name"));
    COMPASS_ASSIGN(b.rank, rb.get<int>(jb, "rank"));
    COMPASS_ASSIGN(b.rows, rb.get<std::int64_t>(jb, "rows"));
    COMPASS_ASSIGN(b.cols, rb.get<std::int64_t>(jb, "cols"));
    COMPASS_ASSIGN(std::string role, rb.get<std::string>(jb, "role"));
    bool found = false;
    for (BufferRole r :
         {BufferRole::input, BufferRole::weight, BufferRole::output, BufferRole::scratch})
      if (to_string(r) == role) b.role = r, found = true;
    if (!found)
      return make_error("schedule JSON: {}.role '{}' is not input, weight, output or scratch",
                        rb.path, role);
    s.buffers.push_back(std::move(b));
  }

  if (!j.contains("tasks") || !j["tasks"].is_array())
    return make_error("schedule JSON: schedule.tasks is missing or not an array");
  if (j["tasks"].size() > static_cast<std::size_t>(kMaxTasks))
    return make_error("schedule JSON: schedule.tasks has {} tasks, more than the limit of {}",
                      j["tasks"].size(), kMaxTasks);
  for (std::size_t i = 0; i < j["tasks"].size(); ++i) {
    const json& jt = j["tasks"][i];
    Reader rt = top.sub(fmt::format(".tasks[{}]", i));
    if (!jt.is_object()) return make_error("schedule JSON: {} must be an object", rt.path);
    Task t;
    COMPASS_ASSIGN(t.id, rt.get<int>(jt, "id"));
    COMPASS_ASSIGN(std::string tk, rt.get<std::string>(jt, "kind"));
    bool found = false;
    for (TaskKind kk : {TaskKind::transfer, TaskKind::gemm, TaskKind::add, TaskKind::copy})
      if (to_string(kk) == tk) t.kind = kk, found = true;
    if (!found)
      return make_error("schedule JSON: {}.kind '{}' is not transfer, gemm, add or copy", rt.path,
                        tk);
    COMPASS_ASSIGN(t.resource.rank, rt.get<int>(jt, "rank"));
    COMPASS_ASSIGN(std::string rk, rt.get<std::string>(jt, "resource"));
    if (rk == "compute") {
      t.resource.kind = ResourceKind::compute;
    } else if (rk == "copy_engine") {
      t.resource.kind = ResourceKind::copy_engine;
    } else {
      return make_error("schedule JSON: {}.resource '{}' is not compute or copy_engine", rt.path,
                        rk);
    }
    COMPASS_ASSIGN(t.resource.index, rt.get<int>(jt, "index"));
    COMPASS_ASSIGN(t.deps, rt.get<std::vector<int>>(jt, "deps"));
    for (const char* key : {"src", "b", "dst"}) {
      if (!jt.contains(key)) {
        if (std::string_view(key) == "b") continue;
        return make_error("schedule JSON: {}.{} is missing", rt.path, key);
      }
      COMPASS_ASSIGN(Region r, parse_region(rt.sub(std::string(".") + key), jt[key]));
      if (std::string_view(key) == "src") t.src = r;
      if (std::string_view(key) == "b") t.b = r;
      if (std::string_view(key) == "dst") t.dst = r;
    }
    COMPASS_ASSIGN(t.accumulate, rt.get_or<bool>(jt, "accumulate", false));
    COMPASS_ASSIGN(t.channel, rt.get_or<int>(jt, "channel", -1));
    COMPASS_ASSIGN(t.step, rt.get_or<int>(jt, "step", -1));
    COMPASS_ASSIGN(t.chunk, rt.get_or<int>(jt, "chunk", -1));
    COMPASS_ASSIGN(t.fused, rt.get_or<int>(jt, "fused", -1));
    COMPASS_ASSIGN(t.name, rt.get_or<std::string>(jt, "name", ""));
    s.tasks.push_back(std::move(t));
  }
  COMPASS_TRY(validate(s));
  assign_launches(s);
  return s;
}

}  // namespace compass::schedule
