#include "compass/backends/cuda/device/lt_gemm.hpp"

#include <dlfcn.h>

#include <utility>

namespace compass::backends::cuda::device {

struct LtLib {
  void* handle = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;

  LtLib() = default;
  LtLib(const LtLib&) = delete;
  LtLib& operator=(const LtLib&) = delete;
  ~LtLib() {
    if (handle != nullptr) dlclose(handle);
  }

  // The library of the cuBLAS major version compass was built against: where the loader
  // finds it (LD_LIBRARY_PATH, the ld.so cache), else in the build's toolkit.
  static Result<std::shared_ptr<const LtLib>> load() {
    const std::string name = fmt::format("libcublasLt.so.{}", CUBLAS_VER_MAJOR);
    auto lib = std::make_shared<LtLib>();
    lib->handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == nullptr) {
      const char* error = dlerror();
      const std::string reason = error != nullptr ? error : "";
#if defined(COMPASS_CUDA_LIBRARY_DIR)
      const std::string beside = std::string(COMPASS_CUDA_LIBRARY_DIR) + "/" + name;
      lib->handle = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
      if (lib->handle == nullptr) {
        return make_error("{} could not be loaded{}; put the CUDA toolkit's lib directory on "
                          "LD_LIBRARY_PATH",
                          name, reason.empty() ? "" : " (" + reason + ")");
      }
    }
    const char* missing = nullptr;
    auto sym = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib->handle, symbol));
      if (fn == nullptr && missing == nullptr) missing = symbol;
    };
    sym(lib->create, "cublasLtCreate");
    sym(lib->destroy, "cublasLtDestroy");
    sym(lib->desc_create, "cublasLtMatmulDescCreate");
    sym(lib->desc_destroy, "cublasLtMatmulDescDestroy");
    sym(lib->layout_create, "cublasLtMatrixLayoutCreate");
    sym(lib->layout_destroy, "cublasLtMatrixLayoutDestroy");
    sym(lib->pref_create, "cublasLtMatmulPreferenceCreate");
    sym(lib->pref_destroy, "cublasLtMatmulPreferenceDestroy");
    sym(lib->pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(lib->heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(lib->matmul, "cublasLtMatmul");
    if (missing != nullptr) return make_error("{} lacks {}", name, missing);
    return std::shared_ptr<const LtLib>(std::move(lib));
  }
};

namespace {

const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "unknown cuBLAS status";
  }
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::fp16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt may assume.
std::uint32_t alignment_of(const void* p) {
  auto v = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a /= 2;
  return a;
}

}  // namespace

Status cublas_check(cublasStatus_t s, std::string_view call, std::string_view context) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::success();
  std::string_view name = call.substr(0, call.find('('));
  return make_error("{} failed for {}: cuBLAS status {} ({})", name, context, static_cast<int>(s),
                    status_name(s));
}

#define COMPASS_CUBLAS(call, context) \
  COMPASS_TRY(::compass::backends::cuda::device::cublas_check((call), #call, (context)))

LtHandle::LtHandle(LtHandle&& o) noexcept
    : lib_(std::move(o.lib_)), h_(std::exchange(o.h_, nullptr)) {}
LtHandle& LtHandle::operator=(LtHandle&& o) noexcept {
  std::swap(lib_, o.lib_);
  std::swap(h_, o.h_);
  return *this;
}
LtHandle::~LtHandle() {
  if (h_ != nullptr) (void)lib_->destroy(h_);
}

Result<LtHandle> LtHandle::create(int device) {
  LtHandle h;
  COMPASS_ASSIGN(h.lib_, LtLib::load());
  if (cudaSetDevice(device) != cudaSuccess) return make_error("cudaSetDevice({}) failed", device);
  COMPASS_CUBLAS(h.lib_->create(&h.h_), fmt::format("the cuBLASLt handle of GPU {}", device));
  return h;
}

LtGemm::LtGemm(LtGemm&& o) noexcept { *this = std::move(o); }

LtGemm& LtGemm::operator=(LtGemm&& o) noexcept {
  if (this != &o) {
    release();
    lib_ = std::move(o.lib_);
    handle_ = std::exchange(o.handle_, nullptr);
    op_ = std::exchange(o.op_, nullptr);
    a_ = std::exchange(o.a_, nullptr);
    b_ = std::exchange(o.b_, nullptr);
    c_ = std::exchange(o.c_, nullptr);
    algo_ = o.algo_;
    call_ = o.call_;
    workspace_bytes_ = o.workspace_bytes_;
    what_ = std::move(o.what_);
  }
  return *this;
}

LtGemm::~LtGemm() { release(); }

void LtGemm::release() {
  if (a_ != nullptr) (void)lib_->layout_destroy(a_);
  if (b_ != nullptr) (void)lib_->layout_destroy(b_);
  if (c_ != nullptr) (void)lib_->layout_destroy(c_);
  if (op_ != nullptr) (void)lib_->desc_destroy(op_);
  a_ = b_ = c_ = nullptr;
  op_ = nullptr;
}

Result<LtGemm> LtGemm::prepare(const LtHandle& handle, const GemmCall& call,
                               std::int64_t workspace_bytes, std::string_view what) {
  if (call.m <= 0 || call.n <= 0 || call.k <= 0) {
    return make_error("{}: GEMM sizes must be positive (m {}, n {}, k {})", what, call.m, call.n,
                      call.k);
  }
  if (call.lda < call.k || call.ldb < call.n || call.ldc < call.n) {
    return make_error("{}: a row stride is shorter than its row (lda {} k {}, ldb {} n {}, ldc {} n {})",
                      what, call.lda, call.k, call.ldb, call.n, call.ldc, call.n);
  }
  if (handle.get() == nullptr) return make_error("{}: no cuBLASLt handle", what);
  LtGemm g;
  g.lib_ = handle.lib();
  g.handle_ = handle.get();
  const LtLib& lt = *g.lib_;
  g.call_ = call;
  g.workspace_bytes_ = workspace_bytes;
  g.what_ = std::string(what);
  const std::string ctx(what);

  COMPASS_CUBLAS(lt.desc_create(&g.op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), ctx);
  // Column-major view: C^T [n x m] = B^T [n x k] * A^T [k x m], no transposes.
  COMPASS_CUBLAS(lt.layout_create(&g.a_, cuda_type(call.in), static_cast<uint64_t>(call.n),
                                            static_cast<uint64_t>(call.k), call.ldb),
                 ctx);
  COMPASS_CUBLAS(lt.layout_create(&g.b_, cuda_type(call.in), static_cast<uint64_t>(call.k),
                                            static_cast<uint64_t>(call.m), call.lda),
                 ctx);
  COMPASS_CUBLAS(lt.layout_create(&g.c_, cuda_type(call.out),
                                            static_cast<uint64_t>(call.n),
                                            static_cast<uint64_t>(call.m), call.ldc),
                 ctx);

  cublasLtMatmulPreference_t pref = nullptr;
  COMPASS_CUBLAS(lt.pref_create(&pref), ctx);
  struct PrefGuard {
    const LtLib& lt;
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { (void)lt.pref_destroy(p); }
  } guard{lt, pref};
  const uint64_t ws = static_cast<uint64_t>(workspace_bytes);
  COMPASS_CUBLAS(lt.pref_set(
                     pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
                 ctx);
  // Regions start anywhere inside a buffer: tell the heuristic the real alignments (the
  // column-major A is our B and vice versa).
  const std::uint32_t align_a = alignment_of(call.b), align_b = alignment_of(call.a),
                      align_c = alignment_of(call.c);
  COMPASS_CUBLAS(lt.pref_set(
                     pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)),
                 ctx);
  COMPASS_CUBLAS(lt.pref_set(
                     pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)),
                 ctx);
  COMPASS_CUBLAS(lt.pref_set(
                     pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)),
                 ctx);
  COMPASS_CUBLAS(lt.pref_set(
                     pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)),
                 ctx);

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  COMPASS_CUBLAS(lt.heuristic(g.handle_, g.op_, g.a_, g.b_, g.c_, g.c_, pref, 1,
                                                &result, &found),
                 ctx);
  if (found == 0) {
    return make_error("{}: cuBLASLt has no algorithm for a {} GEMM m {} n {} k {} (lda {}, ldb {}, "
                      "ldc {})",
                      what, to_string(call.in), call.m, call.n, call.k, call.lda, call.ldb,
                      call.ldc);
  }
  g.algo_ = result.algo;
  return g;
}

Status LtGemm::run(void* workspace, cudaStream_t stream) const {
  const float alpha = 1.0f;
  const float beta = call_.accumulate ? 1.0f : 0.0f;
  // Column-major operands: A := our B, B := our A.
  COMPASS_CUBLAS(lib_->matmul(handle_, op_, &alpha, call_.b, a_, call_.a, b_, &beta, call_.c, c_,
                                call_.c, c_, &algo_, workspace,
                                static_cast<size_t>(workspace_bytes_), stream),
                 what_);
  return Status::success();
}

}  // namespace compass::backends::cuda::device
