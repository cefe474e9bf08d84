// The gates of the gated-linear-attention family and HGRN (the contracts are in kernels/ops.h):
//   log forget gate  g = gl / normalizer, gl = log(lb + (1 − lb) σ(x)) = logaddexp(log lb, log(1 − lb) + logσ(x))
//                    ∂gl/∂x = exp(log(1 − lb) + logσ(x) − gl) · σ(−x),  ∂gl/∂lb = exp(logσ(−x) − gl)
//                    (lb = 0: gl = logσ(x); lower_bound null means lb = 0 and no dlb)
//   forget input     out = silu(i) · (1 − exp(g)):  di = dout (1 − e^g) silu'(i),  dg = −dout silu(i) e^g
//   exp decay        g = −exp(w):  dw = dg · g
//   ssd gate         Δ = softplus(dt + dt_bias_h), g = −exp(A_log_h) Δ:
//                    ddt = (ddelta − exp(A_log_h) dg) σ(dt + dt_bias_h),  ddt_bias_h += Σ_n ddt,
//                    dA_log_h += Σ_n dg · g
//   lower bounds     p = softmax over the L rows of Γ (per channel), lb_ℓ = Σ_{1≤m≤ℓ} p_m;
//                    dΓ_j += p_j (dp_j − Σ_m p_m dp_m), dp_m = dlb for 1 ≤ m ≤ ℓ
// Rows of `width` channels (forget gate) or `heads` values (ssd gate). Parameter gradients are
// accumulated in fixed row blocks (kernels/cpu/row_blocks.h).
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void log_forget_gate_forward(T* g, const T* x, const T* lower_bound, int64_t rows, int64_t width, T normalizer);
template <class T>
void log_forget_gate_backward(T* dx, T* dlower_bound, const T* dg, const T* x, const T* lower_bound, int64_t rows,
                              int64_t width, T normalizer);

template <class T>
void forget_input_forward(T* out, const T* i, const T* g, int64_t n);
template <class T>
void forget_input_backward(T* di, T* dg, const T* dout, const T* i, const T* g, int64_t n);

template <class T>
void exp_decay_forward(T* g, const T* w, int64_t n);
template <class T>
void exp_decay_backward(T* dw, const T* dg, const T* g, int64_t n);

template <class T>
void ssd_gate_forward(T* g, T* delta, const T* dt, const T* A_log, const T* dt_bias, int64_t rows, int64_t heads);
template <class T>
void ssd_gate_backward(T* ddt, T* dA_log, T* ddt_bias, const T* dg, const T* ddelta, const T* dt, const T* A_log,
                       const T* dt_bias, int64_t rows, int64_t heads);

template <class T>
void layer_lower_bound_forward(T* lower_bound, const T* gamma, int64_t layers, int64_t width, int64_t layer);
template <class T>
void layer_lower_bound_backward(T* dgamma, const T* dlower_bound, const T* gamma, int64_t layers, int64_t width,
                                int64_t layer);

}  // namespace linea::cpu
