// Scalar activations shared by the CPU kernels, written to be stable for any finite input:
// no exp of a large positive number is ever taken. They have no branches around arithmetic, so
// that loops calling them vectorize under `#pragma omp simd` (with vector_math.h's exp).
#pragma once
#include <cmath>

#include "kernels/cpu/vector_math.h"

namespace linea::cpu {

// σ(a) = 1 / (1 + e^{−a}), evaluated through e = e^{−|a|} ≤ 1: 1 / (1 + e) for a ≥ 0, e / (1 + e) below.
template <class T>
inline T sigmoid(T a) {
  const T e = std::exp(-std::abs(a));
  return (a >= 0 ? T(1) : e) / (T(1) + e);
}

// silu(a) = a · σ(a)
template <class T>
inline T silu(T a) {
  return a * sigmoid(a);
}

// d silu / da = σ(a) · (1 + a · (1 − σ(a)))
template <class T>
inline T silu_grad(T a) {
  const T s = sigmoid(a);
  return s * (T(1) + a * (T(1) - s));
}

// softplus(a) = log(1 + e^a) = max(a, 0) + log1p(e^{−|a|});  d softplus / da = σ(a)
template <class T>
inline T softplus(T a) {
  return std::max(a, T(0)) + std::log1p(std::exp(-std::abs(a)));
}

}  // namespace linea::cpu
