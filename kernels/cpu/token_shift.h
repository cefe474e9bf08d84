// Token shift (RWKV-6; the contract is in kernels/ops.h) over rows of `width` channels:
//   delta_t = x_{t−1} − x_t, with x_{t−1} = 0 at the first token of t's sequence;
//   dx_t = −ddelta_t + ddelta_{t+1}, the second term only when t + 1 is in t's sequence;
// and its lerp, out = x + delta ⊙ mu with mu per row ([N, C]) or shared by the rows ([C]):
//   ddelta += dout ⊙ mu,  dmu = dout ⊙ delta (per row) or dmu += Σ_rows dout ⊙ delta (shared).
#pragma once
#include <cstdint>

#include "kernels/seq_layout.h"

namespace linea::cpu {

template <class T>
void token_shift_forward(T* delta, const T* x, const SeqLayout& seqs, int64_t width);
template <class T>
void token_shift_backward(T* dx, const T* ddelta, const SeqLayout& seqs, int64_t width);

template <class T>
void lerp_forward(T* out, const T* x, const T* delta, const T* mu, bool mu_per_row, int64_t rows, int64_t width);
template <class T>
void lerp_backward(T* ddelta, T* dmu, const T* dout, const T* delta, const T* mu, bool mu_per_row, int64_t rows,
                   int64_t width);

}  // namespace linea::cpu
