#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) out[i] = silu(gate[i]) * up[i];
  });
}

template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
  for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const T g = gate[i], u = up[i];  // read before writing: dgate may alias gate
      dgate[i] = dout[i] * u * silu_grad(g);
      dup[i] = dout[i] * silu(g);
    }
  });
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t);

}  // namespace linea::cpu
