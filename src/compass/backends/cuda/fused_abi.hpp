#pragma once
// The plain-data records the host hands the fused GEMM kernels. No includes beyond <cstdint>:
// this header is read by both the C++ compiler (planning, tests) and nvcc (the kernels).

#include <cstdint>

namespace compass::backends::cuda {

/// One output tile of a fused AG-GEMM in the order the kernel computes it. The tile covers
/// rows [m_tile * tile_m, ...) and columns [n_tile * tile_n, ...) of the output; before its A
/// rows are loaded the kernel waits for flags waits[wait_begin .. wait_begin + wait_count).
struct AgTile {
  std::int32_t m_tile = 0;
  std::int32_t n_tile = 0;
  std::int32_t wait_begin = 0;
  std::int32_t wait_count = 0;
};

/// One output tile of a fused GEMM-RS: rows [row, row + rows) (inside one chunk) and columns
/// [n_tile * tile_n, ...). The epilogue stores it into the owner's partial slot of `chunk` and
/// then increments that chunk's counter.
struct RsTile {
  std::int64_t row = 0;
  std::int32_t rows = 0;
  std::int32_t n_tile = 0;
  std::int32_t chunk = 0;
  std::int32_t pad = 0;
};

/// Why a fused kernel stopped: written by the kernel into host-mapped memory just before it
/// traps, so the host can still read it after the CUDA context is lost.
struct FusedFault {
  std::uint32_t code = 0;      ///< 0 none, 1 a flag wait timed out
  std::int32_t rank = -1;      ///< the rank whose kernel waited
  std::int32_t flag = -1;      ///< index of the flag (AG: piece; RS: chunk counter)
  std::int32_t tile = -1;      ///< index of the tile in the kernel's order
  std::uint32_t observed = 0;  ///< the flag's value when the wait gave up
  std::uint32_t wanted = 0;    ///< the value it waited for (at least)
};

inline constexpr std::uint32_t kFaultNone = 0;
inline constexpr std::uint32_t kFaultFlagTimeout = 1;

}  // namespace compass::backends::cuda
