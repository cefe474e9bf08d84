// Scalar activations shared by the CPU kernels, written to be stable for any finite input:
// no exp of a large positive number is ever taken.
#pragma once
#include <cmath>

namespace linea::cpu {

// σ(a) = 1 / (1 + e^{−a}), evaluated through e^{−|a|} ≤ 1.
template <class T>
inline T sigmoid(T a) {
  const T e = std::exp(-std::abs(a));
  return a >= 0 ? T(1) / (T(1) + e) : e / (T(1) + e);
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
