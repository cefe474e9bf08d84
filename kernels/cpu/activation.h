// Element-wise activations over n elements (the contract is in kernels/ops.h):
//   silu: out = x σ(x),  dx = dout · silu'(x)         (saved: the input x)
//   tanh: out = tanh(x), dx = dout · (1 − out²)        (saved: the output)
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace linea::cpu {

template <class T>
void activation_forward(T* out, const T* x, int64_t n, ops::Activation act);
template <class T>
void activation_backward(T* dx, const T* dout, const T* saved, int64_t n, ops::Activation act);

}  // namespace linea::cpu
