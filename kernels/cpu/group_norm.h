// GroupNorm over rows of `width` channels in `groups` groups of P = width / groups (the contract is
// in kernels/ops.h). Per row and group, with x̂ = (x − μ) · rstd:
//   forward   μ = mean(x), rstd = 1 / sqrt(mean((x − μ)²) + eps), y = x̂ · w + b
//   backward  dx̂ = dy ⊙ w,  dx = rstd · (dx̂ − mean(dx̂) − x̂ · mean(dx̂ ⊙ x̂)),
//             dw += Σ_rows dy ⊙ x̂,  db += Σ_rows dy
#pragma once
#include <cstdint>

namespace linea::cpu {

template <class T>
void group_norm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, int64_t rows,
                        int64_t width, int64_t groups, T eps);
template <class T>
void group_norm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                         const T* rstd, int64_t rows, int64_t width, int64_t groups);

}  // namespace linea::cpu
