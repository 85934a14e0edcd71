// GPU tests of the fused kernels (CTest label "gpu"): standalone AG-GEMM and GEMM-RS runs
// against cuBLASLt. They skip, with a message, when no CUDA device is present or the kernels
// are not built into this binary (COMPASS_FUSED_KERNELS=OFF, or AUTO without a GPU).
#include <gtest/gtest.h>

#include <string>

#include "compass/backends/cuda/cuda_backend.hpp"
#include "compass/backends/cuda/fused.hpp"

namespace compass::backends::cuda {
namespace {

#define COMPASS_REQUIRE_FUSED_GPU()                                                         \
  do {                                                                                \
    if (Status st = device_available(); !st.ok()) GTEST_SKIP() << st.error().message; \
    if (!fused_kernels_built()) GTEST_SKIP() << "the fused kernels are not built";     \
  } while (0)

FusedCheckOptions ag(std::int64_t m, std::int64_t n, std::int64_t k, int p, DType t) {
  FusedCheckOptions o;
  o.kind = workload::OpKind::ag_gemm;
  o.m = m, o.n = n, o.k = k, o.ranks = p, o.dtype = t;
  o.repeat = 2;
  return o;
}

void expect_passes(const FusedCheckOptions& o) {
  SCOPED_TRACE(fmt::format("{} {}x{}x{} p{} {} kernel {} release {}", workload::to_string(o.kind),
                           o.m, o.n, o.k, o.ranks, compass::to_string(o.dtype), o.kernel,
                           to_string(o.release)));
  auto r = fused_check(o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->nan_count, 0);
  EXPECT_LE(r->max_rel_error, r->tolerance);
  EXPECT_TRUE(r->bit_identical);
  EXPECT_GT(r->tiles, 0);
  EXPECT_EQ(r->times_s.size(), static_cast<std::size_t>(o.repeat));
  EXPECT_GT(r->median_s, 0);
  EXPECT_GT(r->reference_median_s, 0);
}

// Both kernels where the GPU has them: "auto" is sm90 on an H100/H200, sm80 elsewhere.
TEST(FusedGpu, AgPresetFlagsMatchCublasTileMultiples) {
  COMPASS_REQUIRE_FUSED_GPU();
  for (const char* kernel : {"auto", "sm80"})
    for (DType t : {DType::bf16, DType::fp16}) {
      auto o = ag(1024, 1024, 512, 4, t);
      o.order = {2, 0, 3, 1};
      o.kernel = kernel;
      expect_passes(o);
    }
}

TEST(FusedGpu, AgPresetFlagsMatchCublasOddShapes) {
  COMPASS_REQUIRE_FUSED_GPU();
  for (const char* kernel : {"auto", "sm80"})
    for (DType t : {DType::bf16, DType::fp16}) {
      // 1000 rows in 3 chunks (tiles span chunk boundaries), N and K no tile multiples.
      auto o = ag(1000, 264, 392, 3, t);
      o.kernel = kernel;
      expect_passes(o);
    }
}

// A tile that loads its A rows before its flag reads NaN: the pieces are poisoned and copied
// in late, in a scrambled order, by another stream.
TEST(FusedGpu, AgLateScrambledReleaseGivesNoNan) {
  COMPASS_REQUIRE_FUSED_GPU();
  for (const char* kernel : {"auto", "sm80"}) {
    auto o = ag(2048, 1024, 1024, 8, DType::bf16);
    o.kernel = kernel;
    o.release = FusedRelease::late_scrambled;
    o.repeat = 3;
    expect_passes(o);
  }
}

// A flag that never arrives must end in the timeout error, not a hang. The trap loses the
// CUDA context, so the run happens in a fresh child process.
// Runs the check inside a death test: exit code 3 with the error on stderr, 0 when it passes.
[[noreturn]] void exit_with_check(const FusedCheckOptions& o) {
  auto r = fused_check(o);
  if (!r.ok()) {
    fprintf(stderr, "%s\n", r.error().message.c_str());
    std::_Exit(3);
  }
  std::_Exit(0);
}

TEST(FusedGpuDeathTest, AgFlagThatNeverArrivesTimesOut) {
  COMPASS_REQUIRE_FUSED_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* kernel : {"auto", "sm80"}) {
    SCOPED_TRACE(kernel);
    auto o = ag(1024, 512, 512, 4, DType::bf16);
    o.kernel = kernel;
    o.release = FusedRelease::never;
    o.timeout_s = 0.5;
    o.repeat = 1;
    o.warmup = 0;
    EXPECT_EXIT(
        exit_with_check(o),
        testing::ExitedWithCode(3), "rank 0 waited more than 0.5 s for chunk 3");
  }
}

FusedCheckOptions rs(std::int64_t m, std::int64_t n, std::int64_t k, int p, DType t) {
  FusedCheckOptions o;
  o.kind = workload::OpKind::gemm_rs;
  o.m = m, o.n = n, o.k = k, o.ranks = p, o.dtype = t;
  o.repeat = 2;  // with the warmup: three runs, each compared bit for bit with the first
  return o;
}

// Both GEMM-RS kernels where the GPU has them ("auto" is the sm90 one on an H100/H200): the
// partials stored through the piece slots and counted on the chunk counters, summed by the
// owners after the counter wait, equal cuBLASLt and give the same bits in every run.
TEST(FusedGpu, GemmRsTwiceBitIdenticalAndMatchesCublas) {
  COMPASS_REQUIRE_FUSED_GPU();
  for (const char* kernel : {"auto", "sm80"})
    for (DType t : {DType::bf16, DType::fp16}) {
      auto o = rs(1024, 512, 4 * 256, 4, t);
      o.kernel = kernel;
      expect_passes(o);
      o = rs(1000, 264, 3 * 96, 3, t);  // no tile multiples; chunks not on the 128-row grid
      o.kernel = kernel;
      o.order = {0, 2, 1};
      expect_passes(o);
    }
}

// A chunk counter that never reaches its target (the owner of the last chunk waits for one
// tile more than the ranks store) ends in the ordered sum's timeout error, not a hang; the
// counter it reports is exactly the tiles the four kernels stored into the chunk (2 M tiles
// x N tiles of 256 columns on sm90, 128 on sm80, per rank). In a child process: the trap
// loses the CUDA context.
TEST(FusedGpuDeathTest, GemmRsCounterThatNeverArrivesTimesOut) {
  COMPASS_REQUIRE_FUSED_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* kernel : {"auto", "sm80"}) {
    SCOPED_TRACE(kernel);
    auto o = rs(1024, 512, 4 * 256, 4, DType::bf16);
    o.kernel = kernel;
    o.repeat = 1;
    o.warmup = 0;
    auto chosen = fused_check(o);  // which kernel "auto" is on this GPU
    ASSERT_TRUE(chosen.ok()) << chosen.error().message;
    const bool sm90 = chosen->kernel.rfind("sm90", 0) == 0;
    const int stored = 4 * 2 * (sm90 ? 2 : 4);
    o.release = FusedRelease::never;
    o.timeout_s = 0.5;
    EXPECT_EXIT(
        exit_with_check(o),
        testing::ExitedWithCode(3),
        fmt::format("GEMM-RS ordered sum: rank 3 waited more than 0.5 s for chunk 3 \\(its tile "
                    "counter, flag 3\\): the counter is {}, the sum needs at least {}",
                    stored, stored + 1));
  }
}

}  // namespace
}  // namespace compass::backends::cuda
