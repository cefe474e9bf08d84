#include "kernels/cpu/swiglu.h"

#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"

namespace linea::cpu {

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for schedule(static) if (worth_parallel(n))
  for (int64_t i = 0; i < n; ++i) out[i] = silu(gate[i]) * up[i];
}

template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n) {
#pragma omp parallel for schedule(static) if (worth_parallel(n))
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], u = up[i];  // read before writing: dgate may alias gate
    dgate[i] = dout[i] * u * silu_grad(g);
    dup[i] = dout[i] * silu(g);
  }
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t);

}  // namespace linea::cpu
