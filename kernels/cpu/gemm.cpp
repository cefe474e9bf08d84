#include "kernels/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace linea::cpu {

namespace {
blasint blas_int(int64_t v) {
  if (v < 0 || v > std::numeric_limits<blasint>::max()) {
    throw std::invalid_argument("gemm: size " + std::to_string(v) + " does not fit a BLAS integer");
  }
  return static_cast<blasint>(v);
}
}  // namespace

template <class T>
void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const CBLAS_TRANSPOSE ta = transpose_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = transpose_b ? CblasTrans : CblasNoTrans;
  // BLAS requires leading dimensions ≥ 1 even when a matrix is empty (k == 0).
  const blasint la = blas_int(std::max<int64_t>(lda, 1)), lb = blas_int(std::max<int64_t>(ldb, 1));
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, blas_int(m), blas_int(n), blas_int(k), alpha, a, la, b, lb, beta, c,
                blas_int(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, blas_int(m), blas_int(n), blas_int(k), alpha, a, la, b, lb, beta, c,
                blas_int(ldc));
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t);

}  // namespace linea::cpu
