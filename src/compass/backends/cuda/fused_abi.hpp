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

#if defined(__CUDACC__)
#define COMPASS_FUSED_HD __host__ __device__
#else
#define COMPASS_FUSED_HD
#endif

/// The piece of a GEMM-RS output row and the rows it spans, as the sm90 kernel's epilogue
/// finds it from the pieces' first rows alone (pieces cover [0, m) once, in any order).
struct RsRowPiece {
  std::int32_t piece = -1;  ///< index into the pieces; -1 when no piece starts at or before
  std::int64_t start = 0;   ///< the piece's first row
  std::int64_t end = 0;     ///< one past its last row: the next piece's first row, or m
};

/// The last piece that starts at or before `row`; it ends where the next one starts.
inline COMPASS_FUSED_HD RsRowPiece rs_piece_of_row(const std::int64_t* piece_row, int num_pieces,
                                                   std::int64_t row, std::int64_t m) {
  RsRowPiece out;
  out.start = -1;
  out.end = m;
  for (int p = 0; p < num_pieces; ++p) {
    const std::int64_t r = piece_row[p];
    if (r <= row && r > out.start) {
      out.start = r;
      out.piece = p;
    } else if (r > row && r < out.end) {
      out.end = r;
    }
  }
  return out;
}

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
