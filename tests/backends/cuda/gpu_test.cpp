// GPU tests (CTest label "gpu"): every operator x strategy in virtual-rank mode against the
// cuBLAS reference. They skip, with a message, when no CUDA device is present.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/schedule/generate.hpp"

namespace compass::backends::cuda {
namespace {

#define COMPASS_REQUIRE_GPU()                                                            \
  do {                                                                                   \
    if (Status st = device_available(); !st.ok()) GTEST_SKIP() << st.error().message;    \
  } while (0)

struct Case {
  workload::OpKind kind;
  int tp;
  DType dtype;
};

workload::OperatorSpec make_op(const Case& c) {
  workload::OperatorSpec op;
  op.kind = c.kind;
  op.m = 512;
  op.n = 384;
  op.k = 256;
  op.tp = c.tp;
  op.dtype = c.dtype;
  return op;
}

void run_all_strategies(const Case& c, int parts, SyncMode sync = SyncMode::events) {
  const workload::OperatorSpec op = make_op(c);
  for (const schedule::Strategy& strategy : schedule::all_strategies(parts)) {
    SCOPED_TRACE(workload::describe(op) + " " + schedule::to_string(strategy));
    auto s = schedule::generate(op, strategy, schedule::default_comm_plan(c.tp));
    ASSERT_TRUE(s.ok()) << s.error().message;
    RunOptions o;
    o.repeat = 2;
    o.check = true;
    o.sync = sync;
    auto r = run_schedule(*s, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->measurement.check.checked);
    EXPECT_TRUE(r->measurement.check.passed) << "max_rel_error " << r->measurement.check.max_rel_error << " tolerance "
                                 << r->measurement.check.tolerance;
    EXPECT_LE(r->measurement.check.max_rel_error, check_tolerance(c.dtype));
    EXPECT_EQ(r->measurement.times_s.size(), 2u);
    EXPECT_GT(r->measurement.min_s, 0);
    EXPECT_LE(r->measurement.min_s, r->measurement.median_s);
    EXPECT_LE(r->measurement.median_s, r->measurement.max_s);
    EXPECT_FALSE(r->info.device.empty());
    EXPECT_EQ(r->info.sync, to_string(sync));
  }
}

TEST(CudaGpu, AgGemmAllStrategiesBf16) {
  COMPASS_REQUIRE_GPU();
  run_all_strategies({workload::OpKind::ag_gemm, 4, DType::bf16}, 2);
}
TEST(CudaGpu, GemmRsAllStrategiesBf16) {
  COMPASS_REQUIRE_GPU();
  run_all_strategies({workload::OpKind::gemm_rs, 4, DType::bf16}, 2);
}
TEST(CudaGpu, GemmArAllStrategiesBf16) {
  COMPASS_REQUIRE_GPU();
  run_all_strategies({workload::OpKind::gemm_ar, 4, DType::bf16}, 2);
}
TEST(CudaGpu, EightVirtualRanksAndOtherDtypes) {
  COMPASS_REQUIRE_GPU();
  run_all_strategies({workload::OpKind::ag_gemm, 8, DType::fp16}, 4);
  run_all_strategies({workload::OpKind::gemm_rs, 8, DType::fp32}, 4);
  run_all_strategies({workload::OpKind::gemm_ar, 2, DType::fp16}, 2);
}

// The same schedules with device flags (stream memory operations) instead of events; three
// timed iterations check that the never-reset flags order every iteration, not just the first.
TEST(CudaGpu, AllOpsWithDeviceFlags) {
  COMPASS_REQUIRE_GPU();
  run_all_strategies({workload::OpKind::ag_gemm, 4, DType::bf16}, 2, SyncMode::flags);
  run_all_strategies({workload::OpKind::gemm_rs, 8, DType::fp16}, 4, SyncMode::flags);
  run_all_strategies({workload::OpKind::gemm_ar, 4, DType::fp32}, 2, SyncMode::flags);
}

// Regression: the --check reference once read operands that a synchronous-looking
// cudaMemcpy2D had not finished placing; it showed only at large shapes, once the reference
// GEMM's kernel was already loaded by an earlier run in the same process.
TEST(CudaGpu, LargeShapesSeveralRunsInOneProcess) {
  COMPASS_REQUIRE_GPU();
  workload::OperatorSpec op;
  op.kind = workload::OpKind::ag_gemm;
  op.m = op.n = op.k = 8192;
  op.tp = 8;
  op.dtype = DType::bf16;
  for (const char* name : {"sequential", "fuse:ring", "decompose:4"}) {
    SCOPED_TRACE(name);
    auto strategy = schedule::parse_strategy(name);
    ASSERT_TRUE(strategy.ok()) << strategy.error().message;
    auto s = schedule::generate(op, *strategy, schedule::default_comm_plan(8));
    ASSERT_TRUE(s.ok()) << s.error().message;
    RunOptions o;
    o.repeat = 2;
    o.check = true;
    auto r = run_schedule(*s, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->measurement.check.passed) << r->measurement.check.worst;
  }
}

// One fusion with the given kernel (unset: the default), checked against cuBLAS.
Result<RunReport> run_fusion(const Case& c, const std::string& strategy,
                                std::optional<KernelMode> kernel) {
  RunOptions o;
  o.repeat = 2;
  o.check = true;
  o.kernel = kernel;
  auto st = schedule::parse_strategy(strategy);
  if (!st.ok()) return st.error();
  COMPASS_ASSIGN(schedule::Schedule s,
                 schedule::generate(make_op(c), *st, schedule::default_comm_plan(c.tp),
                                    generate_options(o)));
  return run_schedule(s, o);
}

// A GPU the fused kernels do not support (before compute capability 8.0): the test skips.
bool unsupported_gpu(const Result<RunReport>& r) {
  return !r.ok() && r.error().message.find("compute capability") != std::string::npos;
}

void expect_check_passed(const RunReport& r) {
  EXPECT_TRUE(r.measurement.check.passed)
      << r.measurement.check.worst << " max_rel_error " << r.measurement.check.max_rel_error;
}

// The ag_gemm fusions with one fused kernel per rank whose tiles wait on device flags, and the
// same grouped schedules chunk by chunk; 4 ranks (128-row chunks, whole tiles) and 8 ranks
// (64-row chunks: tiles that wait for two chunks).
TEST(CudaGpu, FusedKernelRunsTheAgFusionsLikeTheChunkedOne) {
  COMPASS_REQUIRE_GPU();
  if (!fused_kernels_built()) GTEST_SKIP() << "the fused kernels are not built";
  for (const Case& c : {Case{workload::OpKind::ag_gemm, 4, DType::bf16},
                        Case{workload::OpKind::ag_gemm, 8, DType::fp16}}) {
    for (const std::string strategy : {"fuse:all2all", "fuse:ring", "fuse:double-ring"}) {
      for (KernelMode kernel : {KernelMode::fused, KernelMode::chunked}) {
        SCOPED_TRACE(strategy + " tp " + std::to_string(c.tp) + " " +
                     std::string(to_string(kernel)));
        auto r = run_fusion(c, strategy, kernel);
        if (unsupported_gpu(r)) GTEST_SKIP() << r.error().message;
        ASSERT_TRUE(r.ok()) << r.error().message;
        expect_check_passed(*r);
        if (kernel == KernelMode::fused) {
          EXPECT_EQ(r->info.kernel.rfind("fused ", 0), 0u) << r->info.kernel;
          EXPECT_EQ(r->info.sync, "flags");
        } else {
          EXPECT_EQ(r->info.kernel, "chunked");
          EXPECT_EQ(r->info.sync, "events");
        }
      }
    }
  }
}

// The gemm_rs and gemm_ar fusions with one fused GEMM-RS kernel per rank (partials stored
// into the owners' slots, summed in rank order) and chunk by chunk; 4 ranks BF16 and 8 ranks
// FP16 (64-row chunks, half-chunk pieces on the double ring). Run twice, the fused kernel gives
// the same largest error to the last bit (the sum's order is fixed). The GEMM-RS kernel is the
// one the AG-GEMM gets on this GPU (sm90 on an H100/H200, else sm80).
TEST(CudaGpu, FusedKernelRunsTheRsFusionsLikeTheChunkedOne) {
  COMPASS_REQUIRE_GPU();
  if (!fused_kernels_built()) GTEST_SKIP() << "the fused kernels are not built";
  auto ag = run_fusion(Case{workload::OpKind::ag_gemm, 4, DType::bf16}, "fuse:ring",
                       KernelMode::fused);
  if (unsupported_gpu(ag)) GTEST_SKIP() << ag.error().message;
  ASSERT_TRUE(ag.ok()) << ag.error().message;
  for (workload::OpKind kind : {workload::OpKind::gemm_rs, workload::OpKind::gemm_ar})
    for (const Case& c : {Case{kind, 4, DType::bf16}, Case{kind, 8, DType::fp16}})
      for (const std::string strategy : {"fuse:all2all", "fuse:ring", "fuse:double-ring"}) {
        std::optional<double> first_error;
        for (KernelMode kernel : {KernelMode::fused, KernelMode::fused, KernelMode::chunked}) {
          SCOPED_TRACE(std::string(workload::to_string(kind)) + " " + strategy + " tp " +
                       std::to_string(c.tp) + " " + std::string(to_string(kernel)));
          auto r = run_fusion(c, strategy, kernel);
          if (unsupported_gpu(r)) GTEST_SKIP() << r.error().message;
          ASSERT_TRUE(r.ok()) << r.error().message;
          expect_check_passed(*r);
          if (kernel == KernelMode::chunked) {
            EXPECT_EQ(r->info.kernel, "chunked");
            continue;
          }
          EXPECT_EQ(r->info.kernel, ag->info.kernel);
          EXPECT_EQ(r->info.sync, "flags");
          if (first_error) {
            EXPECT_EQ(*first_error, r->measurement.check.max_rel_error);
          }
          first_error = r->measurement.check.max_rel_error;
        }
      }
}

TEST(CudaGpu, DefaultKernelIsFusedWhereItCanRun) {
  COMPASS_REQUIRE_GPU();
  const Case c{workload::OpKind::ag_gemm, 4, DType::bf16};
  auto r = run_fusion(c, "fuse:ring", std::nullopt);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->measurement.check.passed) << r->measurement.check.worst;
  // Fused exactly where an explicit fused request runs (kernels built, GPU of 8.0 or newer).
  auto fused = run_fusion(c, "fuse:ring", KernelMode::fused);
  EXPECT_EQ(r->info.kernel != "chunked", fused.ok())
      << r->info.kernel << " / " << (fused.ok() ? fused->info.kernel : fused.error().message);
  // sequential has no fused groups: the default runs it chunked.
  auto seq = run_fusion(c, "sequential", std::nullopt);
  ASSERT_TRUE(seq.ok()) << seq.error().message;
  EXPECT_EQ(seq->info.kernel, "chunked");
}

TEST(CudaGpu, MultiGpuNeedsEnoughDevices) {
  COMPASS_REQUIRE_GPU();
  workload::OperatorSpec op = make_op({workload::OpKind::ag_gemm, 8, DType::bf16});
  auto s = schedule::generate(op, schedule::Strategy{}, schedule::default_comm_plan(8));
  ASSERT_TRUE(s.ok()) << s.error().message;
  RunOptions o;
  o.mode = LaunchMode::multi_gpu;
  auto r = run_schedule(*s, o);
  // On a machine with 8 GPUs this runs; elsewhere it names the missing GPU.
  if (!r.ok()) {
    EXPECT_NE(r.error().message.find("virtual ranks"), std::string::npos) << r.error().message;
  }
}

TEST(CudaGpu, QuickCalibrationProducesAUsableProfile) {
  COMPASS_REQUIRE_GPU();
  auto c = calibrate(CalibrateOptions{true, 0});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_FALSE(c->gemm.empty());
  EXPECT_GT(c->best_bf16_flops, 0);
  EXPECT_GT(c->copy_bandwidth_bytes_per_s, 0);
  EXPECT_GT(c->kernel_launch_s, 0);
  EXPECT_GE(c->gemm_slowdown_copy_engine, 0.5);
  for (const auto& g : c->gemm) EXPECT_GT(g.time_s, 0);
}

}  // namespace
}  // namespace compass::backends::cuda
