// Mamba-style log decay (reference/mixers.md §1.0). Rows of width heads · per_head; column
// k = h · per_head + j belongs to head h:
//   g[n, k] = −exp(A_log[h]) · softplus(a[n, k] + dt_bias[k])            (so g ≤ 0)
// Backward (∂g/∂a = −exp(A_log[h]) · σ(a + dt_bias), ∂g/∂A_log[h] = g):
//   da[n, k] = dg[n, k] · (−exp(A_log[h]) · σ(a[n, k] + dt_bias[k]))       (overwritten)
//   ddt_bias[k] += Σ_n da[n, k],   dA_log[h] += Σ_n Σ_j dg[n, h·per_head + j] · g[n, h·per_head + j]
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void decay_gate_forward(T* g, const T* a, const T* A_log, const T* dt_bias, int64_t rows, int64_t heads,
                        int64_t per_head);

template <class T>
void decay_gate_backward(T* da, T* dA_log, T* ddt_bias, const T* dg, const T* a, const T* A_log, const T* dt_bias,
                         int64_t rows, int64_t heads, int64_t per_head);

}  // namespace linea::cpu
