// JSON views of a simulation: the summary (sim_result_to_json) and a Chrome trace-event file
// that ui.perfetto.dev and chrome://tracing open.

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compass/backends/sim/simulator.hpp"
#include "compass/core/file_io.hpp"

namespace compass::backends::sim {
namespace {

using nlohmann::json;

// Thread ids inside a rank's process: the compute stream first, then the copy engines.
int track_id(const schedule::Resource& r) {
  return r.kind == schedule::ResourceKind::compute ? 0 : 1 + r.index;
}

std::string track_name(const schedule::Resource& r) {
  return r.kind == schedule::ResourceKind::compute ? std::string("compute stream")
                                                   : fmt::format("copy engine {}", r.index);
}

std::string trace_name(const schedule::Task& t) {
  return t.name.empty() ? fmt::format("{} {}", schedule::to_string(t.kind), t.id) : t.name;
}

}  // namespace

std::string sim_result_to_json(const SimResult& r, const schedule::Schedule& s) {
  json j;
  j["operator"] = workload::describe(s.op);
  j["strategy"] = schedule::to_string(s.strategy);
  j["gpus"] = s.gpus;
  j["total_s"] = r.total_s;
  j["exposed_comm_s"] = r.exposed_comm_s;
  j["exposed_comm_s_per_rank"] = r.exposed_comm_s_per_rank;
  j["transfers"] = r.transfers;
  j["transferred_bytes"] = r.transferred_bytes;
  json res = json::array();
  for (const ResourceBusy& b : r.resources) {
    res.push_back({{"rank", b.rank},
                   {"resource", schedule::to_string(b.kind)},
                   {"index", b.index},
                   {"tasks", b.tasks},
                   {"busy_s", b.busy_s},
                   {"busy_fraction", r.total_s > 0 ? b.busy_s / r.total_s : 0.0}});
  }
  j["resources"] = res;
  json links = json::array();
  for (const LinkUse& l : r.busiest_links) {
    links.push_back({{"link", l.name},
                     {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                     {"bytes", l.bytes},
                     {"busy_s", l.busy_s},
                     {"busy_fraction", l.busy_fraction},
                     {"mean_utilisation",
                      r.total_s > 0 ? l.bytes / l.bandwidth_bytes_per_s / r.total_s : 0.0}});
  }
  j["busiest_links"] = links;
  return j.dump(2);
}

std::string trace_to_json(const SimResult& r, const schedule::Schedule& s) {
  constexpr double kUs = 1e6;
  json events = json::array();
  for (int rank = 0; rank < s.ranks(); ++rank) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"name", fmt::format("rank {} (GPU {})", rank, s.gpus[rank])}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", 0},
                      {"args", {{"sort_index", rank}}}});
  }
  // Tracks, in the order their first task appears; a resource's tasks run in list order, so
  // emitting them in that order keeps ts monotone per track.
  std::vector<schedule::Resource> seen;
  for (const schedule::Task& t : s.tasks) {
    schedule::Resource res = t.resource;
    if (res.kind == schedule::ResourceKind::compute) res.index = 0;
    if (std::find(seen.begin(), seen.end(), res) != seen.end()) continue;
    seen.push_back(res);
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", res.rank},
                      {"tid", track_id(res)}, {"args", {{"name", track_name(res)}}}});
  }
  for (const schedule::Resource& res : seen) {
    for (const schedule::Task& t : s.tasks) {
      if (t.resource.rank != res.rank || t.resource.kind != res.kind) continue;
      if (res.kind == schedule::ResourceKind::copy_engine && t.resource.index != res.index) continue;
      const TaskTime& tt = r.tasks.at(t.id);
      json args = {{"id", t.id}, {"kind", schedule::to_string(t.kind)}};
      if (t.step >= 0) args["step"] = t.step;
      if (t.chunk >= 0) args["chunk"] = t.chunk;
      if (t.channel >= 0) args["ring"] = t.channel;
      if (t.kind != schedule::TaskKind::gemm) args["bytes"] = schedule::task_bytes(s, t);
      if (t.kind == schedule::TaskKind::transfer) args["to_rank"] = s.owner(t.dst);
      events.push_back({{"name", trace_name(t)},
                        {"cat", schedule::to_string(t.kind)},
                        {"ph", "X"},
                        {"ts", tt.start_s * kUs},
                        {"dur", std::max(0.0, tt.end_s - tt.start_s) * kUs},
                        {"pid", res.rank},
                        {"tid", track_id(res)},
                        {"args", args}});
    }
  }
  if (!r.busiest_links.empty()) {
    const int pid = s.ranks();
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"name", "busiest links (utilisation)"}}}});
    events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0},
                      {"args", {{"sort_index", pid}}}});
    for (const LinkUse& l : r.busiest_links)
      for (const LinkSample& x : l.samples)
        events.push_back({{"name", l.name}, {"ph", "C"}, {"ts", x.t_s * kUs}, {"pid", pid},
                          {"tid", 0}, {"args", {{"utilisation", x.utilisation}}}});
  }
  json j;
  j["traceEvents"] = std::move(events);
  j["displayTimeUnit"] = "ns";
  j["otherData"] = {{"operator", workload::describe(s.op)},
                    {"strategy", schedule::to_string(s.strategy)},
                    {"total_s", r.total_s}};
  return j.dump();
}

Status write_trace(const SimResult& r, const schedule::Schedule& s, const std::string& path,
                   bool overwrite) {
  return write_file_atomic(path, trace_to_json(r, s), overwrite);
}

}  // namespace compass::backends::sim
