#pragma once
// Row-major GEMMs on sub-matrices through cuBLASLt. A row-major C[m,n] = A[m,k] B[k,n] with
// row strides lda, ldb, ldc is the column-major product C^T = B^T A^T with the same strides, so
// the call swaps the operands and needs no transposes. Descriptors, the heuristic's algorithm
// and the pointer alignments are fixed once per task (LtGemm) so the timed loop only calls
// cublasLtMatmul.
// The library is loaded with dlopen when the first handle is created, not linked: mapping
// cuBLASLt costs every process about 90 ms at start, and most compass processes (planning,
// simulation, the CPU backend) never call it.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compass/core/dtype.hpp"
#include "compass/core/result.hpp"

namespace compass::backends::cuda::device {

/// Ok, or an error "<call> failed for <context>: cuBLAS status <n> (<name>)".
Status cublas_check(cublasStatus_t s, std::string_view call, std::string_view context);

/// The cuBLASLt entry points compass calls, from the library dlopen finds (defined in
/// lt_gemm.cpp). Shared by a handle and the GEMMs prepared on it.
struct LtLib;

/// A cuBLASLt handle, destroyed on destruction (one per device: created with it current). It
/// holds the loaded library.
class LtHandle {
 public:
  LtHandle() = default;
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  LtHandle(LtHandle&& o) noexcept;
  LtHandle& operator=(LtHandle&& o) noexcept;
  ~LtHandle();
  static Result<LtHandle> create(int device);
  cublasLtHandle_t get() const { return h_; }
  const std::shared_ptr<const LtLib>& lib() const { return lib_; }

 private:
  std::shared_ptr<const LtLib> lib_;
  cublasLtHandle_t h_ = nullptr;
};

/// The shape and memory of one GEMM: C (+)= A * B, row-major, strides in elements.
struct GemmCall {
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;
  std::int64_t ldc = 0;
  DType in = DType::bf16;   ///< A and B
  DType out = DType::bf16;  ///< C (fp32 for references)
  bool accumulate = false;
};

/// The FP32 reference GEMM of a check: Y = X · W with X (m×k), W (k×n) and Y (m×n) dense
/// row-major, inputs in `in`.
inline GemmCall reference_call(std::int64_t m, std::int64_t n, std::int64_t k, const void* x,
                               const void* w, void* y, DType in) {
  GemmCall call;
  call.m = m;
  call.n = n;
  call.k = k;
  call.a = x;
  call.lda = k;
  call.b = w;
  call.ldb = n;
  call.c = y;
  call.ldc = n;
  call.in = in;
  call.out = DType::fp32;
  return call;
}

/// Bytes of cuBLASLt workspace each stream gets.
inline constexpr std::int64_t kLtWorkspaceBytes = 32ll << 20;

/// A prepared GEMM: descriptors plus the algorithm cuBLASLt's heuristic picked.
class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  LtGemm(LtGemm&& o) noexcept;
  LtGemm& operator=(LtGemm&& o) noexcept;
  ~LtGemm();
  /// Prepares `call` (its pointers fix the alignments the algorithm may assume); `what` names
  /// the task in errors. FP32 accumulation for every input type.
  static Result<LtGemm> prepare(const LtHandle& handle, const GemmCall& call,
                                std::int64_t workspace_bytes, std::string_view what);
  /// Enqueues the GEMM on `stream` (whose device must be current).
  Status run(void* workspace, cudaStream_t stream) const;

 private:
  void release();
  std::shared_ptr<const LtLib> lib_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  GemmCall call_;
  std::int64_t workspace_bytes_ = 0;
  std::string what_;
};

}  // namespace compass::backends::cuda::device
