#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void rope_apply(T* x, const int32_t* positions, int64_t rows, int64_t heads, int64_t head_dim, double base,
                bool inverse) {
  const int64_t half = head_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = std::pow(base, -2.0 * static_cast<double>(i) / head_dim);
  const double sign = inverse ? -1.0 : 1.0;
#pragma omp parallel for schedule(static) if (worth_parallel(rows * heads * head_dim))
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t i = 0; i < half; ++i) {
      const double theta = sign * positions[n] * inv_freq[i];
      const T c = static_cast<T>(std::cos(theta)), s = static_cast<T>(std::sin(theta));
      for (int64_t h = 0; h < heads; ++h) {
        T* xh = x + (n * heads + h) * head_dim;
        const T a = xh[i], b = xh[i + half];
        xh[i] = a * c - b * s;
        xh[i + half] = a * s + b * c;
      }
    }
  }
}

template void rope_apply<float>(float*, const int32_t*, int64_t, int64_t, int64_t, double, bool);
template void rope_apply<double>(double*, const int32_t*, int64_t, int64_t, int64_t, double, bool);

}  // namespace linea::cpu
