#include "kernels/cpu/optimizer_math.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace linea::cpu {

namespace {
// g·factor, the product in f64 rounded once to T (exact when the factor is 1)
template <class T>
T scaled(T g, double factor) {
  return static_cast<T>(static_cast<double>(g) * factor);
}
}  // namespace

template <class T>
void adamw_update(T* theta, const T* grad, T* m, T* v, int64_t n, const AdamWCoefficients& c) {
  const T decay_factor = static_cast<T>(c.decay_factor), beta1 = static_cast<T>(c.beta1),
          beta2 = static_cast<T>(c.beta2), step_size = static_cast<T>(c.step_size),
          bc2_sqrt = static_cast<T>(c.bias_correction2_sqrt), eps = static_cast<T>(c.eps);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const T g = scaled(grad[i], c.grad_scale);
    theta[i] *= decay_factor;
    m[i] = beta1 * m[i] + (T(1) - beta1) * g;
    v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
    theta[i] -= step_size * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
  }
}

template <class T>
void nesterov_momentum(T* momentum, T* u, const T* grad, int64_t n, double mu, double grad_scale) {
  const T mu_t = static_cast<T>(mu);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const T g = scaled(grad[i], grad_scale);
    momentum[i] = mu_t * momentum[i] + g;
    u[i] = g + mu_t * momentum[i];
  }
}

template <class T>
void decay_and_subtract(T* theta, const T* o, int64_t n, double decay_factor, double scale) {
  const T decay_t = static_cast<T>(decay_factor), scale_t = static_cast<T>(scale);
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) theta[i] = theta[i] * decay_t - scale_t * o[i];
}

template <class T>
void scale(T* x, int64_t n, double factor) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] = scaled(x[i], factor);
}

constexpr int64_t kSumBlock = 1 << 14;  // fixed, so the summation order never depends on threads

template <class T>
double sum_of_squares(const T* x, int64_t n) {
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    double s = 0;
    const int64_t end = std::min(n, (b + 1) * kSumBlock);
    for (int64_t i = b * kSumBlock; i < end; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[b] = s;
  }
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

#define LINEA_INSTANTIATE(T)                                                              \
  template void adamw_update<T>(T*, const T*, T*, T*, int64_t, const AdamWCoefficients&); \
  template void nesterov_momentum<T>(T*, T*, const T*, int64_t, double, double);          \
  template void decay_and_subtract<T>(T*, const T*, int64_t, double, double);             \
  template void scale<T>(T*, int64_t, double);                                            \
  template double sum_of_squares<T>(const T*, int64_t);
LINEA_INSTANTIATE(float)
LINEA_INSTANTIATE(double)
#undef LINEA_INSTANTIATE

}  // namespace linea::cpu
