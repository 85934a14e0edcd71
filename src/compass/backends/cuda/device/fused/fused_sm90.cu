// The fused AG-GEMM for sm_90a: CUTLASS 3.x warp-specialised persistent GEMM (TMA loads,
// WGMMA, cooperative consumers, TMA-store epilogue) with our own tile scheduler. The
// scheduler walks the host's tile plan (arrival order of the A pieces, swizzled within a
// piece) instead of the raster order, and before it hands a tile to the producer warp it
// waits until the tile's pieces are released (acquire on the never-reset flags, then a proxy
// fence so the TMA loads see the rows). Every warp that asks for the tile waits; only the
// producer's wait matters for correctness, the consumers would block on the pipeline anyway.

#include "compass/backends/cuda/device/fused/fused_kernels.hpp"
#include "compass/backends/cuda/device/fused/flag_wait.cuh"

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

namespace compass::backends::cuda::device {

/// The tag that selects FusedAgScheduler in CUTLASS's scheduler selector.
struct FusedAgSchedulerTag {};

/// PersistentTileSchedulerSm90 with the tile walk replaced by the plan's (the grid shape,
/// epilogue and reduction hooks are the base's: whole tiles, no split K).
class FusedAgScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  struct Plan {
    const AgTile* tiles = nullptr;
    int num_tiles = 0;
    const std::int32_t* waits = nullptr;
    FusedWait wait;
  };
  using BaseArguments = Base::Arguments;
  using BaseParams = Base::Params;
  struct Arguments : BaseArguments {
    Plan plan;
  };
  struct Params : BaseParams {
    Plan plan;
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
    p.plan = args.plan;
    return p;
  }

  CUTLASS_DEVICE explicit FusedAgScheduler(Params const& params)
      : Base(base_params(params)), plan_(params.plan) {
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
    if (linear_ >= static_cast<std::uint64_t>(plan_.num_tiles)) return WorkTileInfo::invalid_work_tile();
    const AgTile t = plan_.tiles[linear_];
    wait_pieces(plan_.wait, plan_.waits, t.wait_begin, t.wait_count, static_cast<int>(linear_));
    return {t.m_tile, t.n_tile, 0, true};
  }

  CUTLASS_DEVICE void advance_to_next_work(uint32_t advance_count = 1) {
    linear_ += stride_ * advance_count;
  }

  CUTLASS_DEVICE bool is_last_tile(WorkTileInfo&, uint32_t advance_count = 1) const {
    return linear_ + stride_ * advance_count >= static_cast<std::uint64_t>(plan_.num_tiles);
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
  Plan plan_;
  std::uint64_t linear_ = 0;
  std::uint64_t stride_ = 1;
};

}  // namespace compass::backends::cuda::device

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<compass::backends::cuda::device::FusedAgSchedulerTag, ArchTag,
                             TileShape, ClusterShape, Stages> {
  using Scheduler = compass::backends::cuda::device::FusedAgScheduler;
};
}  // namespace cutlass::gemm::kernel::detail

namespace compass::backends::cuda::device {
namespace {

using namespace cute;

// One configuration per element type: 128 x 256 x 64 tiles, one CTA per cluster, two
// consumer warp groups (cooperative), FP32 accumulate, no C operand.
template <typename Element>
struct AgGemm {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::RowMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(Element);
  using TileShape = Shape<_128, _256, _64>;
  using ClusterShape = Shape<_1, _1, _1>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, kAlign,
      Element, LayoutD, kAlign, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlign, Element,
      LayoutB, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      FusedAgSchedulerTag>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

static_assert(AgGemm<cutlass::bfloat16_t>::TileShape{} == Shape<Int<kSm90TileM>, Int<kSm90TileN>, _64>{});

template <typename Element>
cudaError_t run_ag(const FusedAgArgs& a, int sm_count, cudaStream_t stream) {
  using G = AgGemm<Element>;
  using Gemm = typename G::Gemm;
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideC = typename Gemm::GemmKernel::StrideC;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  const int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
  // Row-major A [m, k]: stride (lda, 1); row-major B [k, n] seen as (n, k): stride (1, ldb);
  // row-major D [m, n]: stride (ldd, 1).
  // (The batch strides stay 0: one batch.)
  StrideA sa{};
  get<0>(sa) = a.lda;
  StrideB sb{};
  get<1>(sb) = a.ldb;
  StrideD sd{};
  get<0>(sd) = a.ldd;
  StrideC sc = sd;

  typename Gemm::Arguments args;
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = make_shape(m, n, k, 1);
  args.mainloop.ptr_A = static_cast<const Element*>(a.a);
  args.mainloop.dA = sa;
  args.mainloop.ptr_B = static_cast<const Element*>(a.b);
  args.mainloop.dB = sb;
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = sc;
  args.epilogue.ptr_D = static_cast<Element*>(a.d);
  args.epilogue.dD = sd;
  args.hw_info.device_id = 0;
  args.hw_info.sm_count = sm_count;
  args.scheduler.plan = {a.tiles, a.num_tiles, a.waits, a.wait};

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

}  // namespace

bool fused_sm90_built() { return true; }

cudaError_t launch_fused_ag_sm90(const FusedAgArgs& args, int sm_count, cudaStream_t stream) {
  if (args.k % 8 != 0 || args.n % 8 != 0 || args.lda % 8 != 0 || args.ldb % 8 != 0 ||
      args.ldd % 8 != 0 || sm_count < 1)
    return cudaErrorNotSupported;
  switch (args.type) {
    case ElemType::bf16: return run_ag<cutlass::bfloat16_t>(args, sm_count, stream);
    case ElemType::f16: return run_ag<cutlass::half_t>(args, sm_count, stream);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace compass::backends::cuda::device
