#include "kernels/cpu/lm_head_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vector_math.h"

namespace linea::cpu {

int64_t lm_head_rows_per_block(int64_t vocab) {
  constexpr int64_t kLogitsPerBlock = int64_t{1} << 22;
  return std::max<int64_t>(1, kLogitsPerBlock / std::max<int64_t>(vocab, 1));
}

template <class T>
double lm_head_cross_entropy(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                             T loss_scale, T* dx, T* dweight, int64_t rows_per_block) {
  const bool want_grad = dx || dweight;
  const int64_t block_rows = std::min(std::max<int64_t>(rows_per_block, 1), std::max<int64_t>(n, 1));
  std::vector<T> logits(static_cast<size_t>(block_rows * v));
  std::vector<double> row_loss(static_cast<size_t>(block_rows));
  double total = 0;
  for (int64_t b0 = 0; b0 < n; b0 += block_rows) {
    const int64_t rows = std::min(block_rows, n - b0);
    const T* x_blk = x + b0 * d;
    gemm<T>(false, true, rows, v, d, T(1), x_blk, d, weight, d, T(0), logits.data(), v);
#pragma omp parallel for schedule(static) if (worth_parallel(rows * v))
    for (int64_t r = 0; r < rows; ++r) {
      T* l = logits.data() + r * v;
      const int32_t target = targets[b0 + r];
      if (target < 0) {  // ignored row: no loss, no gradient
        row_loss[r] = 0;
        if (want_grad) std::fill_n(l, v, T(0));
        continue;
      }
      const T m = max_of(l, v);
      const double target_logit = l[target];
      double sum_exp = 0;  // the row's logits become exp(logit − m) ∈ (0, 1], summed in f64
#pragma omp simd reduction(+ : sum_exp)
      for (int64_t j = 0; j < v; ++j) {
        l[j] = std::exp(l[j] - m);
        sum_exp += l[j];
      }
      row_loss[r] = static_cast<double>(m) + std::log(sum_exp) - target_logit;
      if (want_grad) {  // softmax = exp(logit − m) / sum_exp
        const T scale_over_sum = static_cast<T>(loss_scale / sum_exp);
#pragma omp simd
        for (int64_t j = 0; j < v; ++j) l[j] *= scale_over_sum;
        l[target] -= loss_scale;
      }
    }
    for (int64_t r = 0; r < rows; ++r) total += row_loss[r];
    if (dx) gemm<T>(false, false, rows, d, v, T(1), logits.data(), v, weight, d, T(0), dx + b0 * d, d);
    if (dweight) gemm<T>(true, false, v, d, rows, T(1), logits.data(), v, x_blk, d, T(1), dweight, d);
  }
  return total;
}

template double lm_head_cross_entropy<float>(const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                             float, float*, float*, int64_t);
template double lm_head_cross_entropy<double>(const double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                              double, double*, double*, int64_t);

}  // namespace linea::cpu
