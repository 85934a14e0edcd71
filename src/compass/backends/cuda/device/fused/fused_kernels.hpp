#pragma once
// The fused GEMM kernels behind plain launch functions, so the host code that drives them is
// compiled by the C++ compiler. The kernels live in their own object libraries with their own
// architecture flags: fused_sm90.cu and fused_sm90_rs.cu (sm_90a: CUTLASS 3.x warp-specialised
// persistent GEMM, TMA + WGMMA) and fused_sm80.cu (sm_80 / sm_86 / sm_90: CUTLASS 2.x
// multistage GEMM).
// Every pointer in these records is a device pointer except FusedWait::fault (host-mapped).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "compass/backends/cuda/device/kernels.hpp"
#include "compass/backends/cuda/fused_abi.hpp"

namespace compass::backends::cuda::device {

/// How a fused AG-GEMM waits for its pieces: piece i is released when *flags[i] reaches
/// `target` (the iteration number; flags are never reset). A null flag means the piece is
/// local. A wait that lasts longer than `timeout_ns` (GPU global timer) records the rank, the
/// piece, the tile and the flag's value in `fault` and traps.
struct FusedWait {
  const std::uint32_t* const* flags = nullptr;
  std::uint32_t target = 0;
  long long timeout_ns = 0;
  FusedFault* fault = nullptr;
  int rank = 0;
};

/// D [m, n] = A [m, k] * B [k, n], all row-major (leading dimensions in elements, multiples of
/// 8), tiles computed in the order of `tiles`, each after its pieces' flags.
struct FusedAgArgs {
  ElemType type = ElemType::bf16;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* d = nullptr;
  std::int64_t ldd = 0;
  const AgTile* tiles = nullptr;
  int num_tiles = 0;
  const std::int32_t* waits = nullptr;
  FusedWait wait;
};

/// The partials of a GEMM-RS: tile t computes rows [row, row + rows) of A [m, k] * B [k, n]
/// and stores them at piece_out[p] + (row - piece_row[p]) * ldd (p = tiles[t].chunk, the
/// piece index: the owner's partial slot for this rank, possibly on a peer GPU), then
/// increments *piece_counter[p] (release: the stores are visible before the count). The
/// num_pieces pieces cover rows [0, m) once.
struct FusedRsArgs {
  ElemType type = ElemType::bf16;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  const RsTile* tiles = nullptr;
  int num_tiles = 0;
  int num_pieces = 0;
  const std::int64_t* piece_row = nullptr;
  void* const* piece_out = nullptr;
  std::int64_t ldd = 0;
  std::uint32_t* const* piece_counter = nullptr;
};

/// The output tile of each kernel; plans must be built with it.
inline constexpr int kSm90TileM = 128;
inline constexpr int kSm90TileN = 256;
inline constexpr int kSm80TileM = 128;
inline constexpr int kSm80TileN = 128;

/// Whether the kernels were compiled in (CUTLASS headers found at build time).
bool fused_sm90_built();
bool fused_sm80_built();

/// Persistent AG-GEMM on sm_90a (bf16 / fp16 in, FP32 accumulate, same type out); one CTA per
/// SM (`sm_count`). cudaErrorNotSupported when not built or the shape is not supported
/// (k, n and leading dimensions must be multiples of 8).
cudaError_t launch_fused_ag_sm90(const FusedAgArgs& args, int sm_count, cudaStream_t stream);
/// The same on sm_80 / sm_86 (and sm_90 without TMA): one CTA per tile, in plan order.
cudaError_t launch_fused_ag_sm80(const FusedAgArgs& args, cudaStream_t stream);
/// GEMM-RS partials into the owners' slots with per-piece counters: persistent on sm_90a (one
/// CTA per SM, `sm_count`; the plan must be built with the sm90 tile), one CTA per tile on
/// sm_80 / sm_86 / sm_90. cudaErrorNotSupported as for the AG-GEMM.
cudaError_t launch_fused_rs_sm90(const FusedRsArgs& args, int sm_count, cudaStream_t stream);
cudaError_t launch_fused_rs_sm80(const FusedRsArgs& args, cudaStream_t stream);

}  // namespace compass::backends::cuda::device
