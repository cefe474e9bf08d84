// Short causal depthwise convolution over time followed by SiLU (ShortConv, reference/mixers.md
// §1.0), never reading across the sequences of a SeqLayout. x, out: [N, C]; weight: [C, W]; bias:
// [C] or null. With b(t) the first token of t's sequence and x[s, c] = 0 for s < b(t):
//   pre[t, c] = Σ_{i<W} weight[c, i] · x[t − (W−1) + i, c] (+ bias[c]),     out = silu(pre)
// Backward (pre recomputed), with dpre = dout · silu'(pre) and e(s) one past the last token of s's
// sequence:
//   dx[s, c] = Σ_{i<W, s+(W−1)−i < e(s)} weight[c, i] · dpre[s + (W−1) − i, c]       (overwritten)
//   dweight[c, i] += Σ_{t, t−(W−1)+i ≥ b(t)} dpre[t, c] · x[t − (W−1) + i, c]        (accumulated)
//   dbias[c] += Σ_t dpre[t, c]                                                        (with a bias)
#pragma once
#include <cstdint>

#include "kernels/seq_layout.h"

namespace linea::cpu {

template <class T>
void short_conv_silu_forward(T* out, const T* x, const T* weight, const T* bias, const SeqLayout& seqs,
                             int64_t channels, int64_t width);

template <class T>
void short_conv_silu_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* bias,
                              const SeqLayout& seqs, int64_t channels, int64_t width);

}  // namespace linea::cpu
