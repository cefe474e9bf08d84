// Scalar activations of the CUDA kernels in float, the same formulas as kernels/cpu/activations.h:
// stable for any finite input (no exp of a large positive number is ever taken).
#pragma once

namespace linea::cuda {

// σ(a) = 1 / (1 + e^{−a}), evaluated through e^{−|a|} ≤ 1.
__device__ __forceinline__ float sigmoid(float a) {
  const float e = expf(-fabsf(a));
  return a >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

// silu(a) = a · σ(a)
__device__ __forceinline__ float silu(float a) { return a * sigmoid(a); }

// d silu / da = σ(a) · (1 + a · (1 − σ(a)))
__device__ __forceinline__ float silu_grad(float a) {
  const float s = sigmoid(a);
  return s * (1.0f + a * (1.0f - s));
}

// softplus(a) = log(1 + e^a) = max(a, 0) + log1p(e^{−|a|});  d softplus / da = σ(a)
__device__ __forceinline__ float softplus(float a) { return fmaxf(a, 0.0f) + log1pf(expf(-fabsf(a))); }

}  // namespace linea::cuda
