// The CPU executor's GEMMs in a build without OpenBLAS (-DCOMPASS_PLANNING_ONLY=ON, the Python
// package's planning build): every GEMM says so, and nothing is computed.
#include "compass/backends/cpu/blas.hpp"

namespace compass::backends::cpu {

namespace {

Status no_blas() {
  return make_error(
      "this build has no BLAS (the planning build; configure with -DCOMPASS_PLANNING_ONLY=OFF)");
}

}  // namespace

void set_blas_threads(int) {}

int blas_threads() {
  return 1;
}

std::string blas_description() {
  return "none (a planning build without OpenBLAS)";
}

Status sgemm(std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t, const float*,
             std::int64_t, float*, std::int64_t, bool) {
  return no_blas();
}

Status dgemm(std::int64_t, std::int64_t, std::int64_t, const double*, std::int64_t,
             const double*, std::int64_t, double*, std::int64_t, bool) {
  return no_blas();
}

}  // namespace compass::backends::cpu
