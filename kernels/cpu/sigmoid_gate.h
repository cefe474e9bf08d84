// Scaled sigmoid gate over n elements: β = scale · σ(logits).
// Backward from the saved β: dlogits = dβ · scale · σ · (1 − σ) = dβ · β · (1 − β / scale).
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void sigmoid_gate_forward(T* beta, const T* logits, int64_t n, T scale);
template <class T>
void sigmoid_gate_backward(T* dlogits, const T* dbeta, const T* beta, int64_t n, T scale);

}  // namespace linea::cpu
