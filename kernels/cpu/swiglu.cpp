#include "kernels/cpu/swiglu.h"

#include <type_traits>

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
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n, T* out) {
  // Each element's inputs are read before its outputs are written: an output may alias an input.
  const auto backward = [=](auto with_out) {
    for_each_block(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        const T g = gate[i], u = up[i], d = dout[i];
        dgate[i] = d * u * silu_grad(g);
        dup[i] = d * silu(g);
        if constexpr (decltype(with_out)::value) out[i] = silu(g) * u;
      }
    });
  };
  if (out == nullptr) return backward(std::false_type{});
  backward(std::true_type{});
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*, int64_t, float*);
template void swiglu_backward<double>(double*, double*, const double*, const double*, const double*, int64_t, double*);

}  // namespace linea::cpu
