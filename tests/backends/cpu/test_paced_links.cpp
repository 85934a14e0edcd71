// The paced link engine: pacing math on a virtual clock (one transfer, fair sharing,
// full duplex, link scale), the real engine's copy and lower-bounded wait, and CPU calibration
// output that loads back as a valid Profile. No assertion depends on how fast this machine is
// beyond "a wait never ends early".

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "compass/backends/cpu/calibrate.hpp"
#include "compass/backends/cpu/executor.hpp"
#include "compass/backends/cpu/paced_links.hpp"
#include "compass/hardware/presets.hpp"
#include "compass/hardware/profile_io.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cpu {
namespace {

// Three GPUs on one switch; every link 1000 B/s each way, 1 ms latency (route: 2 hops).
hardware::Profile star() {
  hardware::Profile p;
  p.name = "star";
  p.devices.push_back({.name = "dev", .sm_count = 1});
  for (int i = 0; i < 3; ++i)
    p.nodes.push_back({fmt::format("gpu{}", i), hardware::NodeKind::gpu, "dev"});
  p.nodes.push_back({"sw", hardware::NodeKind::pcie_switch, ""});
  for (int i = 0; i < 3; ++i) {
    hardware::Link l;
    l.name = fmt::format("l{}", i);
    l.a = i;
    l.b = 3;
    l.bandwidth_bytes_per_s = 1000;
    l.reverse_bandwidth_bytes_per_s = 1000;
    l.latency_s = 0.001;
    p.links.push_back(l);
  }
  EXPECT_TRUE(hardware::compute_missing_routes(p).ok());
  return p;
}

TEST(LinkPacer, OneTransferTakesLatencyPlusBytesOverBandwidth) {
  auto pacer = LinkPacer::create(star(), {0, 1, 2}, 1.0);
  ASSERT_TRUE(pacer.ok()) << pacer.error().message;
  const int id = pacer->start(0.0, 0, 1, 1000);
  EXPECT_DOUBLE_EQ(pacer->rate(id), 1000);
  EXPECT_NEAR(pacer->finish_time_s(id), 0.002 + 1.0, 1e-12);
  pacer->finish(1.002, id);
  EXPECT_EQ(pacer->active(), 0);
}

TEST(LinkPacer, LinkScaleDividesTheRate) {
  auto pacer = LinkPacer::create(star(), {0, 1, 2}, 0.25);
  ASSERT_TRUE(pacer.ok());
  const int id = pacer->start(0.0, 0, 1, 1000);
  EXPECT_NEAR(pacer->finish_time_s(id), 0.002 + 4.0, 1e-12);
}

TEST(LinkPacer, SharedLinkIsSharedFairlyAndReSharedOnFinish) {
  auto pacer = LinkPacer::create(star(), {0, 1, 2}, 1.0);
  ASSERT_TRUE(pacer.ok());
  // Both cross sw -> gpu2.
  const int a = pacer->start(0.0, 0, 2, 1000);
  const int b = pacer->start(0.0, 1, 2, 500);
  EXPECT_DOUBLE_EQ(pacer->rate(a), 500);
  EXPECT_DOUBLE_EQ(pacer->rate(b), 500);
  EXPECT_NEAR(pacer->finish_time_s(b), 0.002 + 1.0, 1e-9);
  pacer->finish(1.002, b);
  // a moved 500 bytes; the other 500 now go at the full 1000 B/s.
  EXPECT_DOUBLE_EQ(pacer->rate(a), 1000);
  EXPECT_NEAR(pacer->finish_time_s(a), 1.502, 1e-9);
}

TEST(LinkPacer, LateStarterSlowsTheFirst) {
  auto pacer = LinkPacer::create(star(), {0, 1, 2}, 1.0);
  ASSERT_TRUE(pacer.ok());
  const int a = pacer->start(0.0, 0, 2, 1000);
  EXPECT_NEAR(pacer->finish_time_s(a), 1.002, 1e-9);
  const int b = pacer->start(0.502, 1, 2, 1000);  // a has 500 bytes left
  EXPECT_NEAR(pacer->finish_time_s(a), 0.502 + 500.0 / 500.0, 1e-9);
  EXPECT_GT(pacer->finish_time_s(b), pacer->finish_time_s(a));
}

TEST(LinkPacer, FullDuplexDirectionsAreIndependent) {
  auto pacer = LinkPacer::create(star(), {0, 1, 2}, 1.0);
  ASSERT_TRUE(pacer.ok());
  const int a = pacer->start(0.0, 0, 1, 1000);
  const int b = pacer->start(0.0, 1, 0, 1000);
  EXPECT_DOUBLE_EQ(pacer->rate(a), 1000);
  EXPECT_DOUBLE_EQ(pacer->rate(b), 1000);
  EXPECT_NEAR(pacer->finish_time_s(a), 1.002, 1e-9);
  EXPECT_NEAR(pacer->finish_time_s(b), 1.002, 1e-9);
}

TEST(LinkPacer, RejectsBadInput) {
  EXPECT_FALSE(LinkPacer::create(star(), {0, 5}, 1.0).ok());
  EXPECT_FALSE(LinkPacer::create(star(), {0, 1}, 0.0).ok());
  auto p = star();
  p.links[1].bandwidth_bytes_per_s = 0;
  EXPECT_FALSE(LinkPacer::create(p, {0, 1}, 1.0).ok());
}

TEST(PacedLinkEngine, CopiesTheBytesAndNeverFinishesEarly) {
  auto engine = PacedLinkEngine::create(star(), {0, 1, 2}, 1.0);
  ASSERT_TRUE(engine.ok());
  std::vector<float> src(10, 3.5f), dst(10, 0.0f);
  TransferRequest r;
  r.src_rank = 0;
  r.dst_rank = 1;
  r.bytes = 40;  // 40 ms at 1000 B/s, plus 2 ms latency
  r.src = src.data();
  r.src_ld = 10;
  r.dst = dst.data();
  r.dst_ld = 10;
  r.rows = 1;
  r.cols = 10;
  const auto t0 = std::chrono::steady_clock::now();
  (*engine)->transfer(r, std::stop_token{});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.042 * 0.99);
  EXPECT_EQ(dst, src);
}

TEST(PacedLinkEngine, StopEndsTheWait) {
  auto engine = PacedLinkEngine::create(star(), {0, 1, 2}, 1.0);
  ASSERT_TRUE(engine.ok());
  float a = 1, b = 0;
  TransferRequest r;
  r.src_rank = 0;
  r.dst_rank = 1;
  r.bytes = 1000000;  // 1000 s if not stopped
  r.src = &a;
  r.dst = &b;
  r.src_ld = r.dst_ld = 1;
  r.rows = r.cols = 1;
  std::stop_source stop;
  std::jthread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    stop.request_stop();
  });
  (*engine)->transfer(r, stop.get_token());
  EXPECT_EQ(b, 1.0f);
}

TEST(PacedLinkEngine, ExecutorResultsMatchTheReference) {
  workload::OperatorSpec op;
  op.kind = workload::OpKind::ag_gemm;
  op.m = 64;
  op.n = 32;
  op.k = 16;
  op.tp = 2;
  op.dtype = DType::fp32;
  auto preset = hardware::make_preset("a6000x8");
  ASSERT_TRUE(preset.ok());
  for (auto st : schedule::all_strategies(2)) {
    auto s = schedule::generate(op, st, schedule::default_comm_plan(2));
    ASSERT_TRUE(s.ok()) << s.error().message;
    auto engine = PacedLinkEngine::create(*preset, s->gpus, 1e-3);
    ASSERT_TRUE(engine.ok());
    ExecutorOptions eo;
    eo.transfer_engine = *engine;
    auto data = make_operator_data(op, 1);
    ASSERT_TRUE(data.ok());
    auto ref = reference_output(*data);
    ASSERT_TRUE(ref.ok());
    auto ws = Workspace::create(*s, *data, eo);
    ASSERT_TRUE(ws.ok());
    ws->reset(*data);
    auto stats = run(*s, *ws, eo);
    ASSERT_TRUE(stats.ok()) << stats.error().message;
    EXPECT_LE(compare_outputs(*s, *ws, *ref).max_rel_error, kCheckTolerance)
        << schedule::to_string(st);
  }
}

TEST(CpuCalibration, OutputLoadsAndValidatesAsAProfile) {
  CpuCalibrateOptions o;
  o.shapes = {{32, 32, 32}, {64, 32, 16}, {32, 32, 32}};
  o.concurrency = 2;
  o.quick = true;
  int calls = 0;
  o.progress = [&](double f) {
    ++calls;
    EXPECT_LE(f, 1.0 + 1e-12);
  };
  auto c = calibrate(o);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->gemm.size(), 2u);  // duplicates measured once
  EXPECT_GT(calls, 0);
  for (const auto& g : c->gemm) {
    EXPECT_EQ(g.dtype, DType::fp32);
    EXPECT_GT(g.time_s, 0);
  }
  EXPECT_GT(c->copy_bandwidth_bytes_per_s, 0);
  EXPECT_GE(c->task_overhead_s, 0);
  auto base = hardware::make_preset("a6000x8");
  ASSERT_TRUE(base.ok());
  const hardware::Profile p = apply_calibration(*base, *c);
  ASSERT_TRUE(hardware::validate(p).ok()) << hardware::validate(p).error().message;
  const auto path =
      (std::filesystem::temp_directory_path() / fmt::format("compass-cal-{}.json", ::getpid()))
          .string();
  ASSERT_TRUE(hardware::save_profile_file(p, path, true).ok());
  auto back = hardware::load_profile_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->calibration.gemm.size(), 2u);
  EXPECT_EQ(back->overheads, p.overheads);
}

TEST(CpuCalibration, RejectsEmptyAndBadShapes) {
  EXPECT_FALSE(calibrate({}).ok());
  CpuCalibrateOptions o;
  o.shapes = {{0, 4, 4}};
  EXPECT_FALSE(calibrate(o).ok());
}

}  // namespace
}  // namespace compass::backends::cpu
