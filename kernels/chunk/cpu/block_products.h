// Dense products on the row-major Blocks of the chunked CPU kernels (kernels/chunk/cpu/blocks.h),
// through OpenBLAS (kernels/cpu/gemm.h). Blocks have at most one chunk of rows and K or V columns;
// inside the OpenMP loops over (sequence, head) OpenBLAS runs on the calling thread.
#pragma once
#include <cstdint>

#include "kernels/chunk/cpu/blocks.h"
#include "kernels/cpu/gemm.h"

namespace linea::cpu {

// C += α · op(A) op(B), op(X) = X or Xᵀ
template <class T>
void add_product(Block<T>& C, bool transpose_a, const Block<T>& A, bool transpose_b, const Block<T>& B, T alpha) {
  const int64_t m = transpose_a ? A.cols() : A.rows(), k = transpose_a ? A.rows() : A.cols();
  const int64_t n = transpose_b ? B.rows() : B.cols();
  gemm<T>(transpose_a, transpose_b, m, n, k, alpha, A.data(), A.cols(), B.data(), B.cols(), T(1), C.data(), C.cols());
}

// C += α · A B
template <class T>
void add_ab(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  add_product(C, false, A, false, B, alpha);
}

// C += α · Aᵀ B
template <class T>
void add_atb(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  add_product(C, true, A, false, B, alpha);
}

// C += α · A Bᵀ
template <class T>
void add_abt(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  add_product(C, false, A, true, B, alpha);
}

// A ⊙ B
template <class T>
Block<T> hadamard(const Block<T>& A, const Block<T>& B) {
  Block<T> C(A.rows(), A.cols());
  for (int64_t i = 0; i < A.rows() * A.cols(); ++i) C.data()[i] = A.data()[i] * B.data()[i];
  return C;
}

// C += α · A ⊙ B
template <class T>
void add_hadamard(Block<T>& C, const Block<T>& A, const Block<T>& B, T alpha = 1) {
  for (int64_t i = 0; i < A.rows() * A.cols(); ++i) C.data()[i] += alpha * A.data()[i] * B.data()[i];
}

// C += α · A
template <class T>
void add_scaled(Block<T>& C, const Block<T>& A, T alpha = 1) {
  for (int64_t i = 0; i < A.rows() * A.cols(); ++i) C.data()[i] += alpha * A.data()[i];
}

// Rows [first, first + count) of X ⊙ F.
template <class T>
Block<T> rows_times(const Block<T>& X, const Block<T>& F, int64_t first, int64_t count) {
  Block<T> C(count, X.cols());
  const T *x = X.row(first), *f = F.row(first);
  for (int64_t i = 0; i < count * X.cols(); ++i) C.data()[i] = x[i] * f[i];
  return C;
}

}  // namespace linea::cpu
