// The fused GEMM-RS for sm_90a: CUTLASS 3.x warp-specialised persistent GEMM (TMA loads,
// WGMMA, cooperative consumers) walking the host's GEMM-RS tile plan (pieces in compute
// order: the chunk a peer needs first, first; each piece tiled on its own), whose epilogue
// stores every tile straight into the owner's partial slot for this rank (possibly on a peer
// GPU) and then releases the piece's counter.
//
// A piece starts at any row, so its tiles do not sit on the M-tile grid: the walk hands the
// tile's first row as its M coordinate, and the mainloop's view of A is re-indexed by rows
// (RowOffsetMainloop) so the TMA loads start there. Rows past the piece's end (up to the
// tile's 128) are loaded and multiplied but never stored; rows past M are zero-filled by TMA.
// The epilogue (RsStoreEpilogue, run by the 256 consumer threads) writes its fragments with
// plain stores, then the consumers meet at a named barrier and one thread fences at system
// scope and increments the counter with a release reduction: every store of the tile is
// visible before the count that tells the owner it is there.

#include "compass/backends/cuda/device/fused/fused_kernels.hpp"
#include "compass/backends/cuda/device/fused/sm90_common.cuh"

#include <cutlass/arch/barrier.h>
#include <cutlass/epilogue/collective/default_epilogue.hpp>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/numeric_conversion.h>

namespace compass::backends::cuda::device {

/// The GEMM-RS walk: plan entry i is rows [row, row + rows) of one piece and N tile n_tile;
/// its M coordinate is the first row.
struct RsWalk {
  const RsTile* tiles = nullptr;
  int num_tiles = 0;

  CUTLASS_DEVICE PlanWork work(int i) const {
    const RsTile t = tiles[i];
    return {static_cast<std::int32_t>(t.row), t.n_tile};
  }
};

namespace {

using namespace cute;

/// The CUTLASS TMA mainloop with mode 2 of its A view indexing rows instead of M tiles: the
/// tile at M coordinate r loads rows [r, r + 128).
template <class Base>
struct RowOffsetMainloop : Base {
  template <class ProblemShapeMNKL>
  CUTLASS_DEVICE auto load_init(ProblemShapeMNKL const& problem,
                                typename Base::Params const& params) const {
    auto inputs = Base::load_init(problem, params);
    auto a = get<0>(inputs);  // (BLK_M, BLK_K, m tiles, k tiles, l)
    auto l = a.layout();
    // Row r of the M mode has the coordinate of row r of the tile's first mode.
    auto rows = make_layout(get<0>(problem), stride<0>(l));
    auto by_row = make_layout(layout<0>(l), layout<1>(l), rows, layout<3>(l), layout<4>(l));
    return cute::make_tuple(make_tensor(a.data(), by_row), get<1>(inputs));
  }
};

/// Where the tiles go: per piece (in compute order) its first row, its slot (the owner's
/// partial for this rank, row pitch ldd) and its counter.
struct RsStores {
  const std::int64_t* piece_row = nullptr;
  void* const* piece_out = nullptr;
  std::uint32_t* const* piece_counter = nullptr;
  int num_pieces = 0;
  std::int64_t m = 0, n = 0, ldd = 0;
};

/// An operator-style epilogue (the interface of CUTLASS's DefaultEpilogue, run through its
/// sm90 warp-specialised adapter) that stores the tile into its piece's slot and releases the
/// piece's counter.
template <typename Element>
class RsStoreEpilogue {
 public:
  using ElementC = Element;
  using ElementD = Element;
  using ElementOutput = Element;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using StrideC = Stride<std::int64_t, _1, std::int64_t>;
  using StrideD = StrideC;
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<Element, 1, float, float>;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  struct SharedStorage {};
  using TensorStorage = SharedStorage;
  struct Arguments {
    RsStores stores;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*,
                                              cudaStream_t, cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const& args) {
    return args.stores.num_pieces >= 1;
  }

  CUTLASS_HOST_DEVICE explicit RsStoreEpilogue(Params const& params,
                                               SharedStorage const& = SharedStorage())
      : params_(params) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine,
            class FrgLayout, class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL, BlockShapeMNK blk_shape,
                                 BlockCoordMNKL blk_coord,
                                 Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    constexpr int kThreads = CUTE_STATIC_V(size(TiledMma{}));
    constexpr int kTileM = CUTE_STATIC_V(size<0>(BlockShapeMNK{}));
    const RsStores& s = params_.stores;
    const std::int64_t row = get<0>(blk_coord);
    const int n_tile = static_cast<int>(get<1>(blk_coord));

    // The tile's piece (tiles never span two) and where the piece ends.
    const RsRowPiece rp = rs_piece_of_row(s.piece_row, s.num_pieces, row, s.m);
    const int piece = rp.piece < 0 ? 0 : rp.piece;
    const std::int64_t start = rp.piece < 0 ? row : rp.start;
    const int rows = static_cast<int>(rp.end - row < kTileM ? rp.end - row : kTileM);

    // The tile in the slot: rows [0, rows) of piece-relative row (row - start).
    Element* d = static_cast<Element*>(s.piece_out[piece]) + (row - start) * s.ldd;
    const auto bound = make_shape(rows, static_cast<int>(s.n));
    Tensor m_d = make_tensor(make_gmem_ptr(d), bound, make_stride(s.ldd, _1{}));
    Tensor g_d = local_tile(m_d, take<0, 2>(blk_shape), make_coord(0, n_tile));
    Tensor c_d = local_tile(make_identity_tensor(bound), take<0, 2>(blk_shape), make_coord(0, n_tile));
    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor t_gd = thr_mma.partition_C(g_d);
    Tensor t_cd = thr_mma.partition_C(c_d);
    static_assert(decltype(size(accumulators))::value % 2 == 0);
    cutlass::NumericConverter<Element, float> convert;
    // Neighbouring accumulators are neighbouring columns of a row in the WGMMA layout: store
    // them as one 32-bit word where they are adjacent and aligned, else one by one.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); i += 2) {
      const bool in0 = elem_less(t_cd(i), bound);
      const bool in1 = elem_less(t_cd(i + 1), bound);
      Element* p0 = &t_gd(i);
      Element* p1 = &t_gd(i + 1);
      const Element v0 = convert(accumulators(i));
      const Element v1 = convert(accumulators(i + 1));
      if (in0 && in1 && p1 == p0 + 1 && (reinterpret_cast<std::uintptr_t>(p0) & 3) == 0) {
        const std::uint32_t word = static_cast<std::uint32_t>(v0.raw()) |
                                   (static_cast<std::uint32_t>(v1.raw()) << 16);
        *reinterpret_cast<std::uint32_t*>(p0) = word;
      } else {
        if (in0) *p0 = v0;
        if (in1) *p1 = v1;
      }
    }

    // Release: every consumer thread's stores are done before one thread counts the tile
    // (system scope: the slot and the counter may be on a peer GPU).
    cutlass::arch::NamedBarrier::arrive_and_wait(kThreads, 0);
    if (thread_idx == 0) {
      __threadfence_system();
      asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(s.piece_counter[piece]), "r"(1u)
                   : "memory");
    }
  }

 private:
  Params params_;
};

template <typename Element>
struct RsGemm {
  using C = Sm90Config<Element>;
  using Epilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
      RsStoreEpilogue<Element>>;
  using Mainloop = RowOffsetMainloop<typename C::template Mainloop<static_cast<int>(
      sizeof(typename Epilogue::TensorStorage) + sizeof(typename Epilogue::PipelineStorage))>>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      PlanSchedulerTag<RsWalk>>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <typename Element>
cudaError_t run_rs(const FusedRsArgs& a, int sm_count, cudaStream_t stream) {
  using Gemm = typename RsGemm<Element>::Gemm;
  typename Gemm::Arguments args;
  set_sm90_operands<Gemm, Element>(args, a.m, a.n, a.k, a.a, a.lda, a.b, a.ldb, sm_count,
                                   RsWalk{a.tiles, a.num_tiles});
  args.epilogue.stores = RsStores{a.piece_row, a.piece_out, a.piece_counter, a.num_pieces,
                                  a.m, a.n, a.ldd};
  return run_sm90_gemm<Gemm>(args, stream);
}

}  // namespace

cudaError_t launch_fused_rs_sm90(const FusedRsArgs& args, int sm_count, cudaStream_t stream) {
  // CUTLASS's epilogue adapter computes 128 x (the M coordinate) in 32 bits, and here the M
  // coordinate is a row: M below 2^24.
  if (!sm90_shape_supported(args.m, args.n, args.k, args.lda, args.ldb, args.ldd, sm_count) ||
      args.m >= (std::int64_t{1} << 24) || args.num_pieces < 1)
    return cudaErrorNotSupported;
  if (args.num_tiles < 1) return cudaSuccess;
  switch (args.type) {
    case ElemType::bf16: return run_rs<cutlass::bfloat16_t>(args, sm_count, stream);
    case ElemType::f16: return run_rs<cutlass::half_t>(args, sm_count, stream);
    default: return cudaErrorNotSupported;
  }
}

}  // namespace compass::backends::cuda::device
