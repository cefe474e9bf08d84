// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major buffer read as
// column-major is the transpose of the matrix it holds: so the call below hands cuBLASLt the
// buffer of B as its first operand and that of A as its second, each transposed iff the row-major
// op transposes it, with column-major sizes (n, m, k). The bias epilogue adds a vector along the
// column-major rows, i.e. along the row-major columns, as wanted. For the few shapes where
// cuBLASLt's heuristic offers no kernel (tiny or oddly aligned ones), the same product goes
// through cublasGemmEx, with the bias (and beta · C) written into C first.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/cuda/check.h"
#include "kernels/cuda/element_types.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/runtime.h"

namespace linea::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

cudaDataType_t cuda_type(DType t) {
  if (t == DType::f32) return CUDA_R_32F;
  if (t == DType::bf16) return CUDA_R_16BF;
  throw std::invalid_argument("cuda::gemm: expected f32 or bf16 operands, got " + std::string(dtype_name(t)));
}

// The largest power of two ≤ 256 that divides the address (cuBLASLt picks kernels by alignment).
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

struct Layout {
  cublasLtMatrixLayout_t handle = nullptr;
  Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld) {
    check_cublas(
        cublasLtMatrixLayoutCreate(&handle, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
        "cublasLtMatrixLayoutCreate");
  }
  ~Layout() { cublasLtMatrixLayoutDestroy(handle); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

// Everything cuBLASLt needs for one shape: descriptors and the chosen algorithm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  std::unique_ptr<Layout> first, second, out;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;  // false: cuBLASLt offers no algorithm, use cublasGemmEx
  ~Plan() { cublasLtMatmulDescDestroy(desc); }
};

using PlanKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, bool, uint32_t,
                           uint32_t, uint32_t>;

// One cuBLASLt handle, workspace and plan cache per thread and device.
struct Context {
  cublasLtHandle_t handle = nullptr;
  cublasHandle_t blas = nullptr;  // for the fallback, made when first needed
  std::shared_ptr<void> workspace;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  Context() {
    check_cublas(cublasLtCreate(&handle), "cublasLtCreate");
    workspace = allocate(kWorkspaceBytes);
  }
  ~Context() {
    plans.clear();
    if (blas) cublasDestroy(blas);
    cublasLtDestroy(handle);
  }
  cublasHandle_t fallback() {
    if (!blas) check_cublas(cublasCreate(&blas), "cublasCreate");
    return blas;
  }
};

Context& context() {
  thread_local std::map<int, std::unique_ptr<Context>> contexts;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  std::unique_ptr<Context>& c = contexts[device];
  if (!c) c = std::make_unique<Context>();
  return *c;
}

template <class V>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  check_cublas(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
               "cublasLtMatmulDescSetAttribute");
}

template <class V>
void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const V& value) {
  check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)),
               "cublasLtMatmulPreferenceSetAttribute");
}

// C = beta · C (+ bias), elementwise: all of an empty product (k = 0, which cuBLASLt does not take)
// and the first step of the cublasGemmEx fallback.
template <class T>
__global__ void scale_kernel(T* c, int64_t m, int64_t n, int64_t ldc, float beta, const T* bias) {
  for (int64_t q = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; q < m * n; q += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = q / n, j = q % n;
    const float old = beta == 0.0f ? 0.0f : beta * to_float(c[i * ldc + j]);  // beta = 0 ignores NaN in C
    c[i * ldc + j] = from_float<T>(old + (bias ? to_float(bias[j]) : 0.0f));
  }
}

std::string shape_text(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  return std::string("op(A)") + (ta ? "ᵀ" : "") + " op(B)" + (tb ? "ᵀ" : "") + " with m=" + std::to_string(m) +
         " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// Column-major operand sizes: `op_rows` × `op_cols` after the op, stored transposed iff `transposed`.
std::unique_ptr<Layout> operand(cudaDataType_t type, bool transposed, int64_t op_rows, int64_t op_cols, int64_t ld) {
  return transposed ? std::make_unique<Layout>(type, op_cols, op_rows, ld)
                    : std::make_unique<Layout>(type, op_rows, op_cols, ld);
}

std::unique_ptr<Plan> make_plan(Context& ctx, const PlanKey& key) {
  const auto [ta, tb, m, n, k, lda, ldb, ldc, ab_type, c_type, has_bias, align_a, align_b, align_c] = key;
  const GemmOperands types{static_cast<DType>(ab_type), static_cast<DType>(c_type)};
  const cudaDataType_t ab = cuda_type(types.ab), c = cuda_type(types.c);
  auto plan = std::make_unique<Plan>();
  check_cublas(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t first_op = tb ? CUBLAS_OP_T : CUBLAS_OP_N, second_op = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, first_op);
  set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, second_op);
  if (has_bias) set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
  plan->first = operand(ab, tb, n, k, ldb);   // op(B)ᵀ: n × k
  plan->second = operand(ab, ta, k, m, lda);  // op(A)ᵀ: k × m
  plan->out = std::make_unique<Layout>(c, n, m, ldc);

  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  std::unique_ptr<std::remove_pointer_t<cublasLtMatmulPreference_t>, decltype(&cublasLtMatmulPreferenceDestroy)> guard(
      pref, cublasLtMatmulPreferenceDestroy);
  set_preference(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
  set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_b);  // cuBLASLt's A is our B
  set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_a);
  set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
  set_preference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(ctx.handle, plan->desc, plan->first->handle, plan->second->handle,
                                              plan->out->handle, plan->out->handle, pref, 1, &result, &found),
               "cublasLtMatmulAlgoGetHeuristic");
  plan->found = found > 0;
  if (plan->found) plan->algo = result.algo;
  return plan;
}
}  // namespace

void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
          const void* b, int64_t ldb, float beta, void* c, int64_t ldc, GemmOperands types, const void* bias) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    dispatch_float(types.c, [&](auto zero) {
      using T = decltype(zero);
      scale_kernel<<<grid_stride_blocks(m * n), kThreadsPerBlock>>>(static_cast<T*>(c), m, n, ldc, beta,
                                                                    static_cast<const T*>(bias));
      check_launch("gemm scale_kernel");
    });
    return;
  }
  Context& ctx = context();
  const PlanKey key{transpose_a,
                    transpose_b,
                    m,
                    n,
                    k,
                    lda,
                    ldb,
                    ldc,
                    static_cast<int>(types.ab),
                    static_cast<int>(types.c),
                    bias != nullptr,
                    alignment_of(a),
                    alignment_of(b),
                    alignment_of(c)};
  std::unique_ptr<Plan>& plan = ctx.plans[key];
  if (!plan) plan = make_plan(ctx, key);
  if (!plan->found) {
    for (int64_t size : {m, n, k, lda, ldb, ldc}) {
      if (size > INT_MAX)
        throw std::invalid_argument("cuda::gemm: " + shape_text(transpose_a, transpose_b, m, n, k) +
                                    ": sizes beyond 32 bits need cuBLASLt, which has no kernel");
    }
    float gemm_beta = beta;
    if (bias) {  // C = beta · C + bias first, then C += op(A)·op(B)
      dispatch_float(types.c, [&](auto zero) {
        using T = decltype(zero);
        scale_kernel<<<grid_stride_blocks(m * n), kThreadsPerBlock>>>(static_cast<T*>(c), m, n, ldc, beta,
                                                                      static_cast<const T*>(bias));
        check_launch("gemm scale_kernel");
      });
      gemm_beta = 1.0f;
    }
    const cudaDataType_t ab = cuda_type(types.ab);
    check_cublas(
        cublasGemmEx(ctx.fallback(), transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                     static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, ab,
                     static_cast<int>(ldb), a, ab, static_cast<int>(lda), &gemm_beta, c, cuda_type(types.c),
                     static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        ("cublasGemmEx " + shape_text(transpose_a, transpose_b, m, n, k)).c_str());
    return;
  }
  if (bias) set_attribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  check_cublas(cublasLtMatmul(ctx.handle, plan->desc, &alpha, b, plan->first->handle, a, plan->second->handle, &beta, c,
                              plan->out->handle, c, plan->out->handle, &plan->algo, ctx.workspace.get(),
                              kWorkspaceBytes, nullptr),
               ("cublasLtMatmul " + shape_text(transpose_a, transpose_b, m, n, k)).c_str());
}

}  // namespace linea::cuda
