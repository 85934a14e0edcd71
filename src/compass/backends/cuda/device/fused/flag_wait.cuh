#pragma once
// The flag wait of the fused kernels: an acquire load of a 32-bit flag at system scope (the
// flag may live on a peer GPU), polled with a GPU global-timer timeout that records a fault
// in host-mapped memory and traps, so a missing flag fails loudly instead of hanging.

#include <cstdint>

#include "compass/backends/cuda/device/fused/fused_kernels.hpp"

namespace compass::backends::cuda::device {

// Set by the first thread that records a fault (internal linkage: one per kernel file).
static __device__ unsigned int fault_claim = 0;

__device__ __forceinline__ std::uint32_t load_acquire_sys(const std::uint32_t* p) {
  std::uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Flags count iterations and are never reset: "reached" is a wrap-safe >=.
__device__ __forceinline__ bool flag_reached(std::uint32_t value, std::uint32_t target) {
  return static_cast<std::int32_t>(value - target) >= 0;
}

/// Gives up a flag wait that timed out: the first thread of the process to get here records
/// the fault (when `fault` is given), and every thread that gets here traps.
__device__ __forceinline__ void trap_flag_timeout(FusedFault* fault, int rank, int flag,
                                                  int tile, std::uint32_t observed,
                                                  std::uint32_t wanted) {
  // One writer per process (the context is lost after the trap): the claim is an atomic on
  // device memory, the record is written to host-mapped memory with plain stores.
  if (fault != nullptr && atomicCAS(&fault_claim, 0u, 1u) == 0u) {
    volatile FusedFault* f = fault;
    f->rank = rank;
    f->flag = flag;
    f->tile = tile;
    f->observed = observed;
    f->wanted = wanted;
    __threadfence_system();
    f->code = kFaultFlagTimeout;
  }
  __threadfence_system();
  __trap();
}

/// Waits until every piece of tile `tile_index` (waits[begin .. begin + count)) is released.
/// Called by whole warps; every thread polls (one transaction per warp) so each thread has
/// its own acquire.
__device__ __forceinline__ void wait_pieces(const FusedWait& w, const std::int32_t* waits,
                                            int begin, int count, int tile_index) {
  for (int i = begin; i < begin + count; ++i) {
    const int piece = waits[i];
    const std::uint32_t* flag = w.flags[piece];
    if (flag == nullptr) continue;
    std::uint32_t v = load_acquire_sys(flag);
    if (flag_reached(v, w.target)) continue;
    const unsigned long long start = global_timer_ns();
    while (!flag_reached(v, w.target)) {
      if (global_timer_ns() - start > static_cast<unsigned long long>(w.timeout_ns))
        trap_flag_timeout(w.fault, w.rank, piece, tile_index, v, w.target);
      __nanosleep(64);
      v = load_acquire_sys(flag);
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The A rows are loaded by TMA (the async proxy): order the acquired data before it.
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}

}  // namespace compass::backends::cuda::device
