#include "kernels/cpu/lm_head_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"

namespace linea::cpu {

namespace {

// Calls block(b0, rows, logits) for consecutive blocks of rows [b0, b0 + rows), with
// logits = x[b0 : b0 + rows] · Wᵀ ([rows, V], row-major, the callee may overwrite it).
template <class T, class Block>
void for_each_logit_block(const T* x, const T* weight, int64_t n, int64_t d, int64_t v, int64_t rows_per_block,
                          Block&& block) {
  const int64_t block_rows = std::min(std::max<int64_t>(rows_per_block, 1), std::max<int64_t>(n, 1));
  std::vector<T> logits(static_cast<size_t>(block_rows * v));
  for (int64_t b0 = 0; b0 < n; b0 += block_rows) {
    const int64_t rows = std::min(block_rows, n - b0);
    gemm<T>(false, true, rows, v, d, T(1), x + b0 * d, d, weight, d, T(0), logits.data(), v);
    block(b0, rows, logits.data());
  }
}

// The two gradient GEMMs of a block whose logits now hold dlogits: dx_blk = dlogits · W
// (overwritten), dW += dlogitsᵀ · x_blk. Either output may be null.
template <class T>
void backprop_logit_block(const T* dlogits, const T* weight, const T* x_blk, int64_t rows, int64_t d, int64_t v,
                          T* dx_blk, T* dweight) {
  if (dx_blk) gemm<T>(false, false, rows, d, v, T(1), dlogits, v, weight, d, T(0), dx_blk, d);
  if (dweight) gemm<T>(true, false, v, d, rows, T(1), dlogits, v, x_blk, d, T(1), dweight, d);
}

}  // namespace

int64_t lm_head_rows_per_block(int64_t vocab) {
  constexpr int64_t kLogitsPerBlock = int64_t{1} << 22;
  return std::max<int64_t>(1, kLogitsPerBlock / std::max<int64_t>(vocab, 1));
}

template <class T>
double lm_head_cross_entropy(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                             T loss_scale, T* dx, T* dweight, int64_t rows_per_block) {
  const bool want_grad = dx || dweight;
  std::vector<double> row_loss(static_cast<size_t>(std::min(std::max<int64_t>(rows_per_block, 1), n)));
  double total = 0;
  for_each_logit_block(x, weight, n, d, v, rows_per_block, [&](int64_t b0, int64_t rows, T* logits) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * v))
    for (int64_t r = 0; r < rows; ++r) {
      T* l = logits + r * v;
      const int32_t target = targets[b0 + r];
      if (target < 0) {  // ignored row: no loss, no gradient
        row_loss[r] = 0;
        if (want_grad) std::fill_n(l, v, T(0));
        continue;
      }
      const T m = *std::max_element(l, l + v);
      const double target_logit = l[target];
      double sum_exp = 0;  // the row's logits become exp(logit − m) ∈ (0, 1]
      for (int64_t j = 0; j < v; ++j) {
        l[j] = static_cast<T>(std::exp(static_cast<double>(l[j] - m)));
        sum_exp += l[j];
      }
      row_loss[r] = static_cast<double>(m) + std::log(sum_exp) - target_logit;
      if (want_grad) {  // softmax = exp(logit − m) / sum_exp
        const T scale_over_sum = static_cast<T>(loss_scale / sum_exp);
        for (int64_t j = 0; j < v; ++j) l[j] *= scale_over_sum;
        l[target] -= loss_scale;
      }
    }
    for (int64_t r = 0; r < rows; ++r) total += row_loss[r];
    backprop_logit_block(logits, weight, x + b0 * d, rows, d, v, dx ? dx + b0 * d : nullptr, dweight);
  });
  return total;
}

template <class T>
void lm_head_shard_statistics(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                              int64_t vocab_begin, T* lse, T* target_logit, int64_t rows_per_block) {
  for_each_logit_block(x, weight, n, d, v, rows_per_block, [&](int64_t b0, int64_t rows, T* logits) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * v))
    for (int64_t r = 0; r < rows; ++r) {
      const T* l = logits + r * v;
      const int64_t target = targets[b0 + r], column = target - vocab_begin;
      if (target < 0) {
        lse[b0 + r] = target_logit[b0 + r] = T(0);
        continue;
      }
      const T m = *std::max_element(l, l + v);
      double sum_exp = 0;
      for (int64_t j = 0; j < v; ++j) sum_exp += std::exp(static_cast<double>(l[j] - m));
      lse[b0 + r] = static_cast<T>(static_cast<double>(m) + std::log(sum_exp));
      target_logit[b0 + r] = column >= 0 && column < v ? l[column] : T(0);
    }
  });
}

template <class T>
double lm_head_combine_statistics(const T* stats, const int32_t* targets, int64_t n, int64_t ranks, T* lse) {
  double total = 0;  // summed in row order
  for (int64_t i = 0; i < n; ++i) {
    if (targets[i] < 0) {
      lse[i] = T(0);
      continue;
    }
    // log Σ_r exp(lse_r) = M + log Σ_r exp(lse_r − M), M = max_r lse_r; the target logit is in one
    // shard and 0 in the others.
    double max_lse = stats[i];
    for (int64_t r = 1; r < ranks; ++r) max_lse = std::max<double>(max_lse, stats[r * 2 * n + i]);
    double sum_exp = 0, target_logit = 0;
    for (int64_t r = 0; r < ranks; ++r) {
      sum_exp += std::exp(static_cast<double>(stats[r * 2 * n + i]) - max_lse);
      target_logit += stats[r * 2 * n + n + i];
    }
    const double row_lse = max_lse + std::log(sum_exp);
    lse[i] = static_cast<T>(row_lse);
    total += row_lse - target_logit;
  }
  return total;
}

template <class T>
void lm_head_shard_backward(const T* x, const T* weight, const int32_t* targets, int64_t n, int64_t d, int64_t v,
                            int64_t vocab_begin, const T* lse, T loss_scale, T* dx, T* dweight,
                            int64_t rows_per_block) {
  for_each_logit_block(x, weight, n, d, v, rows_per_block, [&](int64_t b0, int64_t rows, T* logits) {
#pragma omp parallel for schedule(static) if (worth_parallel(rows * v))
    for (int64_t r = 0; r < rows; ++r) {
      T* l = logits + r * v;
      const int64_t target = targets[b0 + r], column = target - vocab_begin;
      if (target < 0) {
        std::fill_n(l, v, T(0));
        continue;
      }
      const double row_lse = lse[b0 + r];
      for (int64_t j = 0; j < v; ++j) l[j] = static_cast<T>(loss_scale * std::exp(static_cast<double>(l[j]) - row_lse));
      if (column >= 0 && column < v) l[column] -= loss_scale;
    }
    backprop_logit_block(logits, weight, x + b0 * d, rows, d, v, dx ? dx + b0 * d : nullptr, dweight);
  });
}

template double lm_head_cross_entropy<float>(const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                             float, float*, float*, int64_t);
template double lm_head_cross_entropy<double>(const double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                              double, double*, double*, int64_t);
template void lm_head_shard_statistics<float>(const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                              int64_t, float*, float*, int64_t);
template void lm_head_shard_statistics<double>(const double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                               int64_t, double*, double*, int64_t);
template double lm_head_combine_statistics<float>(const float*, const int32_t*, int64_t, int64_t, float*);
template double lm_head_combine_statistics<double>(const double*, const int32_t*, int64_t, int64_t, double*);
template void lm_head_shard_backward<float>(const float*, const float*, const int32_t*, int64_t, int64_t, int64_t,
                                            int64_t, const float*, float, float*, float*, int64_t);
template void lm_head_shard_backward<double>(const double*, const double*, const int32_t*, int64_t, int64_t, int64_t,
                                             int64_t, const double*, double, double*, double*, int64_t);

}  // namespace linea::cpu
