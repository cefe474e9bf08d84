// SwiGLU over n elements: out = silu(gate) ⊙ up, silu(a) = a · σ(a).
//   dgate = dout · up · silu'(gate),  dup = dout · silu(gate)   (both overwritten)
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n);

}  // namespace linea::cpu
