#include "kernels/cpu/newton_schulz.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace linea::cpu {
namespace {

constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
constexpr double kNormEps = 1e-7;

// Row-major C[m×n] = alpha · op(A)·op(B) + beta · C, op(B) transposed when trans_b; k the inner size.
void gemm(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b, float beta,
          float* c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, k, b,
              trans_b ? k : n, beta, c, n);
}
void gemm(bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b, double beta,
          double* c) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, k, b,
              trans_b ? k : n, beta, c, n);
}

// dst = scale · src (rows × cols), or scale · srcᵀ (cols × rows) when transpose; in tiles, so that
// the strided side of a transpose stays in cache.
template <class T>
void copy_scaled(const T* src, T* dst, int64_t rows, int64_t cols, bool transpose, T scale) {
  constexpr int64_t kTile = 64;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) {
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) {
          dst[transpose ? c * rows + r : r * cols + c] = src[r * cols + c] * scale;
        }
      }
    }
  }
}

}  // namespace

template <class T>
void newton_schulz(const T* g, T* out, int64_t rows, int64_t cols, int steps, T* workspace) {
  const bool transpose = rows > cols;
  const int64_t m = std::min(rows, cols), n = std::max(rows, cols);  // X is m × n, m ≤ n
  T* x = workspace;
  T* y = x + m * n;
  T* a = y + m * n;  // m × m
  T* b = a + m * m;  // m × m

  double sum_sq = 0;
  for (int64_t i = 0; i < m * n; ++i) sum_sq += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  copy_scaled(g, x, rows, cols, transpose, static_cast<T>(1.0 / (std::sqrt(sum_sq) + kNormEps)));

  for (int step = 0; step < steps; ++step) {
    gemm(true, m, m, n, T(1), x, x, T(0), a);                              // A = X·Xᵀ
    for (int64_t i = 0; i < m * m; ++i) b[i] = static_cast<T>(kB) * a[i];  // B = b·A
    gemm(false, m, m, m, static_cast<T>(kC), a, a, T(1), b);               //   + c·A·A
    std::copy(x, x + m * n, y);                                            // Y = a·X + B·X
    gemm(false, m, n, m, T(1), b, x, static_cast<T>(kA), y);
    std::swap(x, y);
  }

  copy_scaled(x, out, transpose ? cols : rows, transpose ? rows : cols, transpose, T(1));
}

template void newton_schulz<float>(const float*, float*, int64_t, int64_t, int, float*);
template void newton_schulz<double>(const double*, double*, int64_t, int64_t, int, double*);

}  // namespace linea::cpu
