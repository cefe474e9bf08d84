// SwiGLU over n elements: out = silu(gate) ⊙ up, silu(a) = a · σ(a).
//   dgate = dout · up · silu'(gate),  dup = dout · silu(gate)   (both overwritten)
// The backward also writes out = silu(gate) · up when `out` is not null (the forward's product,
// in the same pass); its outputs may alias its inputs (each element's inputs are read first).
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void swiglu_forward(T* out, const T* gate, const T* up, int64_t n);
template <class T>
void swiglu_backward(T* dgate, T* dup, const T* dout, const T* gate, const T* up, int64_t n, T* out = nullptr);

}  // namespace linea::cpu
