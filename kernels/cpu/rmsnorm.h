// RMSNorm over groups of channels with an optional output gate; serves ops::rmsnorm_* (one group
// per row, no gate) and ops::gated_rmsnorm_* (one group per head).
//
// A row of `heads · dim` values holds `heads` groups of `dim` channels; γ (weight, [dim]) is shared
// by the groups. For one group o with gate input z:
//   r = 1 / sqrt(Σ_j o_j² / dim + eps)          (saved as rstd[row · heads + head])
//   u_j = o_j · r · γ_j,   y_j = u_j · act(z_j)   (act ≡ 1 when GateActivation::none; z unused)
// Backward, with ô = o · r and du_j = dy_j · act(z_j):
//   dz_j = dy_j · u_j · act'(z_j)
//   do_j = r · (γ_j · du_j − ô_j · (1/dim) Σ_i γ_i · du_i · ô_i)
//   dγ_j += Σ_{rows, groups} du_j · ô_j          (accumulated, deterministic row-block order)
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace linea::cpu {

// With a residual (same layout as o), the group is first formed as sum = o + residual, written to
// `sum` (which may alias o or residual), and normed instead of o (the residual stream's add fused
// into the norm's pass; the same bits as add_inplace then the norm).
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* o, const T* z, const T* weight, int64_t rows, int64_t heads, int64_t dim,
                     ops::GateActivation act, T eps, const T* residual = nullptr, T* sum = nullptr);

// dz may be null when act == none; do and dz are overwritten, dweight accumulated. With a residual
// (same layout as d_o, may alias d_o or dout), d_o = do_j + residual_j instead (the add of a
// residual stream's gradient fused into the norm's backward; the same bits as the unfused add).
// With recompute_out (not null; then rstd is not read and may be null), r is recomputed from o and
// eps as the forward does and the forward's y written to recompute_out (which aliases no input).
template <class T>
void rmsnorm_backward(T* d_o, T* dz, T* dweight, const T* dout, const T* o, const T* z, const T* weight, const T* rstd,
                      int64_t rows, int64_t heads, int64_t dim, ops::GateActivation act, const T* residual = nullptr,
                      T* recompute_out = nullptr, T eps = T(0));

}  // namespace linea::cpu
