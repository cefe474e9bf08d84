// Row-major GEMM through OpenBLAS: C = alpha · op(A) · op(B) + beta · C, op(X) = X or Xᵀ.
// C is m×n, op(A) is m×k, op(B) is k×n; lda/ldb/ldc are the row strides of the stored matrices.
// Sizes must fit BLAS's 32-bit integers (std::invalid_argument otherwise).
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace linea::cpu
