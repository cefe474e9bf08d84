#include "kernels/cpu/linear.h"

#include <algorithm>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/row_blocks.h"

namespace linea::cpu {

template <class T>
void linear_forward(T* out, const T* x, const T* weight, const T* bias, int64_t n, int64_t in, int64_t out_features) {
  if (bias) {
#pragma omp parallel for schedule(static) if (worth_parallel(n * out_features))
    for (int64_t t = 0; t < n; ++t) std::copy_n(bias, out_features, out + t * out_features);
  }
  gemm<T>(false, true, n, out_features, in, T(1), x, in, weight, in, bias ? T(1) : T(0), out, out_features);
}

template <class T>
void linear_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, int64_t n, int64_t in,
                     int64_t out_features, bool accumulate_dx) {
  if (dx)
    gemm<T>(false, false, n, in, out_features, T(1), dout, out_features, weight, in, accumulate_dx ? T(1) : T(0), dx,
            in);
  if (dweight) gemm<T>(true, false, out_features, in, n, T(1), dout, out_features, x, in, T(1), dweight, in);
  if (dbias) {
    accumulate_over_row_blocks(n, out_features, dbias, [&](int64_t begin, int64_t end, T* partial) {
      for (int64_t t = begin; t < end; ++t) {
        for (int64_t o = 0; o < out_features; ++o) partial[o] += dout[t * out_features + o];
      }
    });
  }
}

template void linear_forward<float>(float*, const float*, const float*, const float*, int64_t, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, int64_t, int64_t, int64_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, int64_t, int64_t,
                                     int64_t, bool);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*, int64_t,
                                      int64_t, int64_t, bool);

}  // namespace linea::cpu
