#include "kernels/cpu/group_norm.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

template <class T>
void group_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t width, int64_t groups, T eps) {
  const int64_t P = width / groups;
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t first = n * width + gi * P;
      T sum = 0;
      for (int64_t p = 0; p < P; ++p) sum += x[first + p];
      const T mu = sum / static_cast<T>(P);
      T squares = 0;
      for (int64_t p = 0; p < P; ++p) squares += (x[first + p] - mu) * (x[first + p] - mu);
      const T r = T(1) / std::sqrt(squares / static_cast<T>(P) + eps);
      mean[n * groups + gi] = mu;
      rstd[n * groups + gi] = r;
      for (int64_t p = 0; p < P; ++p) {
        const int64_t c = gi * P + p;
        out[first + p] = (x[first + p] - mu) * r * weight[c] + bias[c];
      }
    }
  }
}

template <class T>
void group_norm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                         const T* rstd, int64_t rows, int64_t width, int64_t groups) {
  const int64_t P = width / groups;
  const auto normed = [&](int64_t n, int64_t c) {
    return (x[n * width + c] - mean[n * groups + c / P]) * rstd[n * groups + c / P];
  };
  accumulate_over_row_blocks(rows, width, dweight, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t c = 0; c < width; ++c) partial[c] += dout[n * width + c] * normed(n, c);
    }
  });
  accumulate_over_row_blocks(rows, width, dbias, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t c = 0; c < width; ++c) partial[c] += dout[n * width + c];
    }
  });
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      T mean_dn = 0, mean_dn_n = 0;  // mean(dx̂), mean(dx̂ ⊙ x̂)
      for (int64_t c = gi * P; c < (gi + 1) * P; ++c) {
        const T dn = dout[n * width + c] * weight[c];
        mean_dn += dn;
        mean_dn_n += dn * normed(n, c);
      }
      mean_dn /= static_cast<T>(P);
      mean_dn_n /= static_cast<T>(P);
      for (int64_t c = gi * P; c < (gi + 1) * P; ++c) {
        const T dn = dout[n * width + c] * weight[c];
        dx[n * width + c] = rstd[n * groups + gi] * (dn - mean_dn - normed(n, c) * mean_dn_n);
      }
    }
  }
}

template void group_norm_forward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t,
                                        int64_t, int64_t, float);
template void group_norm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         int64_t, int64_t, int64_t, double);
template void group_norm_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                         const float*, int64_t, int64_t, int64_t);
template void group_norm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                          const double*, const double*, int64_t, int64_t, int64_t);

}  // namespace linea::cpu
