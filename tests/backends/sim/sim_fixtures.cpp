#include "sim_fixtures.hpp"

#include <gtest/gtest.h>

namespace compass::backends::sim::testing {

using namespace compass::hardware;
using namespace compass::schedule;

DeviceSpec test_device() {
  DeviceSpec d;
  d.name = "test-gpu";
  d.arch = "sm_80";
  d.sm_count = 100;
  d.peak_flops[DType::bf16] = 100e12;
  d.memory_bandwidth_bytes_per_s = 1e12;
  d.memory_bytes = 1e10;
  d.copy_engines = 2;
  return d;
}

namespace {
Profile base(const std::string& name, int gpus) {
  Profile p;
  p.name = name;
  p.devices.push_back(test_device());
  for (int g = 0; g < gpus; ++g) p.nodes.push_back(Node{"gpu" + std::to_string(g), NodeKind::gpu, "test-gpu"});
  return p;
}
Link link(const std::string& name, int a, int b, double bw, double lat) {
  Link l;
  l.name = name;
  l.kind = LinkKind::pcie;
  l.a = a;
  l.b = b;
  l.bandwidth_bytes_per_s = bw;
  l.reverse_bandwidth_bytes_per_s = bw;
  l.latency_s = lat;
  l.source = "assumed: test";
  return l;
}
}  // namespace

Profile star_profile(int gpus, double bw, double lat) {
  Profile p = base("star", gpus);
  p.nodes.push_back(Node{"sw", NodeKind::pcie_switch, ""});
  for (int g = 0; g < gpus; ++g) p.links.push_back(link("l" + std::to_string(g), g, gpus, bw, lat));
  Status st = compute_missing_routes(p);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return p;
}

Profile ring_profile(int gpus, double bw, double lat) {
  Profile p = base("ring", gpus);
  for (int g = 0; g < gpus; ++g)
    p.links.push_back(link("ring" + std::to_string(g), g, (g + 1) % gpus, bw, lat));
  // Only neighbours are routed (GPUs do not forward traffic); enough for ring schedules.
  for (int g = 0; g < gpus; ++g) {
    const int next = (g + 1) % gpus;
    if (next == g) continue;
    p.routes.push_back(Route{g, next, {Hop{g, true}}});
    if (gpus > 2) p.routes.push_back(Route{next, g, {Hop{g, false}}});
  }
  return p;
}

void clear_overheads(Profile& p) {
  p.overheads = Overheads{0, 0, 0, 0};
  p.interference = Interference{1, 1, 1};
}

ScheduleBuilder::ScheduleBuilder(int ranks, std::int64_t rows, std::int64_t cols, StrategyKind kind)
    : rows_(rows) {
  s.op = workload::OperatorSpec{workload::OpKind::ag_gemm, rows * ranks, cols, cols, ranks,
                                DType::bf16, ""};
  s.strategy = Strategy{kind, 0};
  s.copy_engines = 2;
  for (int r = 0; r < ranks; ++r) s.gpus.push_back(r);
  for (int r = 0; r < ranks; ++r) {
    s.buffers.push_back(Buffer{"x", r, rows, cols, BufferRole::input});
    s.buffers.push_back(Buffer{"y", r, rows * ranks, cols, BufferRole::output});
    s.buffers.push_back(Buffer{"w", r, cols, 16 * cols, BufferRole::weight});
    s.buffers.push_back(Buffer{"out", r, rows * ranks, 16 * cols, BufferRole::scratch});
  }
}

int ScheduleBuilder::add_task(Task t) {
  t.id = static_cast<int>(s.tasks.size());
  s.tasks.push_back(std::move(t));
  schedule::assign_launches(s);  // as the generators do, from the strategy given
  return s.tasks.back().id;
}

int ScheduleBuilder::transfer(int from, int to, std::int64_t rows, int slot, std::vector<int> deps,
                              int engine, int step, const std::string& name) {
  Task t;
  t.kind = TaskKind::transfer;
  t.resource = Resource{from, ResourceKind::copy_engine, engine};
  t.deps = std::move(deps);
  t.src = Region{s.find_buffer(from, "x"), 0, rows, 0, s.buffers[s.find_buffer(from, "x")].cols};
  t.dst = Region{s.find_buffer(to, "y"), slot * rows_, rows, 0, t.src.cols};
  t.step = step;
  t.name = name.empty() ? fmt::format("r{} -> r{} slot {}", from, to, slot) : name;
  return add_task(std::move(t));
}

int ScheduleBuilder::local_copy(int rank, std::int64_t rows, std::vector<int> deps, int engine) {
  Task t;
  t.kind = TaskKind::copy;
  t.resource = Resource{rank, ResourceKind::copy_engine, engine};
  t.deps = std::move(deps);
  t.src = Region{s.find_buffer(rank, "x"), 0, rows, 0, s.buffers[s.find_buffer(rank, "x")].cols};
  t.dst = Region{s.find_buffer(rank, "y"), 0, rows, 0, t.src.cols};
  t.name = fmt::format("r{} copy", rank);
  return add_task(std::move(t));
}

int ScheduleBuilder::gemm(int rank, std::int64_t m, std::int64_t n, std::int64_t k,
                          std::vector<int> deps) {
  Task t;
  t.kind = TaskKind::gemm;
  t.resource = Resource{rank, ResourceKind::compute, 0};
  t.deps = std::move(deps);
  t.src = Region{s.find_buffer(rank, "x"), 0, m, 0, k};
  t.b = Region{s.find_buffer(rank, "w"), 0, k, 0, n};
  t.dst = Region{s.find_buffer(rank, "out"), 0, m, 0, n};
  t.name = fmt::format("r{} gemm", rank);
  return add_task(std::move(t));
}

}  // namespace compass::backends::sim::testing
