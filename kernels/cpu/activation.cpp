#include "kernels/cpu/activation.h"

#include <cmath>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void activation_forward(T* out, const T* x, int64_t n, ops::Activation act) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
    if (act == ops::Activation::silu) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) out[i] = silu(x[i]);
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = std::tanh(x[i]);
    }
  });
}

template <class T>
void activation_backward(T* dx, const T* dout, const T* saved, int64_t n, ops::Activation act) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
    if (act == ops::Activation::silu) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) dx[i] = dout[i] * silu_grad(saved[i]);
    } else {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) dx[i] = dout[i] * (T(1) - saved[i] * saved[i]);
    }
  });
}

template void activation_forward<float>(float*, const float*, int64_t, ops::Activation);
template void activation_forward<double>(double*, const double*, int64_t, ops::Activation);
template void activation_backward<float>(float*, const float*, const float*, int64_t, ops::Activation);
template void activation_backward<double>(double*, const double*, const double*, int64_t, ops::Activation);

}  // namespace linea::cpu
