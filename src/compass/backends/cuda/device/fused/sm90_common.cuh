#pragma once
// What the sm_90a fused GEMMs share: a persistent tile scheduler that walks the host's tile
// plan instead of CUTLASS's raster order, the CUTLASS 3.x mainloop configuration (TMA loads,
// WGMMA, two cooperative consumer warp groups, 128 x 256 x 64 tiles) and the launch of a
// GemmUniversal kernel built from them.
//
// PlanScheduler<Walk> replaces PersistentTileSchedulerSm90's tile walk (its grid shape,
// epilogue and reduction hooks are the base's: whole tiles, no split K): CTA i takes tiles
// i, i + grid, ... of the plan, and `Walk::work(i)` turns plan entry i into the tile's
// coordinates (and may wait there: the AG-GEMM waits for the tile's pieces). The producer
// warp and the consumer warps each walk the plan.

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include "compass/backends/cuda/device/fused/fused_kernels.hpp"

namespace compass::backends::cuda::device {

/// The tag that selects PlanScheduler<Walk> in CUTLASS's scheduler selector.
template <class Walk>
struct PlanSchedulerTag {};

/// The coordinates of one work tile: the M index the mainloop and epilogue receive (an M tile,
/// or for the row-offset mainloop a first row) and the N tile.
struct PlanWork {
  std::int32_t m = 0;
  std::int32_t n = 0;
};

template <class Walk>
class PlanScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using BaseArguments = Base::Arguments;
  using BaseParams = Base::Params;
  struct Arguments : BaseArguments {
    Walk walk;
  };
  struct Params : BaseParams {
    Walk walk;
  };
  static CUTLASS_HOST_DEVICE BaseParams const& base_params(Params const& p) { return p; }
  using WorkTileInfo = Base::WorkTileInfo;

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem, TileShape tile, ClusterShape cluster,
                                        cutlass::KernelHardwareInfo const& hw,
                                        Arguments const& args, void* workspace = nullptr,
                                        const uint32_t epilogue_subtile = 1,
                                        uint32_t ktile_start_alignment_count = 1u) {
    const BaseArguments& base_args = args;
    Params p;
    BaseParams& base = p;
    base = Base::to_underlying_arguments(problem, tile, cluster, hw, base_args, workspace,
                                         epilogue_subtile, ktile_start_alignment_count);
    p.walk = args.walk;
    return p;
  }

  CUTLASS_DEVICE explicit PlanScheduler(Params const& params)
      : Base(base_params(params)), walk_(params.walk) {
#if defined(__CUDA_ARCH__)
    linear_ = blockIdx.x + static_cast<std::uint64_t>(blockIdx.y) * gridDim.x +
              static_cast<std::uint64_t>(blockIdx.z) * gridDim.x * gridDim.y;
    stride_ = static_cast<std::uint64_t>(gridDim.x) * gridDim.y * gridDim.z;
#endif
  }

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return get_current_work();
  }

  CUTLASS_DEVICE WorkTileInfo get_current_work() const {
    if (linear_ >= static_cast<std::uint64_t>(walk_.num_tiles)) return WorkTileInfo::invalid_work_tile();
    const PlanWork w = walk_.work(static_cast<int>(linear_));
    return {w.m, w.n, 0, true};
  }

  CUTLASS_DEVICE void advance_to_next_work(uint32_t advance_count = 1) {
    linear_ += stride_ * advance_count;
  }

  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo&, uint32_t advance_count = 1) const {
    return linear_ + stride_ * advance_count >= static_cast<std::uint64_t>(walk_.num_tiles);
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }

  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo info, Pipeline&, PipelineState) {
    return fetch_next_work(info);
  }

 private:
  Walk walk_;
  std::uint64_t linear_ = 0;
  std::uint64_t stride_ = 1;
};

}  // namespace compass::backends::cuda::device

namespace cutlass::gemm::kernel::detail {
template <class Walk, class ArchTag, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<compass::backends::cuda::device::PlanSchedulerTag<Walk>, ArchTag,
                             TileShape, ClusterShape, Stages> {
  using Scheduler = compass::backends::cuda::device::PlanScheduler<Walk>;
};
}  // namespace cutlass::gemm::kernel::detail

namespace compass::backends::cuda::device {

/// The one sm_90a configuration: 128 x 256 x 64 tiles, one CTA per cluster, row-major A, B
/// and D, FP32 accumulate; the mainloop leaves `EpilogueSmemBytes` of shared memory to the
/// epilogue.
template <typename Element>
struct Sm90Config {
  using Layout = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(Element);
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  static_assert(cute::size<0>(TileShape{}) == kSm90TileM && cute::size<1>(TileShape{}) == kSm90TileN);

  template <int EpilogueSmemBytes>
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, Layout, kAlign, Element,
      Layout, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<EpilogueSmemBytes>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
};

/// Fills a GemmUniversal's arguments common to both kernels: the problem, A [m, k] and B [k, n]
/// row-major (leading dimensions lda, ldb), the SMs and the scheduler's walk.
template <class Gemm, class Element, class Walk>
void set_sm90_operands(typename Gemm::Arguments& args, std::int64_t m, std::int64_t n,
                       std::int64_t k, const void* a, std::int64_t lda, const void* b,
                       std::int64_t ldb, int sm_count, const Walk& walk) {
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  // Row-major A [m, k]: stride (lda, 1); row-major B [k, n] seen as (n, k): stride (1, ldb).
  // (The batch strides stay 0: one batch.)
  StrideA sa{};
  cute::get<0>(sa) = lda;
  StrideB sb{};
  cute::get<1>(sb) = ldb;
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = cute::make_shape(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1);
  args.mainloop.ptr_A = static_cast<const Element*>(a);
  args.mainloop.dA = sa;
  args.mainloop.ptr_B = static_cast<const Element*>(b);
  args.mainloop.dB = sb;
  args.hw_info.device_id = 0;
  args.hw_info.sm_count = sm_count;
  args.scheduler.walk = walk;
}

/// Initialises and launches a GemmUniversal that needs no workspace.
template <class Gemm>
cudaError_t run_sm90_gemm(const typename Gemm::Arguments& args, cudaStream_t stream) {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorNotSupported;
  if (Gemm::get_workspace_size(args) != 0) return cudaErrorNotSupported;
  if (gemm.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return cudaErrorLaunchFailure;
  if (gemm.run(stream) != cutlass::Status::kSuccess) {
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? cudaErrorLaunchFailure : e;
  }
  return cudaGetLastError();
}

/// The shape checks of both kernels: N, K and the leading dimensions multiples of 8 (16-byte
/// rows for TMA), M below 2^31 (tile coordinates are 32-bit), at least one SM.
inline bool sm90_shape_supported(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                                 std::int64_t ldb, std::int64_t ldd, int sm_count) {
  return k % 8 == 0 && n % 8 == 0 && lda % 8 == 0 && ldb % 8 == 0 && ldd % 8 == 0 &&
         m < (std::int64_t{1} << 31) && sm_count >= 1;
}

}  // namespace compass::backends::cuda::device
