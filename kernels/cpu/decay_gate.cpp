#include "kernels/cpu/decay_gate.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

namespace {
// exp(A_log[h]) for every head, so that the loops below take one exp per element, not two.
template <class T>
std::vector<T> decay_rates(const T* A_log, int64_t heads) {
  std::vector<T> rates(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) rates[h] = std::exp(A_log[h]);
  return rates;
}
}  // namespace

template <class T>
void decay_gate_forward(T* g, const T* a, const T* A_log, const T* dt_bias, int64_t rows, int64_t heads,
                        int64_t per_head) {
  const int64_t width = heads * per_head;
  const std::vector<T> rate = decay_rates(A_log, heads);
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < width; ++k) {
      g[n * width + k] = -rate[k / per_head] * softplus(a[n * width + k] + dt_bias[k]);
    }
  }
}

template <class T>
void decay_gate_backward(T* da, T* dA_log, T* ddt_bias, const T* dg, const T* a, const T* A_log, const T* dt_bias,
                         int64_t rows, int64_t heads, int64_t per_head) {
  const int64_t width = heads * per_head;
  const std::vector<T> rate = decay_rates(A_log, heads);
  // dA_log first: it reads dg, which the caller may have handed in as da's storage.
  accumulate_over_row_blocks(rows, heads, dA_log, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t k = 0; k < width; ++k) {
        const T g = -rate[k / per_head] * softplus(a[n * width + k] + dt_bias[k]);
        partial[k / per_head] += dg[n * width + k] * g;
      }
    }
  });
#pragma omp parallel for schedule(static) if (worth_parallel(rows * width))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t k = 0; k < width; ++k) {
      const int64_t i = n * width + k;
      da[i] = dg[i] * (-rate[k / per_head] * sigmoid(a[i] + dt_bias[k]));
    }
  }
  accumulate_over_row_blocks(rows, width, ddt_bias, [&](int64_t begin, int64_t end, T* partial) {
    for (int64_t n = begin; n < end; ++n) {
      for (int64_t k = 0; k < width; ++k) partial[k] += da[n * width + k];
    }
  });
}

template void decay_gate_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void decay_gate_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t,
                                         int64_t);
template void decay_gate_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                         int64_t, int64_t, int64_t);
template void decay_gate_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                          const double*, int64_t, int64_t, int64_t);

}  // namespace linea::cpu
