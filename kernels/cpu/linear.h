// Fully connected layer on row-major matrices, through BLAS.
//   forward:  out[n, o] = Σ_i x[n, i] · W[o, i] + b[o]          out = x · Wᵀ + b
//   backward: dx = dout · W            (written, or added when accumulate_dx)
//             dW += doutᵀ · x,  db[o] += Σ_n dout[n, o]
// x: [n, in], W: [out, in], b: [out] (null = no bias); any of dx, dW, db may be null to skip it.
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void linear_forward(T* out, const T* x, const T* weight, const T* bias, int64_t n, int64_t in, int64_t out_features);

template <class T>
void linear_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, int64_t n, int64_t in,
                     int64_t out_features, bool accumulate_dx);

}  // namespace linea::cpu
