// Schedule JSON (docs/schedule.md): writing a schedule and reading one back, checked.
#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "compass/core/json_text.hpp"
#include "compass/schedule/limits.hpp"
#include "compass/schedule/schedule.hpp"

namespace compass::schedule {

using nlohmann::json;

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
    const std::optional<std::int64_t> x =
        json_integer(v, static_cast<std::int64_t>(std::numeric_limits<T>::min()),
                     static_cast<std::int64_t>(std::numeric_limits<T>::max()));
    if (!x) return make_error("schedule JSON: {} is out of range ({})", where, v.dump());
    return static_cast<T>(*x);
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
  COMPASS_ASSIGN(const json j, parse_json_text(text, "schedule JSON"));
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
