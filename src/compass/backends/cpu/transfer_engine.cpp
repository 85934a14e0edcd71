#include "compass/backends/cpu/transfer_engine.hpp"

#include <cstring>

namespace compass::backends::cpu {

void copy_block(const float* src, std::int64_t src_ld, float* dst, std::int64_t dst_ld,
                std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if (src_ld == cols && dst_ld == cols) {
    std::memcpy(dst, src, static_cast<std::size_t>(rows * cols) * sizeof(float));
    return;
  }
  for (std::int64_t i = 0; i < rows; ++i)
    std::memcpy(dst + i * dst_ld, src + i * src_ld, static_cast<std::size_t>(cols) * sizeof(float));
}

void MemcpyTransferEngine::transfer(const TransferRequest& r, std::stop_token /*stop*/) {
  // A memcpy is short and cannot be interrupted; the executor checks for abort between tasks.
  copy_block(r.src, r.src_ld, r.dst, r.dst_ld, r.rows, r.cols);
}

}  // namespace compass::backends::cpu
