// The fused AG-GEMM for sm_90a: CUTLASS 3.x warp-specialised persistent GEMM (TMA loads,
// WGMMA, cooperative consumers, TMA-store epilogue) with our own tile walk (sm90_common.cuh).
// The walk follows the host's tile plan (arrival order of the A pieces, swizzled within a
// piece), and before it hands a tile to the producer warp it waits until the tile's pieces
// are released (acquire on the never-reset flags, then a proxy fence so the TMA loads see the
// rows). Every warp that asks for the tile waits; only the producer's wait matters for
// correctness, the consumers would block on the pipeline anyway.

#include "compass/backends/cuda/device/fused/fused_kernels.hpp"
#include "compass/backends/cuda/device/fused/flag_wait.cuh"
#include "compass/backends/cuda/device/fused/sm90_common.cuh"

#include <cutlass/epilogue/collective/collective_builder.hpp>

namespace compass::backends::cuda::device {

/// The AG-GEMM's walk: plan entry i is tile (m_tile, n_tile), computed once its pieces' flags
/// have reached the iteration's target.
struct AgWalk {
  const AgTile* tiles = nullptr;
  int num_tiles = 0;
  const std::int32_t* waits = nullptr;
  FusedWait wait;

  CUTLASS_DEVICE PlanWork work(int i) const {
    const AgTile t = tiles[i];
    wait_pieces(wait, waits, t.wait_begin, t.wait_count, i);
    return {t.m_tile, t.n_tile};
  }
};

namespace {

using namespace cute;

// One configuration per element type: the shared mainloop and CUTLASS's TMA-store epilogue,
// no C operand.
template <typename Element>
struct AgGemm {
  using C = Sm90Config<Element>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename C::TileShape,
      typename C::ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, typename C::Layout, C::kAlign, Element, typename C::Layout, C::kAlign,
      cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop =
      typename C::template Mainloop<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      PlanSchedulerTag<AgWalk>>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <typename Element>
cudaError_t run_ag(const FusedAgArgs& a, int sm_count, cudaStream_t stream) {
  using Gemm = typename AgGemm<Element>::Gemm;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  typename Gemm::Arguments args;
  set_sm90_operands<Gemm, Element>(args, a.m, a.n, a.k, a.a, a.lda, a.b, a.ldb, sm_count,
                                   AgWalk{a.tiles, a.num_tiles, a.waits, a.wait});
  // Row-major D [m, n]: stride (ldd, 1).
  StrideD sd{};
  get<0>(sd) = a.ldd;
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = sd;
  args.epilogue.ptr_D = static_cast<Element*>(a.d);
  args.epilogue.dD = sd;
  return run_sm90_gemm<Gemm>(args, stream);
}

}  // namespace

bool fused_sm90_built() { return true; }

cudaError_t launch_fused_ag_sm90(const FusedAgArgs& args, int sm_count, cudaStream_t stream) {
  if (!sm90_shape_supported(args.m, args.n, args.k, args.lda, args.ldb, args.ldd, sm_count))
    return cudaErrorNotSupported;
  switch (args.type) {
    case ElemType::bf16: return run_ag<cutlass::bfloat16_t>(args, sm_count, stream);
    case ElemType::f16: return run_ag<cutlass::half_t>(args, sm_count, stream);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace compass::backends::cuda::device
