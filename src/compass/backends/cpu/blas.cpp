#include "compass/backends/cpu/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <string>

namespace compass::backends::cpu {

// Thread safety of concurrent calls. We link Debian's pthread build of OpenBLAS (pkg-config
// 'openblas' -> openblas-pthread). With openblas_set_num_threads(1) a level-3 call sees
// nthreads == 1 and runs the whole GEMM in the calling thread: it never enqueues work on
// OpenBLAS's shared thread pool, and the only shared state it touches is the packing-buffer
// allocator (blas_memory_alloc), which the SMP build guards with a lock. So several executor
// threads may call sgemm at once, each getting its own buffers, and each result depends only
// on its operands: the blocking over K is fixed, so repeated calls are bit-identical. With more
// than one thread per call, concurrent callers share the one pool; OpenBLAS serialises them
// with its server lock (safe, but the ranks' GEMMs then no longer run side by side).
void set_blas_threads(int threads) {
  openblas_set_num_threads(std::max(1, threads));
}

int blas_threads() {
  return openblas_get_num_threads();
}

std::string blas_description() {
  const char* config = openblas_get_config();
  std::string parallel;
  switch (openblas_get_parallel()) {
    case 0:
      parallel = "sequential";
      break;
    case 1:
      parallel = "pthread";
      break;
    case 2:
      parallel = "openmp";
      break;
    default:
      parallel = "unknown threading";
      break;
  }
  return fmt::format("{} ({})", config ? config : "OpenBLAS", parallel);
}

namespace {

Status check_dims(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                  std::int64_t ldb, std::int64_t ldc) {
  constexpr std::int64_t kMax = std::numeric_limits<blasint>::max();
  if (m < 0 || n < 0 || k < 0) return make_error("gemm: negative size m={} n={} k={}", m, n, k);
  if (m > kMax || n > kMax || k > kMax || lda > kMax || ldb > kMax || ldc > kMax)
    return make_error(
        "gemm: size m={} n={} k={} (lda {} ldb {} ldc {}) exceeds the BLAS integer "
        "range {}",
        m, n, k, lda, ldb, ldc, kMax);
  if (lda < std::max<std::int64_t>(1, k) || ldb < std::max<std::int64_t>(1, n) ||
      ldc < std::max<std::int64_t>(1, n))
    return make_error("gemm: leading dimension too small (m={} n={} k={} lda {} ldb {} ldc {})", m,
                      n, k, lda, ldb, ldc);
  return Status::success();
}

}  // namespace

Status sgemm(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
             const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate) {
  COMPASS_TRY(check_dims(m, n, k, lda, ldb, ldc));
  if (m == 0 || n == 0) return Status::success();
  if (k == 0) {
    // BLAS with k == 0 still scales C by beta; make C = 0 explicit for the overwrite case.
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return Status::success();
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), accumulate ? 1.0f : 0.0f, c, static_cast<blasint>(ldc));
  return Status::success();
}

Status dgemm(std::int64_t m, std::int64_t n, std::int64_t k, const double* a, std::int64_t lda,
             const double* b, std::int64_t ldb, double* c, std::int64_t ldc, bool accumulate) {
  COMPASS_TRY(check_dims(m, n, k, lda, ldb, ldc));
  if (m == 0 || n == 0) return Status::success();
  if (k == 0) {
    if (!accumulate)
      for (std::int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0);
    return Status::success();
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), accumulate ? 1.0 : 0.0, c, static_cast<blasint>(ldc));
  return Status::success();
}

}  // namespace compass::backends::cpu
