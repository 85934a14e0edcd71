// CPU-side behaviour of the CUDA backend: argument checks, error paths without a GPU,
// calibration bookkeeping. These run everywhere.
#include "compass/backends/cuda/cuda_backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "compass/backends/cuda/fused_plan.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cuda {
namespace {

schedule::Schedule small_schedule(workload::OpKind kind = workload::OpKind::ag_gemm,
                                  DType dtype = DType::bf16) {
  workload::OperatorSpec op;
  op.kind = kind;
  op.m = 64;
  op.n = 32;
  op.k = 48;
  op.tp = 2;
  op.dtype = dtype;
  auto s = schedule::generate(op, schedule::Strategy{}, schedule::default_comm_plan(2));
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

TEST(CudaBackend, CompiledInFollowsTheBuildOption) {
#if defined(COMPASS_WITH_CUDA)
  EXPECT_TRUE(compiled_in());
#else
  EXPECT_FALSE(compiled_in());
#endif
}

TEST(CudaBackend, WithoutADeviceEveryEntryPointSaysSo) {
  if (device_available().ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(device_available().error().message, "no CUDA device found");
  auto r = run_schedule(small_schedule(), RunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no CUDA device found");
  auto c = calibrate(CalibrateOptions{});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message, "no CUDA device found");
}

TEST(CudaBackend, BadOptionsAreReportedBeforeLookingForADevice) {
  const auto s = small_schedule();
  RunOptions o;
  o.repeat = 0;
  auto r = run_schedule(s, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("repeat"), std::string::npos) << r.error().message;
  o = RunOptions{};
  o.warmup = -1;
  r = run_schedule(s, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("warmup"), std::string::npos);
  auto c = calibrate(CalibrateOptions{false, -1});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("device"), std::string::npos);
}

TEST(CudaBackend, RejectsFp8AndBrokenSchedules) {
  auto s = small_schedule();
  s.op.dtype = DType::fp8;
  auto st = check_run_request(s, RunOptions{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("fp8"), std::string::npos);

  s = small_schedule();
  ASSERT_FALSE(s.tasks.empty());
  s.tasks.back().deps.push_back(static_cast<int>(s.tasks.size()) + 5);
  EXPECT_FALSE(check_run_request(s, RunOptions{}).ok());

  s = small_schedule();
  EXPECT_TRUE(check_run_request(s, RunOptions{}).ok());
  RunOptions multi;
  multi.mode = LaunchMode::multi_gpu;
  EXPECT_TRUE(check_run_request(s, multi).ok());
  s.gpus = {0, 0};
  EXPECT_FALSE(check_run_request(s, multi).ok());
}

TEST(CudaBackend, LaunchModeNames) {
  EXPECT_EQ(to_string(LaunchMode::virtual_ranks), "virtual");
  EXPECT_EQ(to_string(LaunchMode::multi_gpu), "multi-gpu");
  EXPECT_EQ(*parse_launch_mode("multi-gpu"), LaunchMode::multi_gpu);
  EXPECT_EQ(*parse_launch_mode("virtual"), LaunchMode::virtual_ranks);
  auto bad = parse_launch_mode("mpi");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'mpi'"), std::string::npos);
}

TEST(CudaBackend, SyncModeNames) {
  EXPECT_EQ(to_string(SyncMode::events), "events");
  EXPECT_EQ(to_string(SyncMode::flags), "flags");
  EXPECT_EQ(*parse_sync_mode("events"), SyncMode::events);
  EXPECT_EQ(*parse_sync_mode("flags"), SyncMode::flags);
  auto bad = parse_sync_mode("spin");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'spin'"), std::string::npos);
}

TEST(CudaBackend, KernelModeNames) {
  EXPECT_EQ(to_string(KernelMode::fused), "fused");
  EXPECT_EQ(to_string(KernelMode::chunked), "chunked");
  EXPECT_EQ(*parse_kernel_mode("fused"), KernelMode::fused);
  EXPECT_EQ(*parse_kernel_mode("chunked"), KernelMode::chunked);
  auto bad = parse_kernel_mode("bogus");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'bogus'"), std::string::npos);
}

TEST(CudaBackend, FusedKernelsAreBuiltOnlyWithCuda) {
  EXPECT_TRUE(compiled_in() || !fused_kernels_built());
}

// A schedule generated the way a run with `o` asks for it.
schedule::Schedule schedule_for(const RunOptions& o, workload::OpKind kind, std::string_view strategy,
                                DType dtype = DType::bf16) {
  workload::OperatorSpec op;
  op.kind = kind;
  op.m = 256;
  op.n = 128;
  op.k = 64;
  op.tp = 4;
  op.dtype = dtype;
  auto st = schedule::parse_strategy(strategy);
  EXPECT_TRUE(st.ok());
  auto s = schedule::generate(op, *st, schedule::default_comm_plan(4), generate_options(o));
  EXPECT_TRUE(s.ok()) << s.error().message;
  return *s;
}

bool has_groups(const schedule::Schedule& s) {
  return std::any_of(s.tasks.begin(), s.tasks.end(), [](const auto& t) { return t.fused >= 0; });
}

TEST(CudaBackend, GeneratorOptionsFollowTheKernel) {
  RunOptions o;
  o.kernel = KernelMode::chunked;
  EXPECT_FALSE(generate_options(o).fused_gemm);
  EXPECT_FALSE(has_groups(schedule_for(o, workload::OpKind::ag_gemm, "fuse:ring")));
  o.kernel = KernelMode::fused;
  EXPECT_TRUE(generate_options(o).fused_gemm);
  EXPECT_TRUE(has_groups(schedule_for(o, workload::OpKind::ag_gemm, "fuse:ring")));
  o.kernel.reset();
  EXPECT_EQ(generate_options(o).fused_gemm, fused_kernels_built());
}

TEST(CudaBackend, CheckRejectsTheFusedKernelWhereItCannotRun) {
  RunOptions fused;
  fused.kernel = KernelMode::fused;
  for (const auto& [kind, strategy] :
       std::vector<std::pair<workload::OpKind, std::string>>{
           {workload::OpKind::ag_gemm, "sequential"}, {workload::OpKind::ag_gemm, "fuse:hier"},
           {workload::OpKind::gemm_rs, "decompose:2"}, {workload::OpKind::gemm_ar, "fuse:synth"}}) {
    SCOPED_TRACE(strategy);
    const auto s = schedule_for(fused, kind, strategy);
    auto st = check_run_request(s, fused);
    ASSERT_FALSE(st.ok());
    const std::string& msg = st.error().message;
    EXPECT_NE(msg.find(fused_kernels_built() ? "no fused GEMM groups" : "not built"),
              std::string::npos) << msg;
    EXPECT_NE(msg.find("chunked kernel"), std::string::npos) << msg;
    // The same schedule runs with the chunked kernel or the default.
    RunOptions chunked;
    chunked.kernel = KernelMode::chunked;
    EXPECT_TRUE(check_run_request(s, chunked).ok());
    EXPECT_TRUE(check_run_request(s, RunOptions{}).ok());
  }
  for (const auto kind :
       {workload::OpKind::ag_gemm, workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
  for (const char* strategy : {"fuse:all2all", "fuse:ring", "fuse:double-ring"}) {
    SCOPED_TRACE(std::string(workload::to_string(kind)) + " " + strategy);
    const auto s = schedule_for(fused, kind, strategy);
    EXPECT_TRUE(has_groups(s));
    EXPECT_EQ(check_run_request(s, fused).ok(), fused_kernels_built());
    EXPECT_TRUE(check_run_request(s, RunOptions{}).ok());
    const auto f32 = schedule_for(fused, kind, strategy, DType::fp32);
    auto st = check_run_request(f32, fused);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find(fused_kernels_built() ? "bf16 or fp16" : "not built"),
              std::string::npos) << st.error().message;
    EXPECT_TRUE(check_run_request(f32, RunOptions{}).ok());  // the default falls back
  }
}

// The fused kernels read 16-byte rows: a width or inner dimension that is not a multiple of 8
// is refused with --kernel fused and runs chunked by default.
TEST(CudaBackend, FusedKernelNeedsDimensionsInMultiplesOf8) {
  RunOptions fused;
  fused.kernel = KernelMode::fused;
  workload::OperatorSpec op;
  op.kind = workload::OpKind::gemm_rs;
  op.m = 256;
  op.n = 100;
  op.k = 64;
  op.tp = 4;
  op.dtype = DType::bf16;
  auto s = schedule::generate(op, schedule::Strategy{schedule::StrategyKind::fuse_ring, 0},
                              schedule::default_comm_plan(4), generate_options(fused));
  ASSERT_TRUE(s.ok()) << s.error().message;
  auto groups = fused_groups(*s);
  ASSERT_TRUE(groups.ok());
  auto shapes = check_fused_shapes(*s, *groups);
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.error().message.find("the output width of rank 0's GEMMs to be a multiple of "
                                        "8, got 100"),
            std::string::npos)
      << shapes.error().message;
  auto st = check_run_request(*s, fused);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(fused_kernels_built() ? "multiple of 8" : "not built"),
            std::string::npos) << st.error().message;
  EXPECT_TRUE(check_run_request(*s, RunOptions{}).ok());
  op.n = 128;
  auto ok = schedule::generate(op, schedule::Strategy{schedule::StrategyKind::fuse_ring, 0},
                               schedule::default_comm_plan(4), generate_options(fused));
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(check_fused_shapes(*ok, *fused_groups(*ok)).ok());
}

TEST(CudaBackend, FusedKernelTimeoutMustBePositive) {
  RunOptions o;
  o.fused_timeout_s = 0;
  auto st = check_run_request(small_schedule(), o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("timeout"), std::string::npos) << st.error().message;
}

TEST(CudaBackend, FusedKernelWithoutADeviceSaysSo) {
  if (device_available().ok()) GTEST_SKIP() << "a CUDA device is present";
  if (!fused_kernels_built()) GTEST_SKIP() << "the fused kernels are not built";
  RunOptions o;
  o.kernel = KernelMode::fused;
  auto r = run_schedule(schedule_for(o, workload::OpKind::ag_gemm, "fuse:ring"), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no CUDA device found");
}

TEST(CudaBackend, TolerancesFollowPrecision) {
  EXPECT_DOUBLE_EQ(check_tolerance(DType::bf16), 2e-2);
  EXPECT_LT(check_tolerance(DType::fp16), check_tolerance(DType::bf16));
  EXPECT_LT(check_tolerance(DType::fp32), check_tolerance(DType::fp16));
}

TEST(CudaCalibration, ShapesIncludeTheChunkedGemmsOfDecomposition) {
  for (bool quick : {false, true}) {
    const auto shapes = calibration_gemm_shapes(quick);
    ASSERT_FALSE(shapes.empty());
    // Every M/d for d = 1, 2, 4, 8 of the largest token count is present for the 8192 square.
    for (int d : {1, 2, 4, 8}) {
      const GemmShape want{16384 / d, 8192, 8192};
      EXPECT_NE(std::find(shapes.begin(), shapes.end(), want), shapes.end())
          << "quick " << quick << " d " << d;
    }
    for (size_t i = 1; i < shapes.size(); ++i) EXPECT_FALSE(shapes[i] == shapes[i - 1]);
  }
  EXPECT_LT(calibration_gemm_shapes(true).size(), calibration_gemm_shapes(false).size());
}

TEST(CudaCalibration, ApplyWritesCalibrationOverheadsAndInterference) {
  hardware::Profile base;
  base.name = "h200x1";
  hardware::DeviceSpec spec;
  spec.name = "H200";
  spec.peak_flops[DType::bf16] = 989e12;
  base.devices.push_back(spec);

  CalibrationResult c;
  c.device = "NVIDIA H200";
  c.arch = "sm_90";
  c.sm_count = 132;
  c.device_count = 1;
  c.gemm = {{DType::bf16, 4096, 4096, 4096, 2e-4}};
  c.best_bf16_flops = 791e12;
  c.copy_bandwidth_bytes_per_s = 2.1e12;
  c.kernel_launch_s = 2.5e-6;
  c.copy_launch_s = 3.5e-6;
  c.gemm_slowdown_copy_engine = 1.07;
  c.gemm_slowdown_sm_copy = 0.98;  // noise below 1 is clamped
  c.comm_slowdown_beside_gemm = 1.2;
  c.notes = {"one GPU visible"};
  const hardware::Overheads defaults;

  const hardware::Profile p = apply_calibration(base, c);
  EXPECT_EQ(p.calibration.gemm, c.gemm);
  ASSERT_TRUE(p.calibration.copy_bandwidth_bytes_per_s.has_value());
  EXPECT_DOUBLE_EQ(*p.calibration.copy_bandwidth_bytes_per_s, 2.1e12);
  ASSERT_TRUE(p.calibration.gemm_efficiency.has_value());
  EXPECT_NEAR(*p.calibration.gemm_efficiency, 791.0 / 989.0, 1e-12);
  EXPECT_NE(p.calibration.source.find("NVIDIA H200"), std::string::npos);
  EXPECT_DOUBLE_EQ(p.overheads.kernel_launch_s, 2.5e-6);
  EXPECT_DOUBLE_EQ(p.overheads.copy_launch_s, 3.5e-6);
  EXPECT_DOUBLE_EQ(p.overheads.collective_launch_s, defaults.collective_launch_s);
  EXPECT_DOUBLE_EQ(p.interference.gemm_slowdown_copy_engine, 1.07);
  EXPECT_DOUBLE_EQ(p.interference.gemm_slowdown_sm_copy, 1.0);
  EXPECT_DOUBLE_EQ(p.interference.comm_slowdown_beside_gemm, 1.2);
  EXPECT_EQ(p.name, "h200x1");
  // The fused kernel was not measured: the profile keeps no fused factors.
  EXPECT_FALSE(p.calibration.fused_gemm_overhead.has_value());
  EXPECT_FALSE(p.calibration.fused_slowdown_copy_engine.has_value());
  CalibrationResult fused = c;
  fused.fused_gemm_overhead = 1.04;
  fused.fused_slowdown_copy_engine = 0.99;  // noise below 1 is clamped
  const hardware::Profile f = apply_calibration(base, fused);
  ASSERT_TRUE(f.calibration.fused_gemm_overhead.has_value());
  EXPECT_DOUBLE_EQ(*f.calibration.fused_gemm_overhead, 1.04);
  ASSERT_TRUE(f.calibration.fused_slowdown_copy_engine.has_value());
  EXPECT_DOUBLE_EQ(*f.calibration.fused_slowdown_copy_engine, 1.0);
  // Recalibrating a profile whose fused kernel was measured, where it now cannot be: the old
  // factors do not survive.
  const hardware::Profile again = apply_calibration(f, c);
  EXPECT_FALSE(again.calibration.fused_gemm_overhead.has_value());
  EXPECT_FALSE(again.calibration.fused_slowdown_copy_engine.has_value());

  c.collective_launch_s = 12e-6;
  c.peer_bandwidth_bytes_per_s = 400e9;
  const hardware::Profile q = apply_calibration(base, c);
  EXPECT_DOUBLE_EQ(q.overheads.collective_launch_s, 12e-6);
  bool peer_noted = false;
  for (const auto& n : q.notes) peer_noted |= n.find("peer copy") != std::string::npos;
  EXPECT_TRUE(peer_noted);
}

}  // namespace
}  // namespace compass::backends::cuda
