// Small CUDA kernels: initialisation, reduction adds, conversion for checks, and the
// launch-overhead and SM-copy probes of calibration.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "compass/backends/cuda/device/kernels.hpp"
#include "compass/backends/cuda/device/fused/flag_wait.cuh"

namespace compass::backends::cuda::device {
namespace {

constexpr int kThreads = 256;

__device__ inline float load_as_float(const void* p, std::int64_t i, ElemType t) {
  switch (t) {
    case ElemType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case ElemType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ inline void store_float(void* p, std::int64_t i, ElemType t, float v) {
  switch (t) {
    case ElemType::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case ElemType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// SplitMix64: a good enough counter-based hash for test data.
__device__ inline std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(void* p, std::int64_t n, ElemType t, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::uint64_t h = mix(seed * 0x100000001B3ull + static_cast<std::uint64_t>(i));
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    store_float(p, i, t, 2.0f * u - 1.0f);
  }
}

__global__ void add_2d_kernel(void* dst, std::int64_t ld_dst, const void* src, std::int64_t ld_src,
                              std::int64_t rows, std::int64_t cols, ElemType t) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols, c = i % cols;
    const std::int64_t di = r * ld_dst + c, si = r * ld_src + c;
    store_float(dst, di, t, load_as_float(dst, di, t) + load_as_float(src, si, t));
  }
}

// Up to this many partials per ordered sum (the kernel keeps their pointers in registers).
constexpr int kMaxOrderedParts = 64;

struct PartPointers {
  const void* p[kMaxOrderedParts];
};

// Thread 0 of the block polls the counter; the block goes on once it has reached the target.
__device__ void wait_counter(const CounterWait& w) {
  if (threadIdx.x == 0) {
    std::uint32_t v = load_acquire_sys(w.counter);
    const unsigned long long start = global_timer_ns();
    while (!flag_reached(v, w.target)) {
      if (global_timer_ns() - start > static_cast<unsigned long long>(w.timeout_ns))
        trap_flag_timeout(w.fault, w.rank, w.chunk, /*tile=*/-1, v, w.target);
      __nanosleep(256);
      v = load_acquire_sys(w.counter);
    }
  }
  __syncthreads();
}

__global__ void sum_ordered_2d_kernel(void* dst, std::int64_t ld_dst, PartPointers parts,
                                      int count, std::int64_t ld_part, std::int64_t rows,
                                      std::int64_t cols, ElemType t, CounterWait wait) {
  if (wait.counter != nullptr) wait_counter(wait);
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols, c = i % cols;
    float acc = 0.0f;
    for (int q = 0; q < count; ++q) acc += load_as_float(parts.p[q], r * ld_part + c, t);
    store_float(dst, r * ld_dst + c, t, acc);
  }
}

__global__ void to_float_2d_kernel(const void* src, std::int64_t ld_src, std::int64_t rows,
                                   std::int64_t cols, ElemType t, float* out) {
  const std::int64_t n = rows * cols;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / cols, c = i % cols;
    out[i] = load_as_float(src, r * ld_src + c, t);
  }
}

__global__ void count_differences_kernel(const unsigned int* a, const unsigned int* b,
                                         std::int64_t n, unsigned long long* count) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    local += a[i] != b[i] ? 1 : 0;
  }
  if (local != 0) atomicAdd(count, local);
}

__global__ void empty_kernel() {}

__global__ void sm_copy_kernel(int4* dst, const int4* src, std::int64_t n, int passes) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (int pass = 0; pass < passes; ++pass) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += stride) {
      dst[i] = src[i];
    }
  }
}

unsigned grid_for(std::int64_t n) {
  const std::int64_t blocks = (n + kThreads - 1) / kThreads;
  // Grid-stride loops cover the rest; 65535 blocks keep every GPU busy.
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

}  // namespace

cudaError_t launch_fill_uniform(void* p, std::int64_t n, ElemType t, std::uint64_t seed,
                                cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  fill_uniform_kernel<<<grid_for(n), kThreads, 0, stream>>>(p, n, t, seed);
  return cudaGetLastError();
}

cudaError_t launch_add_2d(void* dst, std::int64_t ld_dst, const void* src, std::int64_t ld_src,
                          std::int64_t rows, std::int64_t cols, ElemType t, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  add_2d_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(dst, ld_dst, src, ld_src, rows,
                                                                 cols, t);
  return cudaGetLastError();
}

cudaError_t launch_sum_ordered_2d(void* dst, std::int64_t ld_dst, const void* const* parts,
                                  int count, std::int64_t ld_part, std::int64_t rows,
                                  std::int64_t cols, ElemType t, cudaStream_t stream) {
  if (count < 1 || count > kMaxOrderedParts) return cudaErrorInvalidValue;
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  PartPointers pp{};
  for (int q = 0; q < count; ++q) pp.p[q] = parts[q];
  sum_ordered_2d_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(dst, ld_dst, pp, count,
                                                                         ld_part, rows, cols, t,
                                                                         CounterWait{});
  return cudaGetLastError();
}

cudaError_t launch_sum_ordered_wait_2d(void* dst, std::int64_t ld_dst, const void* const* parts,
                                       int count, std::int64_t ld_part, std::int64_t rows,
                                       std::int64_t cols, ElemType t, const CounterWait& wait,
                                       cudaStream_t stream) {
  if (count < 1 || count > kMaxOrderedParts || wait.counter == nullptr)
    return cudaErrorInvalidValue;
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  PartPointers pp{};
  for (int q = 0; q < count; ++q) pp.p[q] = parts[q];
  sum_ordered_2d_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(dst, ld_dst, pp, count,
                                                                         ld_part, rows, cols, t,
                                                                         wait);
  return cudaGetLastError();
}

cudaError_t launch_to_float_2d(const void* src, std::int64_t ld_src, std::int64_t rows,
                               std::int64_t cols, ElemType t, float* out, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  to_float_2d_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(src, ld_src, rows, cols, t,
                                                                      out);
  return cudaGetLastError();
}

cudaError_t launch_count_differences(const void* a, const void* b, std::int64_t bytes,
                                     unsigned long long* count, cudaStream_t stream) {
  const std::int64_t words = bytes / 4;  // buffers are whole 32-bit words (2-byte dtypes: even)
  if (words <= 0) return cudaSuccess;
  count_differences_kernel<<<grid_for(words), kThreads, 0, stream>>>(
      static_cast<const unsigned int*>(a), static_cast<const unsigned int*>(b), words, count);
  return cudaGetLastError();
}

cudaError_t launch_empty(cudaStream_t stream) {
  empty_kernel<<<1, 32, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_sm_copy(void* dst, const void* src, std::int64_t bytes, int blocks, int passes,
                           cudaStream_t stream) {
  if (bytes <= 0 || blocks <= 0 || passes <= 0) return cudaSuccess;
  sm_copy_kernel<<<static_cast<unsigned>(blocks), 512, 0, stream>>>(
      static_cast<int4*>(dst), static_cast<const int4*>(src), bytes / 16, passes);
  return cudaGetLastError();
}

}  // namespace compass::backends::cuda::device
