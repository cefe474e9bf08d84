// Row-major GEMM on the GPU through cuBLASLt, with the contract of kernels/cpu/gemm.h:
//   C = alpha · op(A) · op(B) + beta · C   (+ bias[j] added to every row j-th column, if given)
// C is m×n, op(A) is m×k, op(B) is k×n, op(X) = X or Xᵀ; lda/ldb/ldc are the row strides of the
// stored matrices. A and B share one element type (f32 or bf16); C has that type or f32 (bf16
// products kept in f32); bias has C's type. Products accumulate in f32 (CUBLAS_COMPUTE_32F, so f32
// inputs get no TF32 rounding). Runs on the default stream with a 32 MiB cuBLASLt workspace per
// thread and device; the algorithm for each shape, type and pointer alignment is chosen once by
// cuBLASLt's heuristic and kept (cublasGemmEx serves the shapes it has no kernel for).
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace linea::cuda {

struct GemmOperands {
  DType ab = DType::f32;  // element type of A and B
  DType c = DType::f32;   // element type of C (and of bias)
};

void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
          const void* b, int64_t ldb, float beta, void* c, int64_t ldc, GemmOperands types, const void* bias = nullptr);

}  // namespace linea::cuda
