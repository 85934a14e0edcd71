#pragma once
// The one BLAS entry point of the CPU executor: a row-major FP32 GEMM on sub-matrices given by
// pointer + leading dimension, so a schedule's GEMM on a region of a larger buffer needs no
// copies.

#include <cstdint>
#include <string>

#include "compass/core/result.hpp"

namespace compass::backends::cpu {

/// Sets how many threads each BLAS call may use (process-wide, OpenBLAS keeps one setting);
/// the executor calls it before starting its threads. threads must be >= 1.
void set_blas_threads(int threads);
/// The current setting (openblas_get_num_threads()).
int blas_threads();
/// The library's build string and threading ("OpenBLAS 0.3.21 ... (pthread)"), for reports.
std::string blas_description();

/// C[m,n] = A[m,k] * B[k,n] (accumulate: C += A*B). Row-major; lda/ldb/ldc are the row strides
/// in elements. Errors when a size or stride does not fit the BLAS integer type or a stride is
/// smaller than the row it must hold.
Status sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
             const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate);

/// Double-precision version for the reference computation.
Status dgemm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
             const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool accumulate);

}  // namespace compass::backends::cpu
