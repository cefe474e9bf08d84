#include "kernels/cpu/l2norm.h"

#include <cmath>

#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void l2norm_forward(T* out, T* rstd, const T* x, int64_t groups, int64_t dim, T eps) {
#pragma omp parallel for schedule(static) if (worth_parallel(groups * dim))
  for (int64_t g = 0; g < groups; ++g) {
    const T* xg = x + g * dim;
    T sum_sq = 0;
    for (int64_t j = 0; j < dim; ++j) sum_sq += xg[j] * xg[j];
    const T r = T(1) / std::sqrt(sum_sq + eps);
    rstd[g] = r;
    for (int64_t j = 0; j < dim; ++j) out[g * dim + j] = xg[j] * r;
  }
}

template <class T>
void l2norm_backward(T* dx, const T* dout, const T* out, const T* rstd, int64_t groups, int64_t dim) {
#pragma omp parallel for schedule(static) if (worth_parallel(groups * dim))
  for (int64_t g = 0; g < groups; ++g) {
    const T* dy = dout + g * dim;
    const T* y = out + g * dim;
    T dot = 0;
    for (int64_t j = 0; j < dim; ++j) dot += dy[j] * y[j];
    for (int64_t j = 0; j < dim; ++j) dx[g * dim + j] = rstd[g] * (dy[j] - y[j] * dot);
  }
}

template void l2norm_forward<float>(float*, float*, const float*, int64_t, int64_t, float);
template void l2norm_forward<double>(double*, double*, const double*, int64_t, int64_t, double);
template void l2norm_backward<float>(float*, const float*, const float*, const float*, int64_t, int64_t);
template void l2norm_backward<double>(double*, const double*, const double*, const double*, int64_t, int64_t);

}  // namespace linea::cpu
