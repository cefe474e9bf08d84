// Per-head broadcasts (the contracts are in kernels/ops.h), rows of H heads of P channels:
//   repeat_heads        out[n, h, p] = x[n, p];            sum_heads: dx[n, p] = Σ_h dout[n, h, p]
//   scale_heads         out[n, h, p] = x[n, h, p] s[n, h];  dx = dout s, ds[n, h] = Σ_p dout x
//   add_scaled_heads    y[n, h, p] += D[h] x[n, h, p];      dx += D dy, dD[h] += Σ_{n,p} dy x
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void repeat_heads(T* out, const T* x, int64_t rows, int64_t heads, int64_t width);
template <class T>
void sum_heads(T* dx, const T* dout, int64_t rows, int64_t heads, int64_t width);
template <class T>
void scale_heads_forward(T* out, const T* x, const T* s, int64_t rows, int64_t heads, int64_t width);
template <class T>
void scale_heads_backward(T* dx, T* ds, const T* dout, const T* x, const T* s, int64_t rows, int64_t heads,
                          int64_t width);
template <class T>
void add_scaled_heads_forward(T* y, const T* x, const T* D, int64_t rows, int64_t heads, int64_t width);
template <class T>
void add_scaled_heads_backward(T* dx, T* dD, const T* dy, const T* x, const T* D, int64_t rows, int64_t heads,
                               int64_t width);

}  // namespace linea::cpu
