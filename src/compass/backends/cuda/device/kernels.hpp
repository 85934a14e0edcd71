#pragma once
// The few CUDA kernels of the backend, behind plain launch functions so the host code is
// compiled by the C++ compiler. Each returns the launch status (cudaGetLastError).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "compass/backends/cuda/fused_abi.hpp"

namespace compass::backends::cuda::device {

/// Element types the kernels handle.
enum class ElemType : int { f32 = 0, f16 = 1, bf16 = 2 };

/// p[i] = uniform value in [-1, 1) from a counter hash of (seed, i): reproducible, and the
/// same on every GPU.
cudaError_t launch_fill_uniform(void* p, std::int64_t n, ElemType t, std::uint64_t seed,
                                cudaStream_t stream);

/// dst[r, c] += src[r, c] over a rows x cols rectangle; ld_* are row strides in elements.
/// The sum is formed in FP32 and rounded once to the element type.
cudaError_t launch_add_2d(void* dst, std::int64_t ld_dst, const void* src, std::int64_t ld_src,
                          std::int64_t rows, std::int64_t cols, ElemType t, cudaStream_t stream);

/// dst[r, c] = parts[0][r, c] + parts[1][r, c] + ... + parts[count-1][r, c], summed in FP32 in
/// exactly this order and rounded once (the deterministic GEMM-RS reduction: the same bits
/// whatever order the partials arrived in). `parts` is a host array of up to 64 device
/// pointers with row stride ld_part; cudaErrorInvalidValue for more.
cudaError_t launch_sum_ordered_2d(void* dst, std::int64_t ld_dst, const void* const* parts,
                                  int count, std::int64_t ld_part, std::int64_t rows,
                                  std::int64_t cols, ElemType t, cudaStream_t stream);

/// The wait before a GEMM-RS owner's ordered sum: until *counter (the chunk's tile counter,
/// possibly incremented from peer GPUs) reaches `target` (wrap-safe >=, acquire at system
/// scope), polled against the GPU global timer. After `timeout_ns` the first waiting thread
/// writes rank, flag = chunk, the counter's value and the target into host-mapped `fault`
/// and traps.
struct CounterWait {
  const std::uint32_t* counter = nullptr;
  std::uint32_t target = 0;
  long long timeout_ns = 0;
  FusedFault* fault = nullptr;
  int rank = 0;
  int chunk = 0;
};

/// launch_sum_ordered_2d after `wait` (every thread block waits before it reads a part).
cudaError_t launch_sum_ordered_wait_2d(void* dst, std::int64_t ld_dst, const void* const* parts,
                                       int count, std::int64_t ld_part, std::int64_t rows,
                                       std::int64_t cols, ElemType t, const CounterWait& wait,
                                       cudaStream_t stream);

/// out[r, c] = float(src[r, c]) for a rows x cols rectangle into a dense rows x cols array.
cudaError_t launch_to_float_2d(const void* src, std::int64_t ld_src, std::int64_t rows,
                               std::int64_t cols, ElemType t, float* out, cudaStream_t stream);

/// An empty kernel (launch-overhead measurement).
cudaError_t launch_empty(cudaStream_t stream);

/// An SM-driven copy of `bytes` (multiple of 16) from src to dst by `blocks` thread blocks,
/// repeated `passes` times: stands in for NCCL-style copy kernels in interference tests.
cudaError_t launch_sm_copy(void* dst, const void* src, std::int64_t bytes, int blocks, int passes,
                           cudaStream_t stream);

/// Adds to *count (device memory) the number of 32-bit words in which a and b differ
/// (bytes / 4 words compared; a trailing partial word is ignored).
cudaError_t launch_count_differences(const void* a, const void* b, std::int64_t bytes,
                                     unsigned long long* count, cudaStream_t stream);

}  // namespace compass::backends::cuda::device
