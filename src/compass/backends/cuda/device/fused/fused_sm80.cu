// The fused GEMMs for sm_80 / sm_86 (and sm_90 without TMA): a CUTLASS 2.x multistage
// tensor-core GEMM (cp.async, mma.sync) driven by our own kernel body instead of a
// threadblock swizzle. CTA i computes tile i of the host's plan, so the launch order is the
// plan's order (the arrival order of the pieces, swizzled within a piece):
//  - AG-GEMM: the CTA waits for the tile's pieces (acquire on the never-reset flags, with a
//    timeout that traps) before its first A load;
//  - GEMM-RS: the CTA computes rows [row, row + rows) of one piece, the epilogue stores them
//    into the owner's partial slot for this rank, and then one thread increments the piece's
//    counter after a system-scope fence (release).

#include "compass/backends/cuda/device/fused/fused_kernels.hpp"
#include "compass/backends/cuda/device/fused/flag_wait.cuh"

#include <cutlass/cutlass.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/kernel/default_gemm.h>
#include <cutlass/gemm/threadblock/threadblock_swizzle.h>

namespace compass::backends::cuda::device {
namespace {

// One configuration per element type: 128 x 128 x 32 CTA tiles, four 64 x 64 warps,
// 16 x 8 x 16 mma.sync, 3 stages (48 KiB of shared memory).
template <typename Element>
struct Sm80Gemm {
  using Layout = cutlass::layout::RowMajor;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  using OutputOp = cutlass::epilogue::thread::LinearCombination<
      Element, kAlign, float, float, cutlass::epilogue::thread::ScaleType::OnlyAlphaScaling>;
  using Default = cutlass::gemm::kernel::DefaultGemm<
      Element, Layout, kAlign, Element, Layout, kAlign, Element, Layout, float,
      cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, cutlass::gemm::GemmShape<128, 128, 32>,
      cutlass::gemm::GemmShape<64, 64, 32>, cutlass::gemm::GemmShape<16, 8, 16>, OutputOp,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, 3, false,
      cutlass::arch::OpMultiplyAdd>;
  using Kernel = typename Default::GemmKernel;
  using Mma = typename Kernel::Mma;
  using Epilogue = typename Kernel::Epilogue;
  using SharedStorage = typename Kernel::SharedStorage;
  static constexpr int kThreads = Kernel::kThreadCount;
  static_assert(Mma::Shape::kM == kSm80TileM && Mma::Shape::kN == kSm80TileN);
};

// The tile's rows, its output pointer and (GEMM-RS) its counter.
struct TileTarget {
  std::int64_t row = 0;
  int rows = 0;
  int n_tile = 0;
  void* d = nullptr;
  std::uint32_t* counter = nullptr;
};

template <typename Element, bool kRs>
__global__ void __launch_bounds__(Sm80Gemm<Element>::kThreads)
    fused_sm80_kernel(FusedAgArgs ag, FusedRsArgs rs) {
  using G = Sm80Gemm<Element>;
  using Mma = typename G::Mma;
  using Epilogue = typename G::Epilogue;
  extern __shared__ __align__(16) unsigned char smem[];
  auto& shared = *reinterpret_cast<typename G::SharedStorage*>(smem);
  const int tile = static_cast<int>(blockIdx.x);
  const int thread_idx = static_cast<int>(threadIdx.x);
  const int warp_idx = cutlass::canonical_warp_idx_sync();
  const int lane_idx = thread_idx % 32;

  TileTarget t;
  const void* a_base;
  const void* b_base;
  std::int64_t lda, ldb, ldd, n, k;
  if constexpr (kRs) {
    const RsTile rt = rs.tiles[tile];
    t.row = rt.row;
    t.rows = rt.rows;
    t.n_tile = rt.n_tile;
    t.d = static_cast<Element*>(rs.piece_out[rt.chunk]) + (rt.row - rs.piece_row[rt.chunk]) * rs.ldd;
    t.counter = rs.piece_counter[rt.chunk];
    a_base = rs.a, b_base = rs.b, lda = rs.lda, ldb = rs.ldb, ldd = rs.ldd, n = rs.n, k = rs.k;
  } else {
    const AgTile at = ag.tiles[tile];
    wait_pieces(ag.wait, ag.waits, at.wait_begin, at.wait_count, tile);
    t.row = static_cast<std::int64_t>(at.m_tile) * Mma::Shape::kM;
    t.rows = static_cast<int>(ag.m - t.row < Mma::Shape::kM ? ag.m - t.row : Mma::Shape::kM);
    t.n_tile = at.n_tile;
    t.d = static_cast<Element*>(ag.d) + t.row * ag.ldd;
    a_base = ag.a, b_base = ag.b, lda = ag.lda, ldb = ag.ldb, ldd = ag.ldd, n = ag.n, k = ag.k;
  }
  const Element* a = static_cast<const Element*>(a_base) + t.row * lda;
  const Element* b = static_cast<const Element*>(b_base);
  const int col0 = t.n_tile * Mma::Shape::kN;

  typename Mma::IteratorA::Params params_a(cutlass::layout::RowMajor(static_cast<int>(lda)));
  typename Mma::IteratorB::Params params_b(cutlass::layout::RowMajor(static_cast<int>(ldb)));
  typename Mma::IteratorA iterator_a(params_a, const_cast<Element*>(a),
                                     {t.rows, static_cast<int>(k)}, thread_idx, {0, 0});
  typename Mma::IteratorB iterator_b(params_b, const_cast<Element*>(b),
                                     {static_cast<int>(k), static_cast<int>(n)}, thread_idx,
                                     {0, col0});
  Mma mma(shared.main_loop, thread_idx, warp_idx, lane_idx);
  typename Mma::FragmentC accumulators;
  accumulators.clear();
  const int k_iterations = static_cast<int>((k + Mma::Shape::kK - 1) / Mma::Shape::kK);
  mma(k_iterations, accumulators, iterator_a, iterator_b, accumulators);

  typename G::OutputOp output_op(typename G::OutputOp::Params(1.0f));
  typename Epilogue::OutputTileIterator::Params params_d(
      cutlass::layout::RowMajor(static_cast<int>(ldd)));
  typename Epilogue::OutputTileIterator iterator_d(params_d, static_cast<Element*>(t.d),
                                                   {t.rows, static_cast<int>(n)}, thread_idx,
                                                   {0, col0});
  Epilogue epilogue(shared.epilogue, thread_idx, warp_idx, lane_idx);
  epilogue(output_op, iterator_d, accumulators);

  if constexpr (kRs) {
    // Release: every thread's stores are visible (system scope: the slot may be on a peer
    // GPU) before the one increment that tells the owner this tile is there.
    __threadfence_system();
    __syncthreads();
    if (thread_idx == 0) atomicAdd_system(t.counter, 1u);
  }
}

template <typename Element, bool kRs>
cudaError_t launch(const FusedAgArgs& ag, const FusedRsArgs& rs, int tiles, cudaStream_t stream) {
  using G = Sm80Gemm<Element>;
  if (tiles < 1) return cudaSuccess;
  const int smem = static_cast<int>(sizeof(typename G::SharedStorage));
  auto kernel = fused_sm80_kernel<Element, kRs>;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
  }
  kernel<<<tiles, G::kThreads, smem, stream>>>(ag, rs);
  return cudaGetLastError();
}

bool aligned(std::int64_t v) { return v % 8 == 0; }

}  // namespace

bool fused_sm80_built() { return true; }

cudaError_t launch_fused_ag_sm80(const FusedAgArgs& args, cudaStream_t stream) {
  if (!aligned(args.k) || !aligned(args.n) || !aligned(args.lda) || !aligned(args.ldb) ||
      !aligned(args.ldd))
    return cudaErrorNotSupported;
  switch (args.type) {
    case ElemType::bf16: return launch<cutlass::bfloat16_t, false>(args, {}, args.num_tiles, stream);
    case ElemType::f16: return launch<cutlass::half_t, false>(args, {}, args.num_tiles, stream);
    default: return cudaErrorNotSupported;
  }
}

cudaError_t launch_fused_rs_sm80(const FusedRsArgs& args, cudaStream_t stream) {
  if (!aligned(args.k) || !aligned(args.n) || !aligned(args.lda) || !aligned(args.ldb) ||
      !aligned(args.ldd))
    return cudaErrorNotSupported;
  switch (args.type) {
    case ElemType::bf16: return launch<cutlass::bfloat16_t, true>({}, args, args.num_tiles, stream);
    case ElemType::f16: return launch<cutlass::half_t, true>({}, args, args.num_tiles, stream);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace compass::backends::cuda::device
